/* Hashing for the pickle module: SipHash-1-3 with a random key and a small
 * open-addressing table of positions.  Keys come from untrusted pickles, so
 * the hash is keyed (as CPython's dict is) to keep lookups O(1) on hostile
 * input. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "pickle_int.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND do { \
	v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
	v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
	v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
	v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
} while (0)

static uint64_t siphash13(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ key[0];
	uint64_t v1 = 0x646f72616e646f6dULL ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ key[0];
	uint64_t v3 = 0x7465646279746573ULL ^ key[1];
	uint64_t b = (uint64_t)len << 56, m;
	size_t i, tail = len & 7;

	for (i = 0; i + 8 <= len; i += 8) {
		m = ck_le64(p + i);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t k = 0; k < tail; k++)
		b |= (uint64_t)p[i + k] << (8 * k);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t hash_key[2];
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void)
{
	struct timespec ts;

	if (getrandom(hash_key, sizeof(hash_key), GRND_NONBLOCK) == (ssize_t)sizeof(hash_key))
		return;
	/* No entropy yet (early boot): still vary per process. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	hash_key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
	hash_key[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4fULL ^ (uint64_t)(uintptr_t)&ts;
}

uint64_t pk_hash_bytes(const void *data, size_t len)
{
	pthread_once(&hash_key_once, hash_key_init);
	return siphash13(hash_key, data, len);
}

long pk_htab_find(const struct pk_htab *t, uint64_t hash, pk_htab_eq_fn eq, const void *ctx)
{
	size_t i;

	if (!t->slots)
		return -1;
	for (i = hash & t->mask; t->slots[i].pos1; i = (i + 1) & t->mask)
		if (t->slots[i].hash == hash && eq(ctx, t->slots[i].pos1 - 1))
			return (long)(t->slots[i].pos1 - 1);
	return -1;
}

static void htab_place(struct pk_hslot *slots, size_t mask, uint64_t hash, uint32_t pos1)
{
	size_t i = hash & mask;

	while (slots[i].pos1)
		i = (i + 1) & mask;
	slots[i].hash = hash;
	slots[i].pos1 = pos1;
}

int pk_htab_add(struct pk_htab *t, uint64_t hash, uint32_t pos)
{
	if (pos == UINT32_MAX)
		return -ENOMEM;
	/* Keep the load at most 1/2 so probe sequences stay short. */
	if (!t->slots || (t->count + 1) * 2 > t->mask + 1) {
		size_t cap = t->slots ? (t->mask + 1) * 2 : 16;
		struct pk_hslot *slots = calloc(cap, sizeof(*slots));

		if (!slots)
			return -ENOMEM;
		if (t->slots)
			for (size_t i = 0; i <= t->mask; i++)
				if (t->slots[i].pos1)
					htab_place(slots, cap - 1, t->slots[i].hash, t->slots[i].pos1);
		free(t->slots);
		t->slots = slots;
		t->mask = cap - 1;
	}
	htab_place(t->slots, t->mask, hash, pos + 1);
	t->count++;
	return 0;
}

void pk_htab_free(struct pk_htab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
