/* The torch shapes inside a pickle: storage persistent ids and tensor
 * rebuild calls (docs/formats.md §2.2).  A node that does not match exactly is
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
				loc->v.str.s, loc->v.str.len, (uint64_t)numel->v.i, node->args);
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

/* --- building torch shapes ---------------------------------------------------- */

static struct pk_node *tuple_of(struct pk_doc *doc, struct pk_node **items, size_t n)
{
	struct pk_node *t = pk_new(doc, PK_TUPLE);

	if (!t || pk_items_reserve(doc, t, n))
		return NULL;
	memcpy(t->items, items, n * sizeof(*items));
	t->n = n;
	return t;
}

static struct pk_node *new_global(struct pk_doc *doc, const char *module, const char *name)
{
	return pk_doc_intern_global(doc, module, strlen(module), name, strlen(name));
}

static struct pk_node *new_bool(struct pk_doc *doc, int b)
{
	struct pk_node *n = pk_new(doc, PK_BOOL);

	if (n)
		n->v.b = b != 0;
	return n;
}

/* The first pid tuple of the storage `key` in doc, or NULL. */
static struct pk_node *find_storage_pid(struct pk_doc *doc, const char *key)
{
	long pos = pk_doc_find_storage(doc, key, strlen(key));

	return pos >= 0 ? doc->storage_pids[pos] : NULL;
}

struct pk_node *pk_new_storage(struct pk_doc *doc, enum ck_dtype dtype, const char *key,
			       const char *location, uint64_t numel)
{
	const char *cls_name = dtype == CK_DT_UNTYPED ? NULL : ck_dtype_torch_storage(dtype);
	struct pk_node *items[5], *node, *last, *same;

	if (!key || !location || ck_dtype_size(dtype) == 0 || numel > INT64_MAX)
		return NULL;
	if (!cls_name)
		cls_name = "UntypedStorage";
	/* Share strings as torch.save's objects are shared: 'storage' and the
	 * location are the same object throughout, a key within its storage. */
	last = doc->nstorages ? doc->storage_pids[doc->nstorages - 1] : NULL;
	same = find_storage_pid(doc, key);
	items[0] = last ? last->items[0] : pk_new_str(doc, "storage", 7);
	items[1] = new_global(doc, "torch", cls_name);
	items[2] = same ? same->items[2] : pk_new_str(doc, key, strlen(key));
	items[3] = same && !strcmp(same->items[3]->v.str.s, location) ? same->items[3]
		 : last && !strcmp(last->items[3]->v.str.s, location) ? last->items[3]
		 : pk_new_str(doc, location, strlen(location));
	items[4] = pk_new_int(doc, (int64_t)numel);
	for (int i = 0; i < 5; i++)
		if (!items[i])
			return NULL;
	node = pk_new(doc, PK_PERSID);
	if (!node)
		return NULL;
	node->args = tuple_of(doc, items, 5);
	if (!node->args || pk_torch_storage(doc, node) || node->kind != PK_STORAGE)
		return NULL;
	if (node->v.storage->numel != numel || strcmp(node->v.storage->location, location) ||
	    strcmp(node->v.storage->cls->v.global.name, cls_name))
		return NULL;     /* the key is taken by a different storage */
	return node;
}

struct pk_node *pk_new_tensor(struct pk_doc *doc, struct pk_node *storage, enum ck_dtype dtype,
			      uint64_t offset, int ndim, const uint64_t *shape, const int64_t *stride,
			      int requires_grad)
{
	struct pk_node *items[7], *dims[CK_MAX_DIMS], *strides[CK_MAX_DIMS], *hooks, *call;
	int v3;

	if (!storage || storage->kind != PK_STORAGE || ndim < 0 || ndim > CK_MAX_DIMS ||
	    offset > INT64_MAX || dtype == CK_DT_UNTYPED || ck_dtype_size(dtype) == 0)
		return NULL;
	v3 = storage->v.storage->dtype == CK_DT_UNTYPED && dtype != CK_DT_U8;
	if (!v3 && storage->v.storage->dtype != dtype &&
	    !(storage->v.storage->dtype == CK_DT_UNTYPED && dtype == CK_DT_U8))
		return NULL;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] > INT64_MAX || stride[i] < 0)
			return NULL;
		dims[i] = pk_new_int(doc, (int64_t)shape[i]);
		strides[i] = pk_new_int(doc, stride[i]);
		if (!dims[i] || !strides[i])
			return NULL;
	}
	hooks = pk_new(doc, PK_DICT);
	if (!hooks)
		return NULL;
	hooks->cls = new_global(doc, "collections", "OrderedDict");
	hooks->args = pk_new(doc, PK_TUPLE);
	items[0] = storage;
	items[1] = pk_new_int(doc, (int64_t)offset);
	items[2] = tuple_of(doc, dims, (size_t)ndim);
	items[3] = tuple_of(doc, strides, (size_t)ndim);
	items[4] = new_bool(doc, requires_grad);
	items[5] = hooks;
	items[6] = v3 ? new_global(doc, "torch", ck_dtype_torch_name(dtype)) : NULL;
	for (int i = 0; i < (v3 ? 7 : 6); i++)
		if (!items[i])
			return NULL;
	if (!hooks->cls || !hooks->args)
		return NULL;
	call = pk_new(doc, PK_CALL);
	if (!call)
		return NULL;
	call->cls = new_global(doc, "torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
	call->args = tuple_of(doc, items, v3 ? 7 : 6);
	if (!call->cls || !call->args || pk_torch_tensor(doc, call) || call->kind != PK_TENSOR)
		return NULL;
	return call;
}
