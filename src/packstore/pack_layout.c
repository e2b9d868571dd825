/* How a file version is cut into chunks: a new chunk at every tensor
 * storage (so that a storage's chunks line up version after version), at
 * most CK_CHUNK_MAX bytes each; the bytes between storages (zip headers,
 * the pickle, a safetensors header) are chunks of element size 1. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/chunk.h"
#include "ckptfs/dtype.h"
#include "pack_layout.h"

static int cmp_storage_off(const void *a, const void *b)
{
	const struct ck_storage_info *x = *(const struct ck_storage_info *const *)a;
	const struct ck_storage_info *y = *(const struct ck_storage_info *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Tensors that name a storage, ordered by its key, the first of each key (in the file's
 * order) leftmost: a storage's tensors are found by bsearch, not by a
 * walk over all of them (a DCP file holds tens of thousands). */
static int cmp_tensor_key(const void *a, const void *b)
{
	const struct ck_tensor_info *x = *(const struct ck_tensor_info *const *)a;
	const struct ck_tensor_info *y = *(const struct ck_tensor_info *const *)b;
	int c = strcmp(x->storage_key, y->storage_key);

	return c ? c : (x > y) - (x < y);
}

/* The element size of the storage key, and the name of its first tensor. */
static unsigned elem_of(const char *key, const struct ck_tensor_info *const *by_key, size_t nt, const char **name)
{
	size_t lo = 0, hi = nt;

	*name = key;
	while (lo < hi) {   /* the leftmost tensor whose key is not below key */
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(by_key[mid]->storage_key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < nt && strcmp(by_key[lo]->storage_key, key) == 0) {
		size_t sz = ck_dtype_size(by_key[lo]->dtype);

		if (by_key[lo]->name)
			*name = by_key[lo]->name;
		return sz == 2 || sz == 4 || sz == 8 ? (unsigned)sz : 1;
	}
	return 1;
}

static int add_chunks(struct ck_layout *l, uint64_t off, uint64_t len, const struct ck_storage_info *storage,
		      const char *ident, unsigned elem, uint32_t index)
{
	while (len) {
		uint32_t n = len > CK_CHUNK_MAX ? CK_CHUNK_MAX : (uint32_t)len;

		if (l->n == l->cap) {
			struct ck_layout_chunk *v = ck_grow(l->c, &l->cap, sizeof(*v), 64);

			if (!v)
				return -ENOMEM;
			l->c = v;
		}
		l->c[l->n++] = (struct ck_layout_chunk){ .off = off, .len = n, .elem = elem,
							 .key = storage ? storage->key : NULL, .storage = storage,
							 .ident = ident, .index = index++ };
		off += n;
		len -= n;
	}
	return 0;
}

int ck_layout_build(struct ck_layout *l, uint64_t size, const struct ck_storage_info *s, size_t ns,
		    const struct ck_tensor_info *t, size_t nt)
{
	const struct ck_storage_info **by_off = NULL;
	const struct ck_tensor_info **by_key = NULL;
	size_t nkeyed = 0;
	uint64_t pos = 0;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	by_off = malloc((ns ? ns : 1) * sizeof(*by_off));
	by_key = malloc((nt ? nt : 1) * sizeof(*by_key));
	if (!by_off || !by_key) {
		free(by_off);
		free(by_key);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ns; i++)
		by_off[i] = &s[i];
	qsort(by_off, ns, sizeof(*by_off), cmp_storage_off);
	for (size_t i = 0; i < nt; i++)
		if (t[i].storage_key)
			by_key[nkeyed++] = &t[i];
	qsort(by_key, nkeyed, sizeof(*by_key), cmp_tensor_key);
	for (size_t i = 0; i < ns && rc == 0; i++) {
		const struct ck_storage_info *x = by_off[i];
		const char *ident;
		unsigned elem;

		/* Overlapping or out-of-file ranges stay in the byte stream. */
		if (x->offset < pos || x->length == 0 || x->offset > size || x->length > size - x->offset)
			continue;
		elem = elem_of(x->key, by_key, nkeyed, &ident);
		rc = add_chunks(l, pos, x->offset - pos, NULL, ident, 1, CK_LAYOUT_GAP);
		if (rc == 0)
			rc = add_chunks(l, x->offset, x->length, x, ident, elem, 0);
		pos = x->offset + x->length;
	}
	if (rc == 0)
		rc = add_chunks(l, pos, size - pos, NULL, CK_LAYOUT_END, 1, CK_LAYOUT_GAP);
	free(by_off);
	free(by_key);
	if (rc < 0)
		ck_layout_clear(l);
	return rc;
}

void ck_layout_clear(struct ck_layout *l)
{
	free(l->c);
	free(l->refs);
	memset(l, 0, sizeof(*l));
}

/* The storages' chunks ordered by (key, index), for ck_layout_find. */
static int cmp_key_index(const void *a, const void *b)
{
	const struct ck_layout_ref *x = a, *y = b;
	int c = strcmp(x->ident, y->ident);

	if (c)
		return c;
	return x->index < y->index ? -1 : x->index > y->index;
}

int ck_layout_index(struct ck_layout *l)
{
	l->nrefs = 0;
	l->refs = malloc((l->n ? l->n : 1) * sizeof(*l->refs));
	if (!l->refs)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++)
		if (l->c[i].ident)
			l->refs[l->nrefs++] = (struct ck_layout_ref){ l->c[i].ident, l->c[i].index, (uint32_t)i };
	qsort(l->refs, l->nrefs, sizeof(*l->refs), cmp_key_index);
	return 0;
}

long ck_layout_find(const struct ck_layout *l, const char *ident, uint32_t index)
{
	struct ck_layout_ref want = { ident, index, 0 }, *hit;

	if (!ident || !l->refs)
		return -1;
	hit = bsearch(&want, l->refs, l->nrefs, sizeof(*l->refs), cmp_key_index);
	return hit ? (long)hit->pos : -1;
}
