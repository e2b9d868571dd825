/* safetensors reader: the reference loader's validation (safetensors
 * tensor.rs read_metadata + Metadata::validate), docs/formats.md §3.4.
 *
 * Deliberate differences, all stricter, for inputs the Rust loader resolves
 * by HashMap accident: duplicate tensor names or __metadata__ keys (serde
 * keeps the last one), names and metadata values containing U+0000 (not C
 * strings), more than CK_MAX_DIMS dimensions, and dtypes ckptfs has no type
 * for (F4, F6_*).  Leading whitespace before '{' is accepted, as serde does.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "ckptfs/safetensors.h"

int st_header_len(const uint8_t prefix[8], uint64_t file_size, uint64_t *n, struct ck_error *err)
{
	uint64_t len;

	if (file_size < 8)
		return ck_fail(err, EINVAL, "safetensors: file of %llu bytes is shorter than the 8-byte header length",
			       (unsigned long long)file_size);
	len = ck_le64(prefix);
	if (len > ST_MAX_HEADER)
		return ck_fail(err, EINVAL, "safetensors: header length %llu at offset 0 exceeds %llu",
			       (unsigned long long)len, ST_MAX_HEADER);
	if (len > file_size - 8)
		return ck_fail(err, EINVAL, "safetensors: header length %llu at offset 0 runs past the end of a %llu-byte file",
			       (unsigned long long)len, (unsigned long long)file_size);
	*n = len;
	return 0;
}

void st_file_free(struct st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		free(f->tensors[i].name);
	for (size_t i = 0; i < f->nmeta; i++) {
		free(f->meta[i].key);
		free(f->meta[i].value);
	}
	free(f->tensors);
	free(f->meta);
	memset(f, 0, sizeof(*f));
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts names[] and returns a name that occurs twice, or NULL. */
static const char *find_duplicate(const char **names, size_t n)
{
	if (n < 2)
		return NULL;
	qsort(names, n, sizeof(*names), cmp_name);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(names[i - 1], names[i]))
			return names[i];
	return NULL;
}

/* A string member without U+0000 (so it survives as a C string). */
static int plain_string(const struct js_value *v)
{
	return v && v->kind == JS_STRING && strlen(v->str) == v->len;
}

static int parse_metadata(const struct js_value *v, struct st_file *f, struct ck_error *err)
{
	const char **keys, *dup;

	if (v->kind == JS_NULL)         /* Option<HashMap>: null is "no metadata" */
		return 0;
	if (v->kind != JS_OBJECT)
		return ck_fail(err, EINVAL, "safetensors header: __metadata__ is not an object");
	keys = malloc((v->n ? v->n : 1) * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	if (v->n)
		memcpy(keys, v->keys, v->n * sizeof(*keys));
	dup = find_duplicate(keys, v->n);
	if (dup)
		ck_fail(err, EINVAL, "safetensors header: duplicate __metadata__ key '%s'", dup);
	free(keys);
	if (dup)
		return -EINVAL;
	/* Non-NULL even when empty, so st_layout() writes "__metadata__":{} back. */
	f->meta = calloc(v->n ? v->n : 1, sizeof(*f->meta));
	if (!f->meta)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		struct st_meta *m = &f->meta[f->nmeta];

		if (!plain_string(v->vals[i]))
			return ck_fail(err, EINVAL, "safetensors header: __metadata__ value of '%s' is not a string",
				       v->keys[i]);
		m->key = strdup(v->keys[i]);
		m->value = strdup(v->vals[i]->str);
		f->nmeta++;
		if (!m->key || !m->value)
			return -ENOMEM;
	}
	return 0;
}

/* The single member of obj named key; NULL if absent, *dup set if repeated
 * (serde's derived Deserialize refuses duplicate fields). */
static const struct js_value *field(const struct js_value *obj, const char *key, int *dup)
{
	const struct js_value *found = NULL;

	for (size_t i = 0; i < obj->n; i++) {
		if (strcmp(obj->keys[i], key))
			continue;
		if (found)
			*dup = 1;
		found = obj->vals[i];
	}
	return found;
}

static int parse_tensor(const char *name, const struct js_value *v, struct st_tensor *t,
			struct ck_error *err)
{
	const struct js_value *dtype, *shape, *offs;
	uint64_t x;
	int dup = 0;

	if (v->kind != JS_OBJECT)
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s' is not an object", name);
	dtype = field(v, "dtype", &dup);
	shape = field(v, "shape", &dup);
	offs = field(v, "data_offsets", &dup);
	if (dup)
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s' has a duplicate field", name);
	if (!dtype || !shape || !offs)
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s' lacks %s", name,
			       !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
	if (!plain_string(dtype))
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s': dtype is not a string", name);
	t->dtype = ck_dtype_from_safetensors(dtype->str);
	if (t->dtype == CK_DT_INVALID)
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s': unknown or unsupported dtype '%s'",
			       name, dtype->str);
	if (shape->kind != JS_ARRAY)
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s': shape is not an array", name);
	if (shape->n > CK_MAX_DIMS)
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s': %zu dimensions, at most %d supported",
			       name, shape->n, CK_MAX_DIMS);
	t->ndim = (int)shape->n;
	for (size_t i = 0; i < shape->n; i++) {
		if (js_as_u64(shape->vals[i], &x))
			return ck_fail(err, EINVAL, "safetensors header: tensor '%s': shape[%zu] is not an unsigned 64-bit integer",
				       name, i);
		t->shape[i] = x;
	}
	if (offs->kind != JS_ARRAY || offs->n != 2 || js_as_u64(offs->vals[0], &t->begin) ||
	    js_as_u64(offs->vals[1], &t->end))
		return ck_fail(err, EINVAL, "safetensors header: tensor '%s': data_offsets is not [begin, end]", name);
	return 0;
}

