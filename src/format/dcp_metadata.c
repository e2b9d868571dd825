/* A DCP .metadata, read and checked (include/ckptfs/dcp.h).
 *
 * The pickle is run by the symbolic VM; the tree is then read as the
 * dataclasses torch pickles (a NEWOBJ of the class, BUILD with its
 * attribute dict; TensorProperties' state is a tuple whose first item is
 * the dtype; torch.Size is a REDUCE of torch.Size on a tuple).  Nothing
 * that does not have exactly that shape is accepted: the result feeds a
 * loader that opens files by these paths and offsets.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/dcp.h"

#define PROTOTYPE_MODULE "torch.distributed._shard.checkpoint.metadata"
/* Comparisons the overlap check may make before giving up on a tensor. */
#define MAX_OVERLAP_PAIRS (64u << 20)

struct parser {
	struct ck_dcp_meta *m;
	struct ck_error *err;
	size_t capchunks;
	/* every chunk of state_dict_metadata, by entry: defs[def_first[e] ..] */
	struct def {
		uint64_t offsets[CK_MAX_DIMS], sizes[CK_MAX_DIMS];
		long storage;     /* chunk index once storage_data named it, else -1 */
	} *defs;
	size_t ndefs, capdefs;
	size_t *def_first;    /* per entry */
	size_t *def_sorted;   /* per entry, its defs sorted by offsets (indexes into defs) */
};

/* ---- small readers ---------------------------------------------------------- */

static int is_str(const struct pk_node *n)
{
	return n && n->kind == PK_STR && strlen(n->v.str.s) == n->v.str.len;
}

/* A class of torch.distributed (any module under it: classes move between releases). */
static int is_class(const struct pk_node *obj, const char *name)
{
	const struct pk_node *c;

	if (!obj || obj->kind != PK_NEWOBJ || obj->kwargs)
		return 0;
	c = obj->cls;
	return c && c->kind == PK_GLOBAL && !strcmp(c->v.global.name, name) &&
	       !strncmp(c->v.global.module, "torch.distributed.", 18);
}

/* The attribute dict a dataclass was rebuilt with (NULL when it had none). */
static const struct pk_node *attrs_of(const struct pk_node *obj)
{
	const struct pk_node *s = obj->state;

	if (s && s->kind == PK_DICT && !s->cls)
		return s;
	return NULL;
}

static int get_u64(const struct pk_node *n, uint64_t *v)
{
	if (!n || n->kind != PK_INT || n->v.i < 0)
		return 0;
	*v = (uint64_t)n->v.i;
	return 1;
}

/* torch.Size((a, b, ...)), or a plain tuple or list of ints. */
static int get_dims(const struct pk_node *n, uint64_t *v, int *ndim)
{
	const struct pk_node *t = n;

	if (!n)
		return 0;
	if (n->kind == PK_CALL) {
		const struct pk_node *c = n->cls;

		if (!c || c->kind != PK_GLOBAL || strcmp(c->v.global.module, "torch") || strcmp(c->v.global.name, "Size"))
			return 0;
		if (!n->args || n->args->kind != PK_TUPLE || n->args->n != 1)
			return 0;
		t = n->args->items[0];
	}
	if (t->kind != PK_TUPLE && t->kind != PK_LIST)
		return 0;
	if (t->n > CK_MAX_DIMS)
		return 0;
	for (size_t i = 0; i < t->n; i++)
		if (!get_u64(t->items[i], &v[i]))
			return 0;
	*ndim = (int)t->n;
	return 1;
}

int ck_dcp_format_dims(const uint64_t *v, int ndim, char *out, size_t size)
{
	size_t len = 0;
	int n;

	n = snprintf(out, size, "[");
	for (int i = 0; i < ndim && n >= 0 && (size_t)n < size - len; i++) {
		len += (size_t)n;
		n = snprintf(out + len, size - len, "%s%" PRIu64, i ? ", " : "", v[i]);
	}
	if (n >= 0 && (size_t)n < size - len) {
		len += (size_t)n;
		n = snprintf(out + len, size - len, "]");
	}
	return n < 0 || (size_t)n >= size - len ? -ENOSPC : 0;
}

