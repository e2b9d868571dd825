/* Standalone driver for libFuzzer-style targets, used when the build is not
 * a libFuzzer build (gcc, CI's ASan+UBSan run).  It feeds every file named
 * on the command line (directories are walked one level) to the target,
 * then, when FUZZ_SECONDS is set, mutates those inputs at random (bit flips,
 * truncation, byte insertion, splicing) until the time is up.  Crashes show
 * up as sanitizer reports or signals; the exit status is 0 otherwise.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct corpus {
	uint8_t **data;
	size_t *size;
	size_t n, cap;
};

static int corpus_add(struct corpus *c, const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto fail;
	if (len > (64L << 20))   /* larger seeds are not useful here */
		goto fail;
	buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto fail;
	fclose(f);
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		uint8_t **d = realloc(c->data, cap * sizeof(*d));
		size_t *s;

		if (!d) {
			free(buf);
			return -1;
		}
		c->data = d;
		s = realloc(c->size, cap * sizeof(*s));
		if (!s) {
			free(buf);
			return -1;
		}
		c->size = s;
		c->cap = cap;
	}
	c->data[c->n] = buf;
	c->size[c->n++] = (size_t)len;
	return 0;
fail:
	free(buf);
	fclose(f);
	return -1;
}

static void corpus_add_path(struct corpus *c, const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	char sub[4096];

	if (stat(path, &st))
		return;
	if (!S_ISDIR(st.st_mode)) {
		corpus_add(c, path);
		return;
	}
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (!stat(sub, &st) && S_ISREG(st.st_mode))
			corpus_add(c, sub);
	}
	closedir(d);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap, const struct corpus *c)
{
	int rounds = 1 + (int)(rnd() % 4);

	while (rounds--) {
		switch (rnd() % 6) {
		case 0: /* bit flip */
			if (len)
				buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1: /* interesting byte */
			if (len) {
				static const uint8_t vals[] = { 0, 0xff, 0x7f, 0x80, 1, 0x2e, 0x28, 0x7d };
				buf[rnd() % len] = vals[rnd() % sizeof(vals)];
			}
			break;
		case 2: /* truncate */
			if (len)
				len = rnd() % len;
			break;
		case 3: /* insert random bytes */
			if (len < cap) {
				size_t at = len ? rnd() % len : 0, k = 1 + rnd() % 8;

				if (k > cap - len)
					k = cap - len;
				memmove(buf + at + k, buf + at, len - at);
				for (size_t i = 0; i < k; i++)
					buf[at + i] = (uint8_t)rnd();
				len += k;
			}
			break;
		case 4: /* splice in a piece of another input */
			if (c->n && len) {
				size_t j = rnd() % c->n, from, k, at = rnd() % len;

				if (!c->size[j])
					break;
				from = rnd() % c->size[j];
				k = 1 + rnd() % 64;
				if (k > c->size[j] - from)
					k = c->size[j] - from;
				if (k > len - at)
					k = len - at;
				memcpy(buf + at, c->data[j] + from, k);
			}
			break;
		default: /* 32-bit little-endian length-like value */
			if (len >= 4) {
				size_t at = rnd() % (len - 3);
				uint32_t v = (uint32_t)(rnd() % 3 == 0 ? 0xffffffffu : rnd() % 70000);

				memcpy(buf + at, &v, 4);
			}
			break;
		}
	}
	return len;
}

int main(int argc, char **argv)
{
	struct corpus c = { 0 };
	const char *secs = getenv("FUZZ_SECONDS");
	const char *seed = getenv("FUZZ_SEED");
	double budget = secs ? atof(secs) : 0;
	unsigned long iters = 0;
	struct timespec t0, t;
	uint8_t *buf;
	size_t cap;

	for (int i = 1; i < argc; i++)
		corpus_add_path(&c, argv[i]);
	for (size_t i = 0; i < c.n; i++)
		LLVMFuzzerTestOneInput(c.data[i], c.size[i]);
	LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
	if (budget <= 0 || !c.n) {
		printf("fuzz: replayed %zu inputs\n", c.n);
		goto out;
	}
	rng_state ^= seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
	cap = 1 << 20;
	buf = malloc(cap);
	if (!buf)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		size_t j = rnd() % c.n, len = c.size[j] < cap ? c.size[j] : cap;

		memcpy(buf, c.data[j], len);
		len = mutate(buf, len, cap, &c);
		LLVMFuzzerTestOneInput(buf, len);
		iters++;
		if ((iters & 63) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > budget)
				break;
		}
	}
	free(buf);
	printf("fuzz: replayed %zu inputs, ran %lu mutated inputs\n", c.n, iters);
out:
	for (size_t i = 0; i < c.n; i++)
		free(c.data[i]);
	free(c.data);
	free(c.size);
	return 0;
}
