/* Fuzz target: bytes as a file being imported into a store.  Each input is
 * ingested under four names (model.pt, model.safetensors,
 * model.safetensors.index.json and model.distcp, a DCP data file of
 * torch.save blobs end to end) through the same classification, zip,
 * pickle, tensor walk, layer and hashing code as `ckptctl import`, and must
 * end indexed with self-consistent records or refused with a reason. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/layers.h"
#include "ingest/ingester.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const suffixes[] = { ".pt", ".safetensors", ".safetensors.index.json", ".distcp" };
#define NFILES (sizeof(suffixes) / sizeof(suffixes[0]))

static char dir[64];
static char paths[NFILES][128];
static struct ck_layer_rules *rules;

static void cleanup(void)
{
	size_t i;

	for (i = 0; i < NFILES; i++)
		unlink(paths[i]);
	rmdir(dir);
	ck_layer_rules_free(rules);
}

static void setup(void)
{
	struct ck_error err;
	size_t i;

	snprintf(dir, sizeof(dir), "%s/fuzz_ingest.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir) || ck_layer_rules_default(&rules, &err) < 0)
		abort();
	for (i = 0; i < NFILES; i++)
		snprintf(paths[i], sizeof(paths[i]), "%s/model%s", dir, suffixes[i]);
	atexit(cleanup);
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t done = 0;

	if (fd < 0)
		abort();
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0)
			abort();
		done += (size_t)n;
	}
	close(fd);
}

/* Records of an indexed file must describe bytes inside it. */
static void check(const struct ck_ingest *in, size_t size)
{
	size_t i, j;

	if (in->info.kind == CK_FILE_BAD) {
		if (!in->info.error || !*in->info.error || in->nst || in->nt)
			abort();
		return;
	}
	if (in->info.size != size || in->info.ntensors != in->nt)
		abort();
	for (i = 0; i < in->nst; i++) {
		if (in->st[i].offset > size || in->st[i].length > size - in->st[i].offset)
			abort();
	}
	for (i = 0; i < in->nt; i++) {
		if (in->t[i].ndim < 0 || in->t[i].ndim > CK_MAX_DIMS || !in->t[i].layer[0])
			abort();
		for (j = 0; j < in->nst && strcmp(in->st[j].key, in->t[i].storage_key); j++)
			;
		if (j == in->nst)
			abort();   /* a tensor whose storage was not recorded */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i;

	if (!rules)
		setup();
	for (i = 0; i < NFILES; i++) {
		struct ck_ingest in;
		int rc;

		write_file(paths[i], data, size);
		rc = ck_ingest_file(paths[i], "model", rules, NULL, &in);
		if (rc == -ENOMEM)
			continue;
		if (rc != 0)
			abort();
		check(&in, size);
		ck_ingest_clear(&in);
	}
	return 0;
}
