/* Comparing the tensors of two catalogs (include/ckptfs/catalog.h,
 * "Comparing tensors"): by name, the bytes read a chunk at a time from
 * each side (two chunk buffers in all, whatever the tensor sizes). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ctl_int.h"

static int same_type(const struct ck_cat_tensor *a, const struct ck_cat_tensor *b)
{
	return a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
	       !memcmp(a->shape, b->shape, (size_t)(a->ndim > 0 ? a->ndim : 0) * sizeof(a->shape[0]));
}

/* Reads both tensors: whether their bytes are equal, and their norms. */
static int compare_bytes(struct ck_view *v, const struct ck_cat_tensor *a, const struct ck_cat_tensor *b,
			 size_t chunk, int measured, int *equal, struct ck_l2 *l2)
{
	size_t esize = ck_dtype_size(b->dtype);
	unsigned char *pa, *pb;
	int rc = 0;

	if (chunk < 8)
		chunk = 8;
	chunk -= chunk % (esize ? esize : 1);
	pa = malloc(chunk);
	pb = malloc(chunk);
	if (!pa || !pb) {
		free(pa);
		free(pb);
		return -ENOMEM;
	}
	*equal = 1;
	for (uint64_t done = 0; done < b->nbytes && !rc;) {
		size_t len = b->nbytes - done < chunk ? (size_t)(b->nbytes - done) : chunk;

		rc = ck_cat_read(v, a, pa, len, done);
		if (!rc)
			rc = ck_cat_read(v, b, pb, len, done);
		if (rc)
			break;
		if (*equal && memcmp(pa, pb, len))
			*equal = 0;
		if (measured)
			ck_l2_add(l2, b->dtype, pa, pb, len / esize);
		done += len;
	}
	free(pa);
	free(pb);
	return rc;
}

int ck_diff_pair(struct ck_view *v, const struct ck_cat_tensor *a, const struct ck_cat_tensor *b, size_t chunk,
		 struct ck_diff_tensor *out)
{
	int equal = 0, rc;

	memset(out, 0, sizeof(*out));
	out->name = b->name;
	out->layer = b->layer;
	out->a = a;
	out->b = b;
	if (!same_type(a, b)) {
		out->status = CK_DIFF_RETYPED;
		return 0;
	}
	out->measured = ck_dtype_is_measured(b->dtype);
	if (a->source == b->source && a->offset == b->offset) {
		out->status = CK_DIFF_IDENTICAL;
		if (!out->measured)
			return 0;
		/* The norm still counts in a layer's relative change. */
		rc = compare_bytes(v, a, b, chunk, 1, &equal, &out->l2);
		return rc;
	}
	rc = compare_bytes(v, a, b, chunk, out->measured, &equal, &out->l2);
	if (rc)
		return rc;
	out->status = equal ? CK_DIFF_IDENTICAL : CK_DIFF_CHANGED;
	return 0;
}

static int push(struct ck_diff_tensor **v, size_t *n, size_t *cap, struct ck_diff_tensor *d)
{
	if (*n == *cap) {
		struct ck_diff_tensor *p = ck_grow(*v, cap, sizeof(*p), 64);

		if (!p)
			return -ENOMEM;
		*v = p;
	}
	(*v)[(*n)++] = *d;
	return 0;
}

static int diff_side(struct ck_view *v, const struct ck_cat_tensor *ta, size_t na, const struct ck_catalog *b,
		     size_t chunk, struct ck_diff_tensor **out, size_t *n, size_t *cap)
{
	int rc = 0;

	for (size_t i = 0; i < na && !rc; i++) {
		const struct ck_cat_tensor *tb = ck_catalog_find(b, ta[i].name);
		struct ck_diff_tensor d;

		if (tb) {
			rc = ck_diff_pair(v, &ta[i], tb, chunk, &d);
		} else {
			memset(&d, 0, sizeof(d));
			d.name = ta[i].name;
			d.layer = ta[i].layer;
			d.status = CK_DIFF_ONLY_A;
			d.a = &ta[i];
		}
		if (!rc)
			rc = push(out, n, cap, &d);
	}
	return rc;
}

static int only_b(const struct ck_cat_tensor *tb, size_t nb, const struct ck_catalog *a, struct ck_diff_tensor **out,
		  size_t *n, size_t *cap)
{
	int rc = 0;

	for (size_t i = 0; i < nb && !rc; i++) {
		struct ck_diff_tensor d;

		if (ck_catalog_find(a, tb[i].name))
			continue;
		memset(&d, 0, sizeof(d));
		d.name = tb[i].name;
		d.layer = tb[i].layer;
		d.status = CK_DIFF_ONLY_B;
		d.b = &tb[i];
		rc = push(out, n, cap, &d);
	}
	return rc;
}

int ck_diff_catalogs(struct ck_view *v, const struct ck_catalog *a, const struct ck_catalog *b, size_t chunk,
		     struct ck_diff_tensor **out, size_t *n)
{
	struct ck_diff_tensor *d = NULL;
	size_t k = 0, cap = 0;
	int rc;

	rc = diff_side(v, a->weights, a->nweights, b, chunk, &d, &k, &cap);
	if (!rc)
		rc = diff_side(v, a->moments, a->nmoments, b, chunk, &d, &k, &cap);
	if (!rc)
		rc = only_b(b->weights, b->nweights, a, &d, &k, &cap);
	if (!rc)
		rc = only_b(b->moments, b->nmoments, a, &d, &k, &cap);
	if (rc) {
		free(d);
		return rc;
	}
	*out = d;
	*n = k;
	return 0;
}
