/* Ingesting a torch.save zip: parse the container and data.pkl (never
 * executing anything), refuse pickles that name dangerous globals, check
 * that every storage's record exists and holds its bytes and that every
 * tensor view lies inside its storage, then read each record once to check
 * its CRC-32 against the central directory while hashing the storages. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/torchzip.h"
#include "ckptfs/walk.h"
#include "ingester.h"

struct torch_ctx {
	struct ck_ingest_io *io;
	struct ck_ingest *in;
	const struct tz_archive *ar;
	struct ck_optim_names *optim;
	char bad[512];          /* set by the walk callback to refuse the file */
};

static int zip_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	return ck_ingest_pread(ctx, buf, len, off);
}

/* name with the window's prefix ("3/" in a DCP file), or name itself;
 * *tmp (freed by the caller) holds the joined string. */
static const char *prefixed(const struct ck_ingest_io *io, const char *name, char **tmp)
{
	*tmp = NULL;
	if (!io->prefix)
		return name;
	if (asprintf(tmp, "%s%s", io->prefix, name) < 0) {
		*tmp = NULL;
		return NULL;
	}
	return *tmp;
}

static const struct tz_entry *storage_record(const struct tz_archive *ar, const char *key)
{
	char name[512];

	if ((size_t)snprintf(name, sizeof(name), "data/%s", key) >= sizeof(name))
		return NULL;
	return tz_find(ar, name);
}

/* Bytes a storage's elements occupy, or 0 with *bad set on overflow/unknown type. */
static uint64_t storage_nbytes(const struct pk_storage *s, const char **bad)
{
	size_t es = ck_dtype_size(s->dtype);
	uint64_t nbytes;

	if (!es) {
		*bad = "unknown storage type";
		return 0;
	}
	if (__builtin_mul_overflow(s->numel, (uint64_t)es, &nbytes)) {
		*bad = "storage size overflows";
		return 0;
	}
	return nbytes;
}

/* 0 if every element of the view lies inside its storage. */
static int view_in_storage(const struct pk_tensor *t)
{
	uint64_t last = t->offset, span, need, have;
	size_t es = ck_dtype_size(t->dtype);
	int i;

	if (!t->storage || !es)
		return -1;
	for (i = 0; i < t->ndim; i++) {
		if (t->shape[i] == 0)
			return 0;          /* empty: touches no element */
		if (t->stride[i] < 0)
			return -1;
	}
	for (i = 0; i < t->ndim; i++) {
		if (__builtin_mul_overflow(t->shape[i] - 1, (uint64_t)t->stride[i], &span) ||
		    __builtin_add_overflow(last, span, &last))
			return -1;
	}
	if (__builtin_add_overflow(last, 1, &need) || __builtin_mul_overflow(need, (uint64_t)es, &need))
		return -1;
	if (__builtin_mul_overflow(t->storage->numel, (uint64_t)ck_dtype_size(t->storage->dtype), &have))
		return -1;
	return need <= have ? 0 : -1;
}

static int on_tensor(void *ctx, const char *path, const struct pk_node *node, const struct pk_tensor *t)
{
	struct torch_ctx *tc = ctx;
	const char *param = ck_optim_names_lookup(tc->optim, path);
	char layer[256], *name_tmp, *key_tmp;
	const char *name, *key;
	int rc;

	if (view_in_storage(t) < 0) {
		snprintf(tc->bad, sizeof(tc->bad), "tensor '%s': view lies outside its storage", path);
		return 1;
	}
	if (ck_layer_of(tc->io->rules, param ? param : path, layer, sizeof(layer)) < 0)
		snprintf(layer, sizeof(layer), "other");
	name = prefixed(tc->io, path, &name_tmp);
	key = prefixed(tc->io, t->storage->key, &key_tmp);
	rc = name && key ? ck_ingest_add_tensor(tc->in, name, layer, t->dtype, t->ndim, t->shape, key, t->offset)
			 : -ENOMEM;
	free(name_tmp);
	free(key_tmp);
	return rc;
}

