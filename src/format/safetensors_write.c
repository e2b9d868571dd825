/* safetensors writer: the Rust writer's layout (safetensors tensor.rs
 * prepare()), so that a generated header is byte-identical to what
 * safetensors.torch.save_file writes for the same tensors and metadata.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "ckptfs/safetensors.h"
#include "ckptfs/str.h"

/* dtype descending in the safetensors enum order, then name bytewise ascending. */
static int cmp_writer_order(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;
	int rx = ck_dtype_safetensors_rank(x->dtype), ry = ck_dtype_safetensors_rank(y->dtype);

	if (rx != ry)
		return rx > ry ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int check_tensor(const struct st_tensor *t, uint64_t *nbytes, struct ck_error *err)
{
	uint64_t n = 1;

	if (!t->name)
		return ck_fail(err, EINVAL, "safetensors layout: tensor without a name");
	if (ck_dtype_safetensors_rank(t->dtype) < 0)
		return ck_fail(err, EINVAL, "safetensors layout: tensor '%s': dtype %s has no safetensors name",
			       t->name, ck_dtype_name(t->dtype));
	if (t->ndim < 0 || t->ndim > CK_MAX_DIMS)
		return ck_fail(err, EINVAL, "safetensors layout: tensor '%s': %d dimensions", t->name, t->ndim);
	for (int d = 0; d < t->ndim; d++)
		if (__builtin_mul_overflow(n, t->shape[d], &n))
			return ck_fail(err, EOVERFLOW, "safetensors layout: tensor '%s': size overflows", t->name);
	if (__builtin_mul_overflow(n, (uint64_t)ck_dtype_size(t->dtype), nbytes))
		return ck_fail(err, EOVERFLOW, "safetensors layout: tensor '%s': size overflows", t->name);
	return 0;
}

/* Adjacent equal names after the writer-order sort would miss duplicates of
 * different dtypes, so compare a name-sorted copy. */
static int check_unique(const struct st_tensor *t, size_t n, struct ck_error *err)
{
	const char **names = malloc((n ? n : 1) * sizeof(*names));
	int rc = 0;

	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		names[i] = t[i].name;
	qsort(names, n, sizeof(*names), ck_strp_cmp);
	for (size_t i = 1; i < n && !rc; i++)
		if (!strcmp(names[i - 1], names[i]))
			rc = ck_fail(err, EINVAL, "safetensors layout: duplicate tensor name '%s'", names[i]);
	free(names);
	return rc;
}

static int put_u64(struct ck_buf *b, uint64_t v)
{
	return ck_buf_printf(b, "%llu", (unsigned long long)v);
}

/* "name":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]} */
static int put_tensor(struct ck_buf *b, const struct st_tensor *t)
{
	int rc = js_put_string(b, t->name, strlen(t->name));

	if (!rc)
		rc = ck_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", ck_dtype_safetensors(t->dtype));
	for (int d = 0; !rc && d < t->ndim; d++) {
		if (d)
			rc = ck_buf_putc(b, ',');
		if (!rc)
			rc = put_u64(b, t->shape[d]);
	}
	if (!rc)
		rc = ck_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}",
				   (unsigned long long)t->begin, (unsigned long long)t->end);
	return rc;
}

static int put_metadata(struct ck_buf *b, const struct st_meta *meta, size_t nmeta)
{
	int rc = ck_buf_puts(b, "\"__metadata__\":{");

	for (size_t i = 0; !rc && i < nmeta; i++) {
		if (i)
			rc = ck_buf_putc(b, ',');
		if (!rc)
			rc = js_put_string(b, meta[i].key, strlen(meta[i].key));
		if (!rc)
			rc = ck_buf_putc(b, ':');
		if (!rc)
			rc = js_put_string(b, meta[i].value, strlen(meta[i].value));
	}
	return rc ? rc : ck_buf_putc(b, '}');
}

static int put_header(struct ck_buf *out, const struct st_tensor *t, size_t n,
		      const struct st_meta *meta, size_t nmeta)
{
	size_t len_at = out->len, json_at;
	uint64_t hlen;
	int rc;

	rc = ck_buf_put_le64(out, 0);          /* N, patched below */
	json_at = out->len;
	if (!rc)
		rc = ck_buf_putc(out, '{');
	if (!rc && meta) {
		rc = put_metadata(out, meta, nmeta);
		if (!rc && n)
			rc = ck_buf_putc(out, ',');
	}
	for (size_t i = 0; !rc && i < n; i++) {
		if (i)
			rc = ck_buf_putc(out, ',');
		if (!rc)
			rc = put_tensor(out, &t[i]);
	}
	if (!rc)
		rc = ck_buf_putc(out, '}');
	/* Spaces up to a multiple of 8 so the byte buffer starts 8-aligned. */
	while (!rc && (out->len - json_at) % 8)
		rc = ck_buf_putc(out, ' ');
	if (rc)
		return rc;
	hlen = out->len - json_at;
	for (int i = 0; i < 8; i++)
		out->data[len_at + i] = (uint8_t)(hlen >> (8 * i));
	return 0;
}

int st_layout(struct st_tensor *tensors, size_t n, const struct st_meta *meta, size_t nmeta,
	      struct ck_buf *out, struct ck_error *err)
{
	size_t start = out->len;
	uint64_t offset = 0, nbytes;
	int rc;

	for (size_t i = 0; i < n; i++) {
		rc = check_tensor(&tensors[i], &nbytes, err);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < nmeta; i++)
		if (!meta[i].key || !meta[i].value)
			return ck_fail(err, EINVAL, "safetensors layout: metadata entry %zu is incomplete", i);
	rc = check_unique(tensors, n, err);
	if (rc)
		return rc == -ENOMEM ? ck_fail(err, ENOMEM, "safetensors layout: out of memory") : rc;

	if (n > 1)
		qsort(tensors, n, sizeof(*tensors), cmp_writer_order);
	for (size_t i = 0; i < n; i++) {
		check_tensor(&tensors[i], &nbytes, NULL);
		tensors[i].begin = offset;
		if (__builtin_add_overflow(offset, nbytes, &offset))
			return ck_fail(err, EOVERFLOW, "safetensors layout: total size overflows");
		tensors[i].end = offset;
	}

	rc = put_header(out, tensors, n, meta, nmeta);
	if (!rc && out->len - start - 8 > ST_MAX_HEADER)
		rc = ck_fail(err, E2BIG, "safetensors layout: header of %zu bytes exceeds the readers' limit of %llu",
			     out->len - start - 8, ST_MAX_HEADER);
	else if (rc)
		rc = ck_fail(err, -rc, "safetensors layout: out of memory");
	if (rc)
		out->len = start;
	return rc;
}
