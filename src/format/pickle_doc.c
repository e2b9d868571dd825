/* Pickle documents: an arena that owns every node, string and item array,
 * the node constructors, and the per-document registries of GLOBALs and
 * storages. */
#include "config.h"

#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ckptfs/buf.h"
#include "pickle_int.h"

#define CHUNK_MIN  (64u << 10)
#define HUGE_CHUNK (2u << 20)
#define CHUNK_MAX  (HUGE_CHUNK - sizeof(struct pk_chunk))
/* Nodes, item arrays and strings need no more than pointer / uint64_t
 * alignment; a smaller grain keeps documents compact. */
#define ALIGN      8
_Static_assert(alignof(struct pk_inode) <= ALIGN && alignof(struct pk_tensor) <= ALIGN &&
	       alignof(struct pk_storage) <= ALIGN, "arena alignment");

struct pk_chunk {
	struct pk_chunk *next;
	size_t used, size;
	alignas(max_align_t) unsigned char data[];
};

static struct pk_chunk *chunk_new(size_t size)
{
	struct pk_chunk *c;
	void *p;

	if (size > SIZE_MAX - sizeof(*c))
		return NULL;
	if (size + sizeof(*c) == HUGE_CHUNK) {
		/* Big documents: 2 MiB-aligned chunks that the kernel may back
		 * with one huge page each instead of 512 page faults. */
		if (posix_memalign(&p, HUGE_CHUNK, HUGE_CHUNK))
			return NULL;
#ifdef MADV_HUGEPAGE
		madvise(p, HUGE_CHUNK, MADV_HUGEPAGE);
#endif
		c = p;
	} else {
		c = malloc(sizeof(*c) + size);
	}
	if (!c)
		return NULL;
	c->next = NULL;
	c->used = 0;
	c->size = size;
	return c;
}

void *pk_alloc(struct pk_doc *doc, size_t size)
{
	struct pk_chunk *head = doc->chunks, *c;
	size_t want;

	if (size > SIZE_MAX - ALIGN)
		return NULL;
	size = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (head && head->size - head->used >= size) {
		void *p = head->data + head->used;

		head->used += size;
		return p;
	}
	if (size > CHUNK_MAX / 4) {
		/* A big block gets its own chunk behind the current one, so
		 * the current chunk keeps serving small allocations. */
		c = chunk_new(size);
		if (!c)
			return NULL;
		c->used = size;
		if (head) {
			c->next = head->next;
			head->next = c;
		} else {
			doc->chunks = c;
		}
		return c->data;
	}
	want = head ? head->size * 2 : CHUNK_MIN;
	if (want > CHUNK_MAX)
		want = CHUNK_MAX;
	c = chunk_new(want);
	if (!c)
		return NULL;
	c->next = head;
	doc->chunks = c;
	c->used = size;
	return c->data;
}

