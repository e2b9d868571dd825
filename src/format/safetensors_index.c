/* Sharded-checkpoint index files (model.safetensors.index.json,
 * pytorch_model.bin.index.json): reader, and a writer that matches
 * transformers' json.dumps(index, indent=2, sort_keys=True) + "\n".
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "ckptfs/safetensors.h"
#include "ckptfs/str.h"

void st_index_free(struct st_index *idx)
{
	if (!idx)
		return;
	for (size_t i = 0; i < idx->nmeta; i++) {
		free(idx->meta[i].key);
		free(idx->meta[i].json);
	}
	for (size_t i = 0; i < idx->n; i++) {
		free(idx->weights[i].name);
		free(idx->weights[i].file);
	}
	free(idx->meta);
	free(idx->weights);
	memset(idx, 0, sizeof(*idx));
}

/* Sorts names[] and returns one that occurs twice, or NULL. */
static const char *find_duplicate(const char **names, size_t n)
{
	if (n < 2)
		return NULL;
	qsort(names, n, sizeof(*names), ck_strp_cmp);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(names[i - 1], names[i]))
			return names[i];
	return NULL;
}

/* Fails if obj has a key twice (Python would silently keep the last). */
static int check_unique_keys(const struct js_value *obj, const char *what, struct ck_error *err)
{
	const char **keys = malloc((obj->n ? obj->n : 1) * sizeof(*keys)), *dup;

	if (!keys)
		return -ENOMEM;
	if (obj->n)
		memcpy(keys, obj->keys, obj->n * sizeof(*keys));
	dup = find_duplicate(keys, obj->n);
	if (dup)
		ck_fail(err, EINVAL, "index: duplicate key '%s' in %s", dup, what);
	free(keys);
	return dup ? -EINVAL : 0;
}

static int parse_metadata(const struct js_value *v, struct st_index *idx, struct ck_error *err)
{
	struct ck_buf text = CK_BUF_INIT;
	int rc;

	if (v->kind != JS_OBJECT)
		return ck_fail(err, EINVAL, "index: metadata is not an object");
	rc = check_unique_keys(v, "metadata", err);
	if (rc)
		return rc;
	idx->has_metadata = 1;
	idx->meta = calloc(v->n ? v->n : 1, sizeof(*idx->meta));
	if (!idx->meta)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		struct st_index_meta *m;

		if (!strcmp(v->keys[i], "total_size") && !js_as_u64(v->vals[i], &idx->total_size)) {
			idx->has_total_size = 1;
			continue;
		}
		m = &idx->meta[idx->nmeta];
		if (js_write_compact(&text, v->vals[i]) || ck_buf_putc(&text, 0)) {
			ck_buf_free(&text);
			return -ENOMEM;
		}
		m->json = (char *)ck_buf_steal(&text, NULL);
		m->key = strdup(v->keys[i]);
		idx->nmeta++;
		if (!m->key)
			return -ENOMEM;
	}
	return 0;
}

static int parse_weight_map(const struct js_value *v, struct st_index *idx, struct ck_error *err)
{
	int rc;

	if (v->kind != JS_OBJECT)
		return ck_fail(err, EINVAL, "index: weight_map is not an object");
	rc = check_unique_keys(v, "weight_map", err);
	if (rc)
		return rc;
	idx->weights = calloc(v->n ? v->n : 1, sizeof(*idx->weights));
	if (!idx->weights)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const struct js_value *file = v->vals[i];
		struct st_index_weight *w = &idx->weights[idx->n];

		if (file->kind != JS_STRING || strlen(file->str) != file->len || !file->len)
			return ck_fail(err, EINVAL, "index: weight_map entry '%s' is not a file name", v->keys[i]);
		w->name = strdup(v->keys[i]);
		w->file = strdup(file->str);
		idx->n++;
		if (!w->name || !w->file)
			return -ENOMEM;
	}
	return 0;
}

int st_index_parse(const char *json, size_t n, struct st_index *out, struct ck_error *err)
{
	const struct js_value *root, *meta = NULL, *map = NULL;
	struct js_doc *doc;
	struct ck_error jerr;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = js_parse(json, n, &doc, &jerr);
	if (rc)
		return ck_fail(err, -rc, "index: %s", jerr.msg);
	root = js_root(doc);
	if (root->kind != JS_OBJECT) {
		rc = ck_fail(err, EINVAL, "index: not a JSON object");
		goto out;
	}
	for (size_t i = 0; i < root->n && !rc; i++) {
		const struct js_value **slot = !strcmp(root->keys[i], "metadata") ? &meta :
			!strcmp(root->keys[i], "weight_map") ? &map : NULL;

		if (slot && *slot)
			rc = ck_fail(err, EINVAL, "index: duplicate '%s'", root->keys[i]);
		else if (slot)
			*slot = root->vals[i];
	}
	if (!rc && !map)
		rc = ck_fail(err, EINVAL, "index: no weight_map");
	if (!rc && meta)
		rc = parse_metadata(meta, out, err);
	if (!rc)
		rc = parse_weight_map(map, out, err);
out:
	js_free(doc);
	if (rc) {
		if (rc == -ENOMEM)
			ck_fail(err, ENOMEM, "index: out of memory");
		st_index_free(out);
	}
	return rc;
}