/* Tensors by (begin, end) as the loader sorts them.  Equal ranges (empty
 * tensors at one offset) are ordered by name, where Rust's order would
 * depend on its HashMap. */
static int cmp_offsets(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int check_unique_names(const struct st_file *f, struct ck_error *err)
{
	const char **names, *dup;
	int rc = 0;

	names = malloc((f->n ? f->n : 1) * sizeof(*names));
	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < f->n; i++)
		names[i] = f->tensors[i].name;
	dup = find_duplicate(names, f->n);
	if (dup)
		rc = ck_fail(err, EINVAL, "safetensors header: duplicate tensor name '%s'", dup);
	free(names);
	return rc;
}

/* Byte count of a tensor: prod(shape) * element size, or -EOVERFLOW. */
static int tensor_nbytes(const struct st_tensor *t, uint64_t *out)
{
	uint64_t n = 1, bits;

	for (int d = 0; d < t->ndim; d++)
		if (__builtin_mul_overflow(n, t->shape[d], &n))
			return -EOVERFLOW;
	if (__builtin_mul_overflow(n, (uint64_t)ck_dtype_size(t->dtype) * 8, &bits))
		return -EOVERFLOW;
	*out = bits / 8;
	return 0;
}

/* Offsets must tile [0, last_end) exactly, each range the tensor's size. */
static int check_layout(const struct st_file *f, uint64_t *data_len, struct ck_error *err)
{
	uint64_t expect = 0, nbytes;

	for (size_t i = 0; i < f->n; i++) {
		const struct st_tensor *t = &f->tensors[i];

		if (t->begin != expect || t->end < t->begin)
			return ck_fail(err, EINVAL, "safetensors header: tensor '%s': data_offsets [%llu, %llu] do not start at the previous end %llu",
				       t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
				       (unsigned long long)expect);
		if (tensor_nbytes(t, &nbytes))
			return ck_fail(err, EINVAL, "safetensors header: tensor '%s': size of shape overflows", t->name);
		if (t->end - t->begin != nbytes)
			return ck_fail(err, EINVAL, "safetensors header: tensor '%s': %llu bytes in data_offsets, %s shape needs %llu",
				       t->name, (unsigned long long)(t->end - t->begin),
				       ck_dtype_safetensors(t->dtype), (unsigned long long)nbytes);
		expect = t->end;
	}
	*data_len = expect;
	return 0;
}

static int parse_members(const struct js_value *root, struct st_file *f, struct ck_error *err)
{
	int seen_meta = 0, rc;

	f->tensors = calloc(root->n ? root->n : 1, sizeof(*f->tensors));
	if (!f->tensors)
		return -ENOMEM;
	for (size_t i = 0; i < root->n; i++) {
		struct st_tensor *t = &f->tensors[f->n];

		if (!strcmp(root->keys[i], "__metadata__")) {
			if (seen_meta++)
				return ck_fail(err, EINVAL, "safetensors header: duplicate __metadata__");
			rc = parse_metadata(root->vals[i], f, err);
			if (rc)
				return rc;
			continue;
		}
		t->name = strdup(root->keys[i]);
		if (!t->name)
			return -ENOMEM;
		f->n++;
		rc = parse_tensor(t->name, root->vals[i], t, err);
		if (rc)
			return rc;
	}
	return 0;
}

int st_parse(const char *header, size_t n, uint64_t file_size, struct st_file *out,
	     struct ck_error *err)
{
	struct js_doc *doc = NULL;
	struct ck_error jerr;
	uint64_t data_len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (n > ST_MAX_HEADER || file_size < 8 || n > file_size - 8)
		return ck_fail(err, EINVAL, "safetensors: header length %zu does not fit a %llu-byte file",
			       n, (unsigned long long)file_size);
	out->header_len = n;
	out->data_start = 8 + (uint64_t)n;
	rc = js_parse(header, n, &doc, &jerr);
	if (rc)
		return ck_fail(err, -rc, "safetensors header: %s", jerr.msg);
	if (js_root(doc)->kind != JS_OBJECT) {
		rc = ck_fail(err, EINVAL, "safetensors header: not a JSON object");
		goto out;
	}
	rc = parse_members(js_root(doc), out, err);
	if (!rc)
		rc = check_unique_names(out, err);
	if (rc)
		goto out;
	qsort(out->tensors, out->n, sizeof(*out->tensors), cmp_offsets);
	rc = check_layout(out, &data_len, err);
	if (!rc && data_len != file_size - out->data_start)
		rc = ck_fail(err, EINVAL, "safetensors: byte buffer of %llu bytes at offset %llu does not end the %llu-byte file",
			     (unsigned long long)data_len, (unsigned long long)out->data_start,
			     (unsigned long long)file_size);
out:
	js_free(doc);
	if (rc) {
		if (rc == -ENOMEM)
			ck_fail(err, ENOMEM, "safetensors header: out of memory");
		st_file_free(out);
	}
	return rc;
}
