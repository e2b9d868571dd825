/* Ingesting safetensors files (each tensor is its own byte range, named by
 * its key) and the index.json of sharded safetensors checkpoints. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "ckptfs/safetensors.h"
#include "ingester.h"

static int hash_tensors(struct ck_ingest_io *io, struct ck_ingest *in)
{
	size_t i;
	int rc;

	for (i = 0; i < in->nst; i++) {
		struct ck_storage_info *s = &in->st[i];

		rc = ck_ingest_read(io, s->offset, s->length, s->length, NULL, &s->hash_lo, &s->hash_hi);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0)
			return ck_ingest_bad(in, "tensor '%s': read error: %s", s->key, strerror(-rc));
	}
	return 0;
}

int ck_ingest_safetensors(struct ck_ingest_io *io, struct ck_ingest *in)
{
	struct ck_error err = { { 0 } };
	struct st_file sf = { 0 };
	uint8_t *prefix = NULL, *header = NULL;
	uint64_t n;
	size_t i;
	int rc;

	if (io->size < 8)
		return ck_ingest_bad(in, "safetensors: file of %" PRIu64 " bytes has no header", io->size);
	rc = ck_ingest_slurp(io, 0, 8, &prefix);
	if (rc < 0)
		return rc == -ENOMEM ? rc : ck_ingest_bad(in, "read error: %s", strerror(-rc));
	rc = st_header_len(prefix, io->size, &n, &err);
	free(prefix);
	if (rc < 0)
		return ck_ingest_bad(in, "safetensors: %s", err.msg);
	rc = ck_ingest_slurp(io, 8, n, &header);
	if (rc < 0)
		return rc == -ENOMEM ? rc : ck_ingest_bad(in, "read error: %s", strerror(-rc));
	rc = st_parse((const char *)header, (size_t)n, io->size, &sf, &err);
	free(header);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_ingest_bad(in, "safetensors: %s", err.msg);
	for (i = 0; i < sf.n && rc == 0; i++) {
		const struct st_tensor *t = &sf.tensors[i];
		char layer[256];

		if (ck_layer_of(io->rules, t->name, layer, sizeof(layer)) < 0)
			strcpy(layer, "other");
		rc = ck_ingest_add_storage(in, t->name, sf.data_start + t->begin, t->end - t->begin);
		if (rc == 0)
			rc = ck_ingest_add_tensor(in, t->name, layer, t->dtype, t->ndim, t->shape, t->name, 0);
	}
	st_file_free(&sf);
	if (rc < 0)
		return rc;
	if (!ck_ingest_reuse_hashes(io, in))
		rc = hash_tensors(io, in);
	return rc;
}

int ck_ingest_safetensors_index(struct ck_ingest_io *io, struct ck_ingest *in)
{
	struct ck_error err = { { 0 } };
	const struct js_value *map;
	struct js_doc *doc = NULL;
	uint8_t *text;
	size_t i;
	int rc;

	if (io->size > CK_INGEST_MAX_JSON)
		return ck_ingest_bad(in, "index: %" PRIu64 " bytes is larger than the %llu byte limit",
				     io->size, (unsigned long long)CK_INGEST_MAX_JSON);
	rc = ck_ingest_slurp(io, 0, io->size, &text);
	if (rc < 0)
		return rc == -ENOMEM ? rc : ck_ingest_bad(in, "read error: %s", strerror(-rc));
	rc = js_parse((const char *)text, (size_t)io->size, &doc, &err);
	free(text);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_ingest_bad(in, "index: %s", err.msg);
	map = js_root(doc)->kind == JS_OBJECT ? js_get(js_root(doc), "weight_map") : NULL;
	if (!map || map->kind != JS_OBJECT) {
		rc = ck_ingest_bad(in, "index: no \"weight_map\" object");
		goto out;
	}
	for (i = 0; i < map->n; i++) {
		if (map->vals[i]->kind != JS_STRING) {
			rc = ck_ingest_bad(in, "index: weight_map entry '%s' is not a file name", map->keys[i]);
			goto out;
		}
	}
out:
	js_free(doc);
	return rc;
}