char *ck_dcp_item_name(const struct ck_dcp_entry *e, const struct ck_dcp_chunk *c)
{
	struct ck_buf b = CK_BUF_INIT;
	int whole = 1, rc;

	for (int d = 0; d < e->ndim && !e->is_bytes; d++)
		whole &= c->offsets[d] == 0 && c->sizes[d] == e->size[d];
	rc = ck_buf_puts(&b, e->fqn);
	for (int d = 0; d < e->ndim && !whole && !rc; d++)
		rc = ck_buf_printf(&b, "%s%" PRIu64 ":%" PRIu64, d ? ", " : "[", c->offsets[d], c->offsets[d] + c->sizes[d]);
	if (!rc && !whole)
		rc = ck_buf_puts(&b, "]");
	if (!rc)
		rc = ck_buf_putc(&b, 0);
	if (rc) {
		ck_buf_free(&b);
		return NULL;
	}
	return (char *)b.data;
}

static const char *dims(const uint64_t *v, int ndim, char *buf, size_t size)
{
	if (ck_dcp_format_dims(v, ndim, buf, size))
		snprintf(buf, size, "[...]");
	return buf;
}

const char *ck_dcp_family_name(enum ck_dcp_family f)
{
	switch (f) {
	case CK_DCP_PROTOTYPE:
		return "torch 1.13";
	case CK_DCP_V20:
		return "torch 2.0-2.3";
	case CK_DCP_V24:
		return "torch 2.4+";
	}
	return "unknown";
}

/* A relative path that stays inside the save's directory. */
static const char *bad_relpath(const struct pk_node *n)
{
	const char *s, *p;

	if (!n || n->kind != PK_STR)
		return "is not a str";
	s = n->v.str.s;
	if (strlen(s) != n->v.str.len)
		return "holds a NUL byte";
	if (!*s)
		return "is empty";
	if (*s == '/')
		return "is absolute";
	if (strchr(s, '\\'))
		return "holds a backslash";
	for (p = s;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		if (len == 2 && p[0] == '.' && p[1] == '.')
			return "leaves the checkpoint ('..')";
		if (!len || (len == 1 && p[0] == '.'))
			return "has an empty or '.' component";
		if (!slash)
			return NULL;
		p = slash + 1;
	}
}

/* ---- entries ---------------------------------------------------------------- */

static int cmp_entry_fqn(const void *a, const void *b, void *ctx)
{
	const struct ck_dcp_entry *e = ctx;

	return strcmp(e[*(const size_t *)a].fqn, e[*(const size_t *)b].fqn);
}

/* qsort_r is not in every libc's default namespace: a tiny merge sort. */
static void sort_idx(size_t *v, size_t n, int (*cmp)(const void *, const void *, void *), void *ctx, size_t *tmp)
{
	size_t h, i, j, k;

	if (n < 2)
		return;
	h = n / 2;
	sort_idx(v, h, cmp, ctx, tmp);
	sort_idx(v + h, n - h, cmp, ctx, tmp);
	for (i = 0, j = h, k = 0; i < h || j < n;)
		tmp[k++] = j == n || (i < h && cmp(&v[i], &v[j], ctx) <= 0) ? v[i++] : v[j++];
	memcpy(v, tmp, n * sizeof(*v));
}

const struct ck_dcp_entry *ck_dcp_find(const struct ck_dcp_meta *m, const char *fqn)
{
	size_t lo = 0, hi = m->nentries;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->entries[m->by_fqn[mid]].fqn, fqn);

		if (!c)
			return &m->entries[m->by_fqn[mid]];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int add_def(struct parser *p, const uint64_t *off, const uint64_t *sz, int ndim)
{
	if (p->ndefs == p->capdefs) {
		struct def *d = ck_grow(p->defs, &p->capdefs, sizeof(*d), 64);

		if (!d)
			return -ENOMEM;
		p->defs = d;
	}
	memset(&p->defs[p->ndefs], 0, sizeof(*p->defs));
	if (ndim) {
		memcpy(p->defs[p->ndefs].offsets, off, (size_t)ndim * sizeof(*off));
		memcpy(p->defs[p->ndefs].sizes, sz, (size_t)ndim * sizeof(*sz));
	}
	p->defs[p->ndefs++].storage = -1;
	return 0;
}

/* dtype from TensorProperties: its state tuple (dtype, layout, requires_grad,
 * memory format, pin_memory) or an attribute dict with "dtype". */