char *pk_strndup(struct pk_doc *doc, const void *s, size_t len)
{
	char *p;

	if (len == SIZE_MAX)
		return NULL;
	p = pk_alloc(doc, len + 1);
	if (!p)
		return NULL;
	if (len)
		memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

struct pk_doc *pk_doc_new(void)
{
	return calloc(1, sizeof(struct pk_doc));
}

void pk_doc_free(struct pk_doc *doc)
{
	struct pk_chunk *c, *next;
	struct pk_index *ix;

	if (!doc)
		return;
	for (ix = doc->indexes; ix; ix = ix->next)
		pk_htab_free(&ix->tab);
	for (c = doc->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(doc->globals);
	pk_htab_free(&doc->globals_tab);
	free(doc->storages);
	free(doc->storage_pids);
	pk_htab_free(&doc->storages_tab);
	free(doc);
}

struct pk_node *pk_doc_root(const struct pk_doc *doc)
{
	return doc->root;
}

int pk_doc_protocol(const struct pk_doc *doc)
{
	return doc->protocol;
}

size_t pk_doc_length(const struct pk_doc *doc)
{
	return doc->length;
}

size_t pk_doc_nstorages(const struct pk_doc *doc)
{
	return doc->nstorages;
}

struct pk_storage *pk_doc_storage(const struct pk_doc *doc, size_t i)
{
	return i < doc->nstorages ? doc->storages[i] : NULL;
}

size_t pk_doc_nglobals(const struct pk_doc *doc)
{
	return doc->nglobals;
}

const struct pk_node *pk_doc_global(const struct pk_doc *doc, size_t i)
{
	return i < doc->nglobals ? doc->globals[i] : NULL;
}

struct pk_node *pk_new(struct pk_doc *doc, enum pk_kind kind)
{
	struct pk_inode *in = pk_alloc(doc, sizeof(*in));

	if (!in)
		return NULL;
	memset(in, 0, sizeof(*in));
	in->node.kind = kind;
	doc->nnodes++;
	return &in->node;
}

struct pk_node *pk_new_str(struct pk_doc *doc, const char *s, size_t len)
{
	struct pk_node *n = pk_new(doc, PK_STR);

	if (!n)
		return NULL;
	n->v.str.s = pk_strndup(doc, s, len);
	if (!n->v.str.s)
		return NULL;
	n->v.str.len = len;
	return n;
}

struct pk_node *pk_new_int(struct pk_doc *doc, int64_t v)
{
	struct pk_node *n = pk_new(doc, PK_INT);

	if (n)
		n->v.i = v;
	return n;
}

int pk_items_reserve(struct pk_doc *doc, struct pk_node *seq, size_t extra)
{
	struct pk_node **items;
	size_t cap;

	if (extra <= seq->cap - seq->n)
		return 0;
	if (extra > SIZE_MAX / sizeof(*items) / 2 - seq->n)
		return -ENOMEM;
	cap = seq->cap ? seq->cap * 2 : 4;
	if (cap < seq->n + extra)
		cap = seq->n + extra;
	items = pk_alloc(doc, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	if (seq->n)
		memcpy(items, seq->items, seq->n * sizeof(*items));
	/* The old array stays in the arena until the document is freed. */
	seq->items = items;
	seq->cap = cap;
	return 0;
}

struct pk_node *pk_clone(struct pk_doc *doc, const struct pk_node *src)
{
	struct pk_node *n = pk_new(doc, src->kind);

	if (!n)
		return NULL;
	*n = *src;
	n->items = NULL;
	n->n = n->cap = 0;
	if (src->n) {
		if (pk_items_reserve(doc, n, src->n))
			return NULL;
		memcpy(n->items, src->items, src->n * sizeof(*n->items));
		n->n = src->n;
	}
	return n;
}

int pk_append(struct pk_doc *doc, struct pk_node *seq, struct pk_node *item)
{
	int rc = pk_items_reserve(doc, seq, 1);

	if (rc)
		return rc;
	seq->items[seq->n++] = item;
	return 0;
}

/* --- interned GLOBALs ----------------------------------------------------- */

struct global_key {
	const struct pk_doc *doc;
	const char *module, *name;
	size_t mlen, nlen;
};

static int strn_is(const char *s, const char *p, size_t len)
{
	return !strncmp(s, p, len) && s[len] == '\0';
}

static int global_eq(const void *ctx, uint32_t pos)
{
	const struct global_key *k = ctx;
	const struct pk_node *g = k->doc->globals[pos];

	return strn_is(g->v.global.module, k->module, k->mlen) &&
	       strn_is(g->v.global.name, k->name, k->nlen);
}

static uint64_t global_hash(const char *module, size_t mlen, const char *name, size_t nlen)
{
	return pk_hash_bytes(module, mlen) * 0x9e3779b97f4a7c15ULL ^ pk_hash_bytes(name, nlen);
}

struct pk_node *pk_doc_intern_global(struct pk_doc *doc, const char *module, size_t mlen,
				     const char *name, size_t nlen)
{
	struct global_key k = { doc, module, name, mlen, nlen };
	uint64_t h = global_hash(module, mlen, name, nlen);
	long pos = pk_htab_find(&doc->globals_tab, h, global_eq, &k);
	struct pk_node *g;

	if (pos >= 0)
		return doc->globals[pos];
	if (doc->nglobals == doc->globals_cap) {
		struct pk_node **v = ck_grow(doc->globals, &doc->globals_cap, sizeof(*v), 16);

		if (!v)
			return NULL;
		doc->globals = v;
	}
	g = pk_new(doc, PK_GLOBAL);
	if (!g)
		return NULL;
	g->v.global.module = pk_strndup(doc, module, mlen);
	g->v.global.name = pk_strndup(doc, name, nlen);
	if (!g->v.global.module || !g->v.global.name)
		return NULL;
	if (pk_htab_add(&doc->globals_tab, h, (uint32_t)doc->nglobals))
		return NULL;
	doc->globals[doc->nglobals++] = g;
	return g;
}

struct pk_node *pk_new_global(struct pk_doc *doc, const char *module, const char *name)
{
	if (strchr(module, '\n') || strchr(name, '\n'))
		return NULL;
	return pk_doc_intern_global(doc, module, strlen(module), name, strlen(name));
}

/* --- storages ------------------------------------------------------------- */

struct storage_key {
	const struct pk_doc *doc;
	const char *key;
	size_t len;
};

static int storage_eq(const void *ctx, uint32_t pos)
{
	const struct storage_key *k = ctx;

	return strn_is(k->doc->storages[pos]->key, k->key, k->len);
}

long pk_doc_find_storage(const struct pk_doc *doc, const char *key, size_t klen)
{
	struct storage_key k = { doc, key, klen };

	return pk_htab_find(&doc->storages_tab, pk_hash_bytes(key, klen), storage_eq, &k);
}

struct pk_storage *pk_doc_storage_for(struct pk_doc *doc, const char *key, size_t klen,
				      struct pk_node *cls, enum ck_dtype dtype,
				      const char *location, size_t llen, uint64_t numel,
				      struct pk_node *pid)
{
	uint64_t h = pk_hash_bytes(key, klen);
	long pos = pk_doc_find_storage(doc, key, klen);
	struct pk_storage *st;

	if (pos >= 0)
		return doc->storages[pos];
	if (doc->nstorages == doc->storages_cap) {
		size_t cap = doc->storages_cap ? doc->storages_cap * 2 : 16;
		struct pk_storage **v = realloc(doc->storages, cap * sizeof(*v));
		struct pk_node **pids;

		if (!v)
			return NULL;
		doc->storages = v;
		pids = realloc(doc->storage_pids, cap * sizeof(*pids));
		if (!pids)
			return NULL;
		doc->storage_pids = pids;
		doc->storages_cap = cap;
	}
	st = pk_alloc(doc, sizeof(*st));
	if (!st)
		return NULL;
	memset(st, 0, sizeof(*st));
	st->dtype = dtype;
	st->key = pk_strndup(doc, key, klen);
	st->location = pk_strndup(doc, location, llen);
	if (!st->key || !st->location)
		return NULL;
	st->numel = numel;
	st->cls = cls;
	st->index = doc->nstorages;
	if (pk_htab_add(&doc->storages_tab, h, (uint32_t)doc->nstorages))
		return NULL;
	doc->storage_pids[doc->nstorages] = pid;
	doc->storages[doc->nstorages++] = st;
	return st;
}
