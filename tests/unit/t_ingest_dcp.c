/* A torch DCP data file (*.distcp) at import: torch.save blobs end to end
 * (real torch 2.x files from $CKPT_FIXTURES) are served as they are
 * (kind other) with every blob's tensors indexed at their absolute offsets,
 * keyed "N/<key>" by item, hashed as in the standalone files; a file that
 * is not made of blobs all the way (trailing bytes, a blob cut short) is
 * bytes only, neither indexed nor refused.
 *
 * A whole save (tests/unit/data/dcp/two-ranks: a matrix split by rows
 * over two ranks, a bias, a float and an object holding a tensor as bytes
 * items) read with ck_ingest_dcp_names: its records are named after its
 * FQNs and chunks with their layers, bytes items get a storage of their
 * own; a data file cut short or missing refuses the .metadata with the
 * reason and leaves the data files as they were. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/layers.h"
#include "ingest/ingester.h"
#include "testutil.h"

#define NBLOBS 3
static const char *const blobs[NBLOBS] = {
	"torch2x/candle_test.pt", "torch2x/burn_reader_parameter.pt", "torch2x/burn_reader_checkpoint.pt",
};

static struct ck_layer_rules *rules;

static void ingest(const char *path, struct ck_ingest *in)
{
	int rc = ck_ingest_file(path, "x", rules, NULL, in);

	SETUP(rc == 0);
}

static const struct ck_storage_info *storage(const struct ck_ingest *in, const char *key)
{
	for (size_t i = 0; i < in->nst; i++)
		if (!strcmp(in->st[i].key, key))
			return &in->st[i];
	return NULL;
}

/* Every storage and tensor of blob k (ingested alone as `one`) is in the
 * DCP file's index, keyed "k/...", shifted by base, with the same hash. */
static void same_as_alone(const struct ck_ingest *in, const struct ck_ingest *one, size_t k, uint64_t base)
{
	char key[512];

	for (size_t i = 0; i < one->nst; i++) {
		const struct ck_storage_info *s;

		snprintf(key, sizeof(key), "%zu/%s", k, one->st[i].key);
		s = storage(in, key);
		CHECK(s != NULL, "blob %zu: storage %s not indexed", k, key);
		if (!s)
			continue;
		CHECK(s->offset == base + one->st[i].offset && s->length == one->st[i].length,
		      "%s at %llu+%llu, alone at %llu+%llu", key, (unsigned long long)s->offset,
		      (unsigned long long)s->length, (unsigned long long)one->st[i].offset,
		      (unsigned long long)one->st[i].length);
		CHECK(s->hash_lo == one->st[i].hash_lo && s->hash_hi == one->st[i].hash_hi, "%s: hash differs", key);
	}
	for (size_t i = 0; i < one->nt; i++) {
		int found = 0;

		snprintf(key, sizeof(key), "%zu/%s", k, one->t[i].name);
		for (size_t j = 0; j < in->nt && !found; j++)
			found = !strcmp(in->t[j].name, key) && in->t[j].dtype == one->t[i].dtype &&
				!strncmp(in->t[j].storage_key, key, strlen(key) - strlen(one->t[i].name));
		CHECK(found, "blob %zu: tensor %s not indexed", k, key);
	}
}

static const struct ck_storage_info *find_storage(const struct ck_ingest *in, const char *key)
{
	for (size_t i = 0; i < in->nst; i++)
		if (!strcmp(in->st[i].key, key))
			return &in->st[i];
	return NULL;
}

static const struct ck_tensor_info *find_tensor(const struct ck_ingest *in, const char *name)
{
	for (size_t i = 0; i < in->nt; i++)
		if (!strcmp(in->t[i].name, name))
			return &in->t[i];
	return NULL;
}

static const char *const save_files[3] = { ".metadata", "__0_0.distcp", "__1_0.distcp" };

/* The two-ranks save copied to dir (the second data file cut to `keep`
 * bytes, or left out when keep is 0), ingested and named. */
