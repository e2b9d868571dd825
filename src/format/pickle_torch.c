/* The torch shapes inside a pickle: storage persistent ids and tensor
 * rebuild calls (FORMATS.md 1.4).  A node that does not match exactly is
 * left as it was (a plain PK_PERSID or PK_CALL): nothing downstream may
 * then treat it as tensor data, which is the safe failure. */
#include "config.h"

#include <string.h>

#include "pickle_int.h"

/* Record names are "data/<key>": keep keys to plain printable names. */
static int key_is_safe(const struct pk_node *k)
{
	if (k->kind != PK_STR || !k->v.str.len || k->v.str.len > 128)
		return 0;
	if (!strcmp(k->v.str.s, ".") || !strcmp(k->v.str.s, ".."))
		return 0;
	for (size_t i = 0; i < k->v.str.len; i++) {
		unsigned char c = (unsigned char)k->v.str.s[i];

		if (c <= 0x20 || c >= 0x7f || c == '/' || c == '\\')
			return 0;
	}
	return 1;
}

static enum ck_dtype storage_dtype(const struct pk_node *cls)
{
	if (!cls || cls->kind != PK_GLOBAL || strcmp(cls->v.global.module, "torch"))
		return CK_DT_INVALID;
	return ck_dtype_from_torch_storage(cls->v.global.name);
}

/* node is a PK_PERSID whose args is the pid; becomes PK_STORAGE when the pid
 * is ('storage', <torch storage class>, key, location, numel). */
int pk_torch_storage(struct pk_doc *doc, struct pk_node *node)
{
	const struct pk_node *pid = node->args;
	struct pk_node *cls, *key, *loc, *numel;
	struct pk_storage *st;
	enum ck_dtype dt;

	if (pid->kind != PK_TUPLE || pid->n != 5)
		return 0;
	if (pid->items[0]->kind != PK_STR || strcmp(pid->items[0]->v.str.s, "storage") ||
	    pid->items[0]->v.str.len != 7)
		return 0;
	cls = pid->items[1];
	key = pid->items[2];
	loc = pid->items[3];
	numel = pid->items[4];
	dt = storage_dtype(cls);
	if (dt == CK_DT_INVALID || !key_is_safe(key) || loc->kind != PK_STR ||
	    strlen(loc->v.str.s) != loc->v.str.len || numel->kind != PK_INT || numel->v.i < 0)
		return 0;
	/* Byte sizes must be representable for every consumer. */
	if ((uint64_t)numel->v.i > UINT64_MAX / 16)
		return 0;
	st = pk_doc_storage_for(doc, key->v.str.s, key->v.str.len, cls, dt,
				loc->v.str.s, loc->v.str.len, (uint64_t)numel->v.i);
	if (!st)
		return -1;
	node->kind = PK_STORAGE;
	node->v.storage = st;
	return 0;
}

static int int_tuple(const struct pk_node *t, int64_t *out, int *n)
{
	if (t->kind != PK_TUPLE || t->n > CK_MAX_DIMS)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->items[i]->kind != PK_INT || t->items[i]->v.i < 0)
			return 0;
		out[i] = t->items[i]->v.i;
	}
	*n = (int)t->n;
	return 1;
}

/* Whether the view (offset, shape, stride) of elements of elem_size bytes
 * lies inside storage_bytes, with every product representable. */
static int view_fits(uint64_t offset, int ndim, const int64_t *shape, const int64_t *stride,
		     size_t elem_size, uint64_t storage_bytes)
{
	uint64_t last = offset, numel = 1, t;

	for (int i = 0; i < ndim; i++) {
		if (shape[i] == 0)
			return 1;   /* empty: torch checks nothing else */
		if (__builtin_mul_overflow(numel, (uint64_t)shape[i], &numel) ||
		    __builtin_mul_overflow((uint64_t)(shape[i] - 1), (uint64_t)stride[i], &t) ||
		    __builtin_add_overflow(last, t, &last))
			return 0;
	}
	if (__builtin_mul_overflow(numel, (uint64_t)elem_size, &t) ||
	    __builtin_add_overflow(last, 1, &last) ||
	    __builtin_mul_overflow(last, (uint64_t)elem_size, &t))
		return 0;
	return t <= storage_bytes;
}

/* call is a PK_CALL of _rebuild_tensor_v2/_v3; becomes PK_TENSOR when its
 * arguments describe a tensor inside its storage.  Returns 0 or -1 (ENOMEM). */
int pk_torch_tensor(struct pk_doc *doc, struct pk_node *call)
{
	const struct pk_node *a = call->args;
	struct pk_tensor t;
	struct pk_storage *st;
	int64_t shape[CK_MAX_DIMS], stride[CK_MAX_DIMS];
	int version, nshape, nstride;
	struct pk_tensor *out;

	if (pk_global_is(call->cls, "torch._utils", "_rebuild_tensor_v2"))
		version = 2;
	else if (pk_global_is(call->cls, "torch._utils", "_rebuild_tensor_v3"))
		version = 3;
	else
		return 0;
	if (a->kind != PK_TUPLE || a->n < (size_t)(version == 2 ? 6 : 7) ||
	    a->n > (size_t)(version == 2 ? 7 : 8))
		return 0;
	if (a->items[0]->kind != PK_STORAGE || a->items[1]->kind != PK_INT || a->items[1]->v.i < 0 ||
	    !int_tuple(a->items[2], shape, &nshape) || !int_tuple(a->items[3], stride, &nstride) ||
	    nshape != nstride)
		return 0;
	memset(&t, 0, sizeof(t));
	st = a->items[0]->v.storage;
	t.storage = st;
	t.version = version;
	if (version == 2) {
		t.dtype = st->dtype == CK_DT_UNTYPED ? CK_DT_U8 : st->dtype;
	} else {
		const struct pk_node *d = a->items[6];

		if (d->kind != PK_GLOBAL || strcmp(d->v.global.module, "torch"))
			return 0;
		t.dtype = ck_dtype_from_torch_name(d->v.global.name);
		if (t.dtype == CK_DT_INVALID || t.dtype == CK_DT_UNTYPED)
			return 0;
	}
	if (a->items[4]->kind == PK_BOOL)
		t.requires_grad = a->items[4]->v.b != 0;
	else if (a->items[4]->kind == PK_INT && (a->items[4]->v.i == 0 || a->items[4]->v.i == 1))
		t.requires_grad = (int)a->items[4]->v.i;
	else
		return 0;
	t.offset = (uint64_t)a->items[1]->v.i;
	t.ndim = nshape;
	for (int i = 0; i < nshape; i++) {
		t.shape[i] = (uint64_t)shape[i];
		t.stride[i] = stride[i];
	}
	if (!view_fits(t.offset, t.ndim, shape, stride, ck_dtype_size(t.dtype),
		       st->numel * ck_dtype_size(st->dtype)))
		return 0;
	out = pk_alloc(doc, sizeof(*out));
	if (!out)
		return -1;
	*out = t;
	call->kind = PK_TENSOR;
	call->v.tensor = out;
	return 0;
}