static enum ck_dtype props_dtype(const struct pk_node *props)
{
	const struct pk_node *s, *d = NULL;

	if (!is_class(props, "TensorProperties"))
		return CK_DT_INVALID;
	s = props->state;
	if (s && s->kind == PK_TUPLE && s->n >= 1)
		d = s->items[0];
	else if (s && s->kind == PK_DICT && !s->cls)
		d = pk_dict_get_str(s, "dtype");
	if (!d || d->kind != PK_GLOBAL || strcmp(d->v.global.module, "torch"))
		return CK_DT_INVALID;
	return ck_dtype_from_torch_name(d->v.global.name);
}

static int parse_tensor(struct parser *p, struct ck_dcp_entry *e, const struct pk_node *v)
{
	const struct pk_node *a = attrs_of(v), *chunks;
	char b1[200];

	if (!a)
		return ck_fail(p->err, EINVAL, "state_dict_metadata['%.200s']: TensorStorageMetadata without attributes",
			       e->fqn);
	e->dtype = props_dtype(pk_dict_get_str(a, "properties"));
	if (e->dtype == CK_DT_INVALID || e->dtype == CK_DT_UNTYPED)
		return ck_fail(p->err, EINVAL, "state_dict_metadata['%.200s']: properties do not name a torch dtype",
			       e->fqn);
	if (!get_dims(pk_dict_get_str(a, "size"), e->size, &e->ndim))
		return ck_fail(p->err, EINVAL,
			       "state_dict_metadata['%.200s']: size is not a torch.Size of at most %d dimensions",
			       e->fqn, CK_MAX_DIMS);
	chunks = pk_dict_get_str(a, "chunks");
	if (!chunks || chunks->kind != PK_LIST)
		return ck_fail(p->err, EINVAL, "state_dict_metadata['%.200s']: chunks is not a list", e->fqn);
	for (size_t i = 0; i < chunks->n; i++) {
		const struct pk_node *c = chunks->items[i], *ca = is_class(c, "ChunkStorageMetadata") ? attrs_of(c) : NULL;
		uint64_t off[CK_MAX_DIMS], sz[CK_MAX_DIMS];
		int n1 = -1, n2 = -1, rc;

		if (!ca || !get_dims(pk_dict_get_str(ca, "offsets"), off, &n1) ||
		    !get_dims(pk_dict_get_str(ca, "sizes"), sz, &n2))
			return ck_fail(p->err, EINVAL,
				       "state_dict_metadata['%.200s']: chunks[%zu] is not a ChunkStorageMetadata(offsets, sizes)",
				       e->fqn, i);
		if (n1 != e->ndim || n2 != e->ndim)
			return ck_fail(p->err, EINVAL,
				       "state_dict_metadata['%.200s']: chunks[%zu] has %d dimensions, the tensor %d",
				       e->fqn, i, n1 != e->ndim ? n1 : n2, e->ndim);
		for (int d = 0; d < e->ndim; d++) {
			if (off[d] > e->size[d] || sz[d] > e->size[d] - off[d])
				return ck_fail(p->err, EINVAL,
					       "state_dict_metadata['%.200s']: chunks[%zu] at %s reaches outside the tensor %s",
					       e->fqn, i, dims(off, e->ndim, b1, 96), dims(e->size, e->ndim, b1 + 100, 96));
		}
		rc = add_def(p, off, sz, e->ndim);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_entries(struct parser *p, const struct pk_node *sdm)
{
	struct ck_dcp_meta *m = p->m;
	size_t n = sdm->n / 2;

	m->entries = calloc(n + 1, sizeof(*m->entries));
	p->def_first = calloc(n + 1, sizeof(*p->def_first));
	if (!m->entries || !p->def_first)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct pk_node *k = sdm->items[2 * i], *v = sdm->items[2 * i + 1];
		struct ck_dcp_entry *e = &m->entries[i];
		int rc = 0;

		if (!is_str(k))
			return ck_fail(p->err, EINVAL, "state_dict_metadata: key %zu is not a str without NUL", i);
		e->fqn = k->v.str.s;
		e->key = k;
		e->value = v;
		p->def_first[i] = p->ndefs;
		if (is_class(v, "BytesStorageMetadata")) {
			e->is_bytes = 1;
			rc = add_def(p, NULL, NULL, 0);
		} else if (is_class(v, "TensorStorageMetadata")) {
			rc = parse_tensor(p, e, v);
		} else {
			rc = ck_fail(p->err, EINVAL,
				     "state_dict_metadata['%.200s']: neither a TensorStorageMetadata nor a BytesStorageMetadata",
				     e->fqn);
		}
		if (rc)
			return rc;
		m->nentries++;
	}
	p->def_first[n] = p->ndefs;
	return 0;
}

/* ---- coverage ------------------------------------------------------------------ */

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

static int volume(const uint64_t *v, int ndim, uint64_t *out)
{
	uint64_t x = 1;

	for (int d = 0; d < ndim; d++)
		if (!mul_ok(x, v[d], &x))
			return 0;
	*out = x;
	return 1;
}

static int overlap(const struct def *a, const struct def *b, int ndim)
{
	for (int d = 0; d < ndim; d++) {
		if (!a->sizes[d] || !b->sizes[d])
			return 0;
		if (a->offsets[d] >= b->offsets[d] + b->sizes[d] || b->offsets[d] >= a->offsets[d] + a->sizes[d])
			return 0;
	}
	return 1;
}

struct sweep_ctx {
	const struct def *defs;
	int dim;
};

static int cmp_sweep(const void *a, const void *b, void *ctx)
{
	const struct sweep_ctx *s = ctx;
	uint64_t x = s->defs[*(const size_t *)a].offsets[s->dim], y = s->defs[*(const size_t *)b].offsets[s->dim];

	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The chunks of entry i neither overlap nor leave a hole (they are known to
 * lie inside the tensor): no two overlap, and their volumes add up. */
static int check_cover(struct parser *p, size_t i)
{
	const struct ck_dcp_entry *e = &p->m->entries[i];
	const struct def *d = p->defs + p->def_first[i];
	size_t n = p->def_first[i + 1] - p->def_first[i], *order = NULL, *tmp = NULL;
	uint64_t total, sum = 0, v, pairs = 0, *vals = NULL;
	struct sweep_ctx sc = { d, 0 };
	char b1[100], b2[100];
	int rc = 0;

	if (!volume(e->size, e->ndim, &total))
		return ck_fail(p->err, EINVAL, "state_dict_metadata['%.200s']: size %s has too many elements", e->fqn,
			       dims(e->size, e->ndim, b1, sizeof(b1)));
	for (size_t k = 0; k < n; k++) {
		if (!volume(d[k].sizes, e->ndim, &v) || __builtin_add_overflow(sum, v, &sum))
			return ck_fail(p->err, EINVAL, "state_dict_metadata['%.200s']: chunks hold too many elements",
				       e->fqn);
	}
	/* Sweep along the dimension whose offsets differ most. */
	if (n > 1 && e->ndim > 0) {
		size_t best = 0;

		order = malloc(n * sizeof(*order));
		tmp = malloc(n * sizeof(*tmp));
		vals = malloc(n * sizeof(*vals));
		if (!order || !tmp || !vals) {
			rc = -ENOMEM;
			goto out;
		}
		for (int dim = 0; dim < e->ndim; dim++) {
			size_t distinct = 1;

			for (size_t k = 0; k < n; k++)
				vals[k] = d[k].offsets[dim];
			qsort(vals, n, sizeof(*vals), cmp_u64);
			for (size_t k = 1; k < n; k++)
				distinct += vals[k] != vals[k - 1];
			if (distinct > best) {
				best = distinct;
				sc.dim = dim;
			}
		}
		for (size_t k = 0; k < n; k++)
			order[k] = k;
		sort_idx(order, n, cmp_sweep, &sc, tmp);
		for (size_t a = 0; a < n && !rc; a++) {
			const struct def *x = &d[order[a]];

			for (size_t b = a + 1; b < n; b++) {
				const struct def *y = &d[order[b]];

				if (y->offsets[sc.dim] >= x->offsets[sc.dim] + x->sizes[sc.dim])
					break;
				if (++pairs > MAX_OVERLAP_PAIRS) {
					rc = ck_fail(p->err, EINVAL,
						     "state_dict_metadata['%.200s']: too many chunks (%zu) to check", e->fqn, n);
					break;
				}
				if (overlap(x, y, e->ndim)) {
					rc = ck_fail(p->err, EINVAL,
						     "state_dict_metadata['%.200s']: chunks at %s and %s overlap", e->fqn,
						     dims(x->offsets, e->ndim, b1, sizeof(b1)),
						     dims(y->offsets, e->ndim, b2, sizeof(b2)));
					break;
				}
			}
		}
	}
	if (!rc && e->ndim == 0 && n > 1)
		rc = ck_fail(p->err, EINVAL, "state_dict_metadata['%.200s']: %zu chunks of a 0-dimensional tensor", e->fqn,
			     n);
	if (!rc && sum != total)
		rc = ck_fail(p->err, EINVAL,
			     "state_dict_metadata['%.200s']: chunks cover %" PRIu64 " of its %" PRIu64 " elements",
			     e->fqn, sum, total);
out:
	free(order);
	free(tmp);
	free(vals);
	return rc;
}

/* ---- storage_data ------------------------------------------------------------- */

static int cmp_def_offsets(const void *a, const void *b, void *ctx)
{
	const struct sweep_ctx *s = ctx;
	const struct def *x = &s->defs[*(const size_t *)a], *y = &s->defs[*(const size_t *)b];

	for (int d = 0; d < s->dim; d++)
		if (x->offsets[d] != y->offsets[d])
			return x->offsets[d] < y->offsets[d] ? -1 : 1;
	return 0;
}

static int sort_defs(struct parser *p)
{
	size_t *tmp = malloc((p->ndefs + 1) * sizeof(*tmp));

	p->def_sorted = malloc((p->ndefs + 1) * sizeof(*p->def_sorted));
	if (!tmp || !p->def_sorted) {
		free(tmp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->ndefs; i++)
		p->def_sorted[i] = i;
	for (size_t e = 0; e < p->m->nentries; e++) {
		struct sweep_ctx sc = { p->defs, p->m->entries[e].ndim };
		size_t first = p->def_first[e], n = p->def_first[e + 1] - first;

		sort_idx(p->def_sorted + first, n, cmp_def_offsets, &sc, tmp);
	}
	free(tmp);
	return 0;
}

/* The def of entry e at offsets, or -1. */
static long find_def(const struct parser *p, size_t e, const uint64_t *off)
{
	size_t first = p->def_first[e], lo = 0, hi = p->def_first[e + 1] - first;
	int ndim = p->m->entries[e].ndim;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, k = p->def_sorted[first + mid];
		int c = 0;

		for (int d = 0; d < ndim && !c; d++)
			if (p->defs[k].offsets[d] != off[d])
				c = p->defs[k].offsets[d] < off[d] ? -1 : 1;
		if (!c)
			return (long)k;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int parse_storage(struct parser *p, const struct pk_node *sd)
{
	struct ck_dcp_meta *m = p->m;
	size_t n = sd->n / 2;
	char b1[100];

	m->chunks = calloc(n + 1, sizeof(*m->chunks));
	if (!m->chunks)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct pk_node *k = sd->items[2 * i], *v = sd->items[2 * i + 1];
		const struct pk_node *ka = is_class(k, "MetadataIndex") ? attrs_of(k) : NULL;
		const struct pk_node *va = is_class(v, "_StorageInfo") ? attrs_of(v) : NULL;
		const struct pk_node *fqn, *off, *path, *td;
		const struct ck_dcp_entry *e;
		struct ck_dcp_chunk *c = &m->chunks[i];
		uint64_t offsets[CK_MAX_DIMS];
		const char *why;
		int ndim = 0;
		long def;

		if (!ka || !is_str(fqn = pk_dict_get_str(ka, "fqn")))
			return ck_fail(p->err, EINVAL, "storage_data: key %zu is not a MetadataIndex with a str fqn", i);
		e = ck_dcp_find(m, fqn->v.str.s);
		if (!e)
			return ck_fail(p->err, EINVAL, "storage_data: '%.200s' is not in state_dict_metadata", fqn->v.str.s);
		off = pk_dict_get_str(ka, "offset");
		if (off && off->kind == PK_NONE)
			off = NULL;
		if (e->is_bytes ? off != NULL : !off || !get_dims(off, offsets, &ndim) || ndim != e->ndim)
			return ck_fail(p->err, EINVAL, "storage_data: '%.200s': %s", e->fqn,
				       e->is_bytes ? "a bytes item with chunk offsets"
						   : "the key's offset is not a torch.Size of the tensor's dimensions");
		def = find_def(p, (size_t)(e - m->entries), offsets);
		if (def < 0)
			return ck_fail(p->err, EINVAL, "storage_data: '%.200s' at %s: no such chunk in state_dict_metadata",
				       e->fqn, dims(offsets, ndim, b1, sizeof(b1)));
		if (p->defs[def].storage >= 0)
			return ck_fail(p->err, EINVAL, "storage_data: '%.200s' at %s is stored twice", e->fqn,
				       dims(offsets, ndim, b1, sizeof(b1)));
		if (!va)
			return ck_fail(p->err, EINVAL, "storage_data['%.200s']: not a _StorageInfo", e->fqn);
		path = pk_dict_get_str(va, "relative_path");
		why = bad_relpath(path);
		if (why)
			return ck_fail(p->err, EINVAL, "storage_data['%.200s']: relative_path '%.200s' %s", e->fqn,
				       path && path->kind == PK_STR ? path->v.str.s : "?", why);
		if (!get_u64(pk_dict_get_str(va, "offset"), &c->offset) ||
		    !get_u64(pk_dict_get_str(va, "length"), &c->length) || c->offset + c->length < c->offset ||
		    c->offset + c->length > (uint64_t)INT64_MAX)
			return ck_fail(p->err, EINVAL, "storage_data['%.200s']: offset and length are not a byte range",
				       e->fqn);
		td = pk_dict_get_str(va, "transform_descriptors");
		if (td && td->kind != PK_NONE) {
			if (td->kind != PK_LIST && td->kind != PK_TUPLE)
				return ck_fail(p->err, EINVAL, "storage_data['%.200s']: transform_descriptors is not a list",
					       e->fqn);
			for (size_t j = 0; j < td->n; j++)
				if (!is_str(td->items[j]))
					return ck_fail(p->err, EINVAL,
						       "storage_data['%.200s']: transform_descriptors holds a non-str",
						       e->fqn);
			c->transformed = td->n > 0;
		}
		c->entry = (size_t)(e - m->entries);
		if (ndim) {
			memcpy(c->offsets, offsets, (size_t)ndim * sizeof(*offsets));
			memcpy(c->sizes, p->defs[def].sizes, (size_t)ndim * sizeof(*offsets));
		}
		c->relpath = path->v.str.s;
		c->key = k;
		c->storage = v;
		p->defs[def].storage = (long)i;
		m->nchunks++;
	}
	return 0;
}

/* Every chunk was stored: entries point at their chunks, in their order. */
static int link_chunks(struct parser *p)
{
	struct ck_dcp_meta *m = p->m;
	char b1[100];

	m->chunk_index = malloc((p->ndefs + 1) * sizeof(*m->chunk_index));
	if (!m->chunk_index)
		return -ENOMEM;
	for (size_t e = 0; e < m->nentries; e++) {
		struct ck_dcp_entry *en = &m->entries[e];

		en->chunks = m->chunk_index + p->def_first[e];
		en->nchunks = p->def_first[e + 1] - p->def_first[e];
		for (size_t k = p->def_first[e]; k < p->def_first[e + 1]; k++) {
			if (p->defs[k].storage < 0)
				return ck_fail(p->err, EINVAL, "storage_data: nothing stores '%.200s'%s%s", en->fqn,
					       en->is_bytes ? "" : " at ",
					       en->is_bytes ? "" : dims(p->defs[k].offsets, en->ndim, b1, sizeof(b1)));
			m->chunk_index[k] = (size_t)p->defs[k].storage;
		}
	}
	return 0;
}

/* ---- the document ------------------------------------------------------------- */

static int parse_root(struct parser *p)
{
	struct ck_dcp_meta *m = p->m;
	const struct pk_node *root = pk_doc_root(m->doc), *a, *sdm, *sd, *pd;
	const struct pk_node *g;
	int rc;

	if (pk_doc_dangerous_global(m->doc, &g))
		return ck_fail(p->err, EINVAL, "refers to dangerous global %.100s.%.100s (never executed)",
			       g->v.global.module, g->v.global.name);
	if (!is_class(root, "Metadata") || !(a = attrs_of(root)))
		return ck_fail(p->err, EINVAL, "not a DCP Metadata object (%s)",
			       root && (root->kind == PK_NEWOBJ || root->kind == PK_CALL) && root->cls &&
					       root->cls->kind == PK_GLOBAL
				       ? root->cls->v.global.name
				       : "another kind of pickle");
	m->root = root;
	m->attrs = a;
	m->family = !strcmp(root->cls->v.global.module, PROTOTYPE_MODULE) ? CK_DCP_PROTOTYPE
		    : pk_dict_get_str(a, "storage_meta")                  ? CK_DCP_V24
									     : CK_DCP_V20;
	sdm = pk_dict_get_str(a, "state_dict_metadata");
	sd = pk_dict_get_str(a, "storage_data");
	if (!sdm || sdm->kind != PK_DICT)
		return ck_fail(p->err, EINVAL, "state_dict_metadata is not a dict");
	if (!sd || sd->kind != PK_DICT)
		return ck_fail(p->err, EINVAL, "storage_data is not a dict");
	pd = pk_dict_get_str(a, "planner_data");
	if (pd && pd->kind == PK_DICT)
		m->planner_data = pd;
	else if (pd && pd->kind != PK_NONE)
		return ck_fail(p->err, EINVAL, "planner_data is neither a dict nor None");
	rc = parse_entries(p, sdm);
	if (!rc) {
		size_t *tmp = malloc((m->nentries + 1) * sizeof(*tmp));

		m->by_fqn = malloc((m->nentries + 1) * sizeof(*m->by_fqn));
		if (!tmp || !m->by_fqn) {
			free(tmp);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->nentries; i++)
			m->by_fqn[i] = i;
		sort_idx(m->by_fqn, m->nentries, cmp_entry_fqn, m->entries, tmp);
		free(tmp);
	}
	for (size_t i = 0; i < m->nentries && !rc; i++)
		if (!m->entries[i].is_bytes)
			rc = check_cover(p, i);
	if (!rc)
		rc = sort_defs(p);
	if (!rc)
		rc = parse_storage(p, sd);
	if (!rc)
		rc = link_chunks(p);
	return rc;
}

int ck_dcp_parse(const uint8_t *data, size_t len, struct ck_dcp_meta **out, struct ck_error *err)
{
	struct ck_dcp_meta *m = calloc(1, sizeof(*m));
	struct parser p = { .m = m, .err = err };
	int rc;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	rc = pk_parse(data, len, NULL, &m->doc, err);
	if (!rc) {
		m->protocol = pk_doc_protocol(m->doc);
		rc = parse_root(&p);
	}
	free(p.defs);
	free(p.def_first);
	free(p.def_sorted);
	if (rc) {
		if (rc == -ENOMEM)
			ck_fail(err, ENOMEM, "out of memory");
		ck_dcp_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void ck_dcp_free(struct ck_dcp_meta *m)
{
	if (!m)
		return;
	free(m->entries);
	free(m->chunks);
	free(m->chunk_index);
	free(m->by_fqn);
	pk_doc_free(m->doc);
	free(m);
}

int ck_dcp_check_files(const struct ck_dcp_meta *m, ck_dcp_size_fn size, void *ctx, struct ck_error *err)
{
	for (size_t i = 0; i < m->nchunks; i++) {
		const struct ck_dcp_chunk *c = &m->chunks[i];
		const struct ck_dcp_entry *e = &m->entries[c->entry];
		int64_t sz = size(ctx, c->relpath);
		char b1[100];

		if (sz == -ENOENT)
			return ck_fail(err, EINVAL, "'%.200s' is stored in %.200s, which is not there", e->fqn, c->relpath);
		if (sz < 0)
			return ck_fail(err, (int)-sz, "%.200s: %s", c->relpath, strerror((int)-sz));
		if (c->offset + c->length > (uint64_t)sz)
			return ck_fail(err, EINVAL,
				       "'%.200s'%s%s: bytes %" PRIu64 "-%" PRIu64 " of %.200s, which has %" PRId64, e->fqn,
				       e->is_bytes ? "" : " at ", e->is_bytes ? "" : dims(c->offsets, e->ndim, b1, sizeof(b1)),
				       c->offset, c->offset + c->length, c->relpath, sz);
	}
	return 0;
}