/* ---- writer --------------------------------------------------------------- */

struct member {
	const char *key;
	size_t index;            /* into meta[] or weights[]; SIZE_MAX for total_size */
};

static int cmp_member(const void *a, const void *b)
{
	return strcmp(((const struct member *)a)->key, ((const struct member *)b)->key);
}

static int put_key(struct ck_buf *b, int spaces, const char *key)
{
	int rc = ck_buf_putc(b, '\n');

	while (!rc && spaces-- > 0)
		rc = ck_buf_putc(b, ' ');
	if (!rc)
		rc = js_put_string_ascii(b, key, strlen(key));
	return rc ? rc : ck_buf_puts(b, ": ");
}

/* A metadata value re-indented as Python would nest it (level 2). */
static int put_meta_value(struct ck_buf *b, const char *json)
{
	struct js_doc *doc;
	int rc = js_parse(json, strlen(json), &doc, NULL);

	if (rc)
		return rc == -ENOMEM ? rc : -EINVAL;
	rc = js_write_python(b, js_root(doc), 2, 2, 1);
	js_free(doc);
	return rc;
}

static int put_metadata(struct ck_buf *b, const struct st_index *idx)
{
	size_t n = idx->nmeta + (idx->has_total_size ? 1 : 0);
	struct member *m;
	int rc = 0;

	if (!n)
		return ck_buf_puts(b, "{}");
	m = malloc(n * sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < idx->nmeta; i++) {
		m[i].key = idx->meta[i].key;
		m[i].index = i;
		if (!strcmp(m[i].key, "total_size") && idx->has_total_size)
			rc = -EINVAL;
	}
	if (idx->has_total_size) {
		m[n - 1].key = "total_size";
		m[n - 1].index = SIZE_MAX;
	}
	qsort(m, n, sizeof(*m), cmp_member);
	rc = rc ? rc : ck_buf_putc(b, '{');
	for (size_t i = 0; !rc && i < n; i++) {
		if (i)
			rc = ck_buf_putc(b, ',');
		if (!rc)
			rc = put_key(b, 4, m[i].key);
		if (!rc && m[i].index == SIZE_MAX)
			rc = ck_buf_printf(b, "%llu", (unsigned long long)idx->total_size);
		else if (!rc)
			rc = put_meta_value(b, idx->meta[m[i].index].json);
	}
	free(m);
	return rc ? rc : ck_buf_puts(b, "\n  }");
}

static int put_weight_map(struct ck_buf *b, const struct st_index *idx)
{
	struct member *m;
	int rc = 0;

	if (!idx->n)
		return ck_buf_puts(b, "{}");
	m = malloc(idx->n * sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < idx->n; i++) {
		m[i].key = idx->weights[i].name;
		m[i].index = i;
	}
	qsort(m, idx->n, sizeof(*m), cmp_member);
	rc = ck_buf_putc(b, '{');
	for (size_t i = 0; !rc && i < idx->n; i++) {
		const char *file = idx->weights[m[i].index].file;

		if (i)
			rc = ck_buf_putc(b, ',');
		if (!rc)
			rc = put_key(b, 4, m[i].key);
		if (!rc)
			rc = js_put_string_ascii(b, file, strlen(file));
	}
	free(m);
	return rc ? rc : ck_buf_puts(b, "\n  }");
}

int st_index_write(const struct st_index *idx, struct ck_buf *out)
{
	size_t start = out->len;
	int meta = idx->has_metadata || idx->has_total_size || idx->nmeta;
	int rc = ck_buf_putc(out, '{');

	if (!rc && meta) {
		rc = put_key(out, 2, "metadata");
		if (!rc)
			rc = put_metadata(out, idx);
		if (!rc)
			rc = ck_buf_putc(out, ',');
	}
	if (!rc)
		rc = put_key(out, 2, "weight_map");
	if (!rc)
		rc = put_weight_map(out, idx);
	if (!rc)
		rc = ck_buf_puts(out, "\n}\n");
	if (rc)
		out->len = start;
	return rc;
}