static int on_unreadable(void *ctx, const char *path, const struct pk_node *node)
{
	struct torch_ctx *tc = ctx;

	snprintf(tc->bad, sizeof(tc->bad), "tensor '%s': cannot read its %s call (malformed arguments, "
		 "or a view outside its storage)", path, node->cls->v.global.name);
	return 1;
}

/* Storages: every record present and large enough.  0, or 1 when refused. */
static int add_storages(struct torch_ctx *tc, const struct pk_doc *doc, int *refused)
{
	size_t i, n = pk_doc_nstorages(doc);

	for (i = 0; i < n; i++) {
		const struct pk_storage *s = pk_doc_storage(doc, i);
		const struct tz_entry *e = storage_record(tc->ar, s->key);
		const char *why = NULL;
		uint64_t nbytes = storage_nbytes(s, &why);
		int rc;

		*refused = 1;     /* until the checks below pass */
		if (why)
			return ck_ingest_bad(tc->in, "data/%s: %s", s->key, why);
		if (!e)
			return ck_ingest_bad(tc->in, "data/%s: storage record missing from the archive", s->key);
		if (nbytes > e->size)
			return ck_ingest_bad(tc->in, "data/%s: storage needs %" PRIu64 " bytes, record holds %" PRIu64,
					     s->key, nbytes, e->size);
		*refused = 0;
		{
			char *tmp;
			const char *key = prefixed(tc->io, s->key, &tmp);

			rc = key ? ck_ingest_add_storage(tc->in, key, tc->io->base + e->data_offset, nbytes) : -ENOMEM;
			free(tmp);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_entry_offset(const void *a, const void *b)
{
	const struct tz_entry *x = *(const struct tz_entry *const *)a;
	const struct tz_entry *y = *(const struct tz_entry *const *)b;

	return x->data_offset < y->data_offset ? -1 : x->data_offset > y->data_offset;
}

static int cmp_storage_offset(const void *a, const void *b)
{
	const struct ck_storage_info *x = *(const struct ck_storage_info *const *)a;
	const struct ck_storage_info *y = *(const struct ck_storage_info *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Reads every record once in file order: CRC check, storage hashes.
 * Records and storages are both walked in offset order, so matching a
 * record to its storage costs nothing even with 100k storages. */
static int verify_and_hash(struct torch_ctx *tc)
{
	const struct tz_archive *ar = tc->ar;
	const struct tz_entry **order;
	struct ck_storage_info **st;
	/* Only this window's storages: earlier DCP blobs are hashed already. */
	size_t i, j = 0, nst = tc->in->nst - tc->io->st_from;
	int rc = 0;

	order = malloc((ar->n ? ar->n : 1) * sizeof(*order));
	st = malloc((nst ? nst : 1) * sizeof(*st));
	if (!order || !st) {
		free(order);
		free(st);
		return -ENOMEM;
	}
	for (i = 0; i < ar->n; i++)
		order[i] = &ar->entries[i];
	for (i = 0; i < nst; i++)
		st[i] = &tc->in->st[tc->io->st_from + i];
	if (ar->n > 1)
		qsort(order, ar->n, sizeof(*order), cmp_entry_offset);
	if (nst > 1)
		qsort(st, nst, sizeof(*st), cmp_storage_offset);
	for (i = 0; i < ar->n && rc == 0; i++) {
		const struct tz_entry *e = order[i];
		struct ck_storage_info *s = NULL;
		uint32_t crc;

		while (j < nst && st[j]->offset < tc->io->base + e->data_offset)
			j++;
		if (j < nst && st[j]->offset == tc->io->base + e->data_offset)
			s = st[j];
		rc = ck_ingest_read(tc->io, e->data_offset, e->size, s ? s->length : 0, &crc,
				    s ? &s->hash_lo : NULL, s ? &s->hash_hi : NULL);
		if (rc == -ENOMEM)
			break;
		if (rc < 0) {
			rc = ck_ingest_bad(tc->in, "%s: read error: %s", e->name, strerror(-rc));
			break;
		}
		/* A zero CRC on a non-empty record means the writer did not
		 * compute one (torch.serialization.set_crc32_options(False)). */
		if (crc != e->crc32 && e->crc32 != 0) {
			rc = ck_ingest_bad(tc->in, "%s: CRC mismatch (recorded %08" PRIx32 ", data %08" PRIx32 ")",
					   e->name, e->crc32, crc);
			break;
		}
	}
	free(order);
	free(st);
	return rc;
}

static int check_globals(struct ck_ingest *in, const struct pk_doc *doc, int *refused)
{
	const struct pk_node *g;

	if (pk_doc_dangerous_global(doc, &g)) {
		*refused = 1;
		in->hostile = 1;
		return ck_ingest_bad(in, "data.pkl: refers to dangerous global %s.%s (never executed)",
				     g->v.global.module, g->v.global.name);
	}
	return 0;
}

static int parse_pickle(struct torch_ctx *tc, const struct tz_entry *pkl, struct pk_doc **doc, int *refused)
{
	struct ck_error err = { { 0 } };
	uint8_t *bytes;
	int rc;

	*refused = 1;
	if (pkl->size > CK_INGEST_MAX_PICKLE)
		return ck_ingest_bad(tc->in, "data.pkl: %" PRIu64 " bytes is larger than the %llu byte limit",
				     pkl->size, (unsigned long long)CK_INGEST_MAX_PICKLE);
	rc = ck_ingest_slurp(tc->io, pkl->data_offset, pkl->size, &bytes);
	if (rc < 0)
		return rc == -ENOMEM ? rc : ck_ingest_bad(tc->in, "data.pkl: read error: %s", strerror(-rc));
	rc = pk_parse(bytes, (size_t)pkl->size, NULL, doc, &err);
	free(bytes);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_ingest_bad(tc->in, "data.pkl: %s", err.msg);
	*refused = 0;
	return 0;
}

int ck_ingest_torch(struct ck_ingest_io *io, struct ck_ingest *in)
{
	static const struct ck_walk_opts walk_opts = { .unreadable = on_unreadable };
	struct ck_error err = { { 0 } };
	struct torch_ctx tc = { .io = io, .in = in };
	struct tz_archive ar = { 0 };
	struct pk_doc *doc = NULL;
	const struct tz_entry *pkl;
	int refused = 0, rc;
	size_t i;

	rc = tz_read(zip_pread, io, io->size, &ar, &err);
	if (rc < 0)
		return rc == -ENOMEM ? rc : ck_ingest_bad(in, "not a readable zip: %s", err.msg);
	tc.ar = &ar;
	pkl = tz_find(&ar, "data.pkl");
	if (!pkl) {
		in->info.kind = CK_FILE_OTHER;    /* a zip, but not a torch.save */
		goto out;
	}
	for (i = 0; i < ar.n; i++) {
		if (ar.entries[i].method != 0) {
			rc = ck_ingest_bad(in, "%s: compressed zip record (method %u): only stored records are supported",
					   ar.entries[i].name, ar.entries[i].method);
			goto out;
		}
	}
	rc = parse_pickle(&tc, pkl, &doc, &refused);
	if (rc < 0 || refused)
		goto out;
	rc = check_globals(in, doc, &refused);
	if (rc < 0 || refused)
		goto out;
	rc = add_storages(&tc, doc, &refused);
	if (rc < 0 || refused)
		goto out;
	rc = ck_optim_names_scan(pk_doc_root(doc), &tc.optim);
	if (rc < 0)
		goto out;
	rc = ck_walk_tensors_opts(pk_doc_root(doc), &walk_opts, on_tensor, &tc);
	if (rc == 1) {
		rc = ck_ingest_bad(in, "data.pkl: %s", tc.bad);
		goto out;
	}
	if (rc == -ENOMEM)
		goto out;
	if (rc < 0) {
		rc = ck_ingest_bad(in, "data.pkl: cannot walk the state tree: %s", strerror(-rc));
		goto out;
	}
	if (!ck_ingest_reuse_hashes(io, in))
		rc = verify_and_hash(&tc);
out:
	ck_optim_names_free(tc.optim);
	if (doc)
		pk_doc_free(doc);
	tz_archive_free(&ar);
	return rc;
}