static void ingest_save(const char *dir, size_t keep, struct ck_ingest *f, size_t *n)
{
	const char *src = getenv("CKPT_SRCDIR") ? getenv("CKPT_SRCDIR") : ".";
	char p[512];

	*n = 0;
	for (size_t k = 0; k < 3; k++) {
		size_t len;
		uint8_t *b = read_file(pathf(p, sizeof(p), "%s/tests/unit/data/dcp/two-ranks/%s", src, save_files[k]), &len);

		SETUP(b);
		if (k == 2 && keep == 0) {
			free(b);
			unlink(pathf(p, sizeof(p), "%s/%s", dir, save_files[k]));
			continue;
		}
		write_bytes(pathf(p, sizeof(p), "%s/%s", dir, save_files[k]), b, k == 2 && keep < len ? keep : len);
		free(b);
		SETUP(ck_ingest_file(p, save_files[k], rules, NULL, &f[*n]) == 0);
		(*n)++;
	}
	SETUP(ck_ingest_dcp_names(f, *n, rules) == 0);
}

static void test_names(const char *tmp)
{
	struct ck_ingest f[3];
	const struct ck_storage_info *s;
	const struct ck_tensor_info *t;
	size_t n;

	ingest_save(tmp, SIZE_MAX, f, &n);
	CHECK(f[0].info.kind == CK_FILE_OTHER && !f[0].info.error, ".metadata: kind %d, %s", f[0].info.kind,
	      f[0].info.error ? f[0].info.error : "-");
	CHECK(f[1].info.kind == CK_FILE_OTHER && f[2].info.kind == CK_FILE_OTHER, "data files' kinds");
	t = find_tensor(&f[1], "model.layers.0.weight[0:2, 0:4]");
	CHECK(t && t->ndim == 2 && t->shape[0] == 2 && !strcmp(t->layer, "layers.0") &&
		      !strcmp(t->storage_key, "model.layers.0.weight[0:2, 0:4]"),
	      "rank 0's chunk: %s %s", t ? t->layer : "-", t ? t->storage_key : "-");
	t = find_tensor(&f[2], "model.layers.0.weight[2:4, 0:4]");
	CHECK(t && !strcmp(t->layer, "layers.0"), "rank 1's chunk");
	CHECK(f[2].nt == 5 && f[2].nst == 5, "rank 1: %zu tensors, %zu storages", f[2].nt, f[2].nst);
	t = find_tensor(&f[1], "model.layers.0.bias");
	CHECK(t && t->ndim == 1 && !strcmp(t->layer, "layers.0"), "the bias");
	t = find_tensor(&f[1], "extra.t");
	CHECK(t && t->ndim == 1 && t->shape[0] == 2 && find_storage(&f[1], t->storage_key), "a tensor in a bytes item: %s",
	      t ? t->storage_key : "-");
	s = find_storage(&f[1], "optim.param_groups.0.lr");
	CHECK(s && s->length > 0 && (s->hash_lo || s->hash_hi), "a bytes item's own storage");
	for (size_t k = 1; k < 3; k++) {
		for (size_t i = 0; i < f[k].nst; i++)
			CHECK(f[k].st[i].key[0] < '0' || f[k].st[i].key[0] > '9', "unnamed storage %s", f[k].st[i].key);
		for (size_t i = 0; i < f[k].nt; i++)
			CHECK(f[k].t[i].name[0] < '0' || f[k].t[i].name[0] > '9', "unnamed tensor %s", f[k].t[i].name);
	}
	CHECK(f[1].nt + f[2].nt == 16, "%zu + %zu tensors", f[1].nt, f[2].nt);
	CHECK(find_tensor(&f[2], "model.layers.4.weight[2:4, 0:4]") && find_tensor(&f[1], "model.layers.4.bias"),
	      "the last items");
	for (size_t i = 0; i < n; i++)
		ck_ingest_clear(&f[i]);

	ingest_save(tmp, 700, f, &n);
	CHECK(f[0].info.kind == CK_FILE_BAD && f[0].info.error &&
		      strstr(f[0].info.error, "of __1_0.distcp, which has 700"),
	      "a data file cut short: %s", f[0].info.error ? f[0].info.error : "-");
	CHECK(f[1].info.kind == CK_FILE_OTHER && f[1].nt && strchr(f[1].t[0].name, '/'), "data file 0 stays as ingested");
	for (size_t i = 0; i < n; i++)
		ck_ingest_clear(&f[i]);

	ingest_save(tmp, 0, f, &n);
	CHECK(f[0].info.kind == CK_FILE_BAD && f[0].info.error &&
		      strstr(f[0].info.error, "is stored in __1_0.distcp, which is not there"),
	      "a data file missing: %s", f[0].info.error ? f[0].info.error : "-");
	for (size_t i = 0; i < n; i++)
		ck_ingest_clear(&f[i]);
	for (size_t k = 0; k < 3; k++) {
		char p[512];

		unlink(pathf(p, sizeof(p), "%s/%s", tmp, save_files[k]));
	}
}

int main(void)
{
	const char *fixtures = test_fixtures();
	struct ck_ingest alone[NBLOBS], in;
	char tmp[256], p[512], dcp[512];
	uint8_t *all = NULL;
	size_t total = 0, nt = 0, nst = 0;
	uint64_t base[NBLOBS];
	struct ck_error err;
	struct stat sb;

	SETUP(ck_layer_rules_default(&rules, &err) == 0);
	snprintf(tmp, sizeof(tmp), "%s/t_ingest_dcp.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	test_names(tmp);
	if (!fixtures || stat(pathf(p, sizeof(p), "%s/%s", fixtures, blobs[0]), &sb) < 0) {
		printf("SKIP: no fixtures (CKPT_FIXTURES): blobs of real torch 2.x files not tried\n");
		rmdir(tmp);
		ck_layer_rules_free(rules);
		return test_failures ? test_result() : 77;
	}

	for (size_t k = 0; k < NBLOBS; k++) {
		size_t n;
		uint8_t *b = read_file(pathf(p, sizeof(p), "%s/%s", fixtures, blobs[k]), &n);

		SETUP(b && (all = realloc(all, total + n)));
		memcpy(all + total, b, n);
		base[k] = total;
		total += n;
		free(b);
		ingest(p, &alone[k]);
		SETUP(alone[k].info.kind == CK_FILE_TORCH && alone[k].nt > 0);
		nt += alone[k].nt;
		nst += alone[k].nst;
	}

	/* The blobs end to end. */
	pathf(dcp, sizeof(dcp), "%s/__0_0.distcp", tmp);
	write_bytes(dcp, all, total);
	ingest(dcp, &in);
	CHECK(in.info.kind == CK_FILE_OTHER, "kind %d, error %s", in.info.kind, in.info.error ? in.info.error : "-");
	CHECK(in.nt == nt && in.info.ntensors == nt && in.nst == nst, "%zu tensors / %zu storages, want %zu / %zu",
	      in.nt, in.nst, nt, nst);
	for (size_t k = 0; k < NBLOBS; k++)
		same_as_alone(&in, &alone[k], k, base[k]);
	ck_ingest_clear(&in);

	/* The same bytes under another name are one zip's worth of garbage:
	 * the ordinary torch.save path refuses them. */
	write_bytes(pathf(p, sizeof(p), "%s/model.pt", tmp), all, total);
	ingest(p, &in);
	CHECK(in.info.kind == CK_FILE_BAD, "the blobs as a .pt: kind %d", in.info.kind);
	ck_ingest_clear(&in);
	unlink(p);

	/* Trailing bytes: the walk from the end finds no zip, bytes only. */
	all = realloc(all, total + 5);
	SETUP(all);
	memcpy(all + total, "tail!", 5);
	write_bytes(dcp, all, total + 5);
	ingest(dcp, &in);
	CHECK(in.info.kind == CK_FILE_OTHER && in.nt == 0 && in.nst == 0 && !in.info.error,
	      "trailing bytes: kind %d, %zu tensors", in.info.kind, in.nt);
	ck_ingest_clear(&in);

	/* The middle blob cut short (its end records kept): the walk finds the
	 * last blob, then no zip before it ends where the cut one started. */
	{
		size_t cut = 100, n = total - cut;
		uint8_t *b = malloc(n);

		SETUP(b);
		memcpy(b, all, base[1] + 40);
		memcpy(b + base[1] + 40, all + base[1] + 40 + cut, total - base[1] - 40 - cut);
		write_bytes(dcp, b, n);
		free(b);
		ingest(dcp, &in);
		CHECK(in.info.kind == CK_FILE_OTHER && in.nt == 0 && in.nst == 0,
		      "a blob cut short: kind %d, %zu tensors, error %s", in.info.kind, in.nt,
		      in.info.error ? in.info.error : "-");
		ck_ingest_clear(&in);
	}

	for (size_t k = 0; k < NBLOBS; k++)
		ck_ingest_clear(&alone[k]);
	free(all);
	unlink(dcp);
	rmdir(tmp);
	ck_layer_rules_free(rules);
	return test_result();
}
