/* The decoded-chunk cache: chunks by hash, least recently used first out,
 * bounded in bytes.  Sixteen shards, each with its own lock, hash table and
 * LRU list, so that readers of different chunks rarely wait for each
 * other; a hit copies the chunk out under its shard's lock (no reference
 * counting, and an entry can be dropped the moment it is evicted).  With
 * one lock, copies of whole 1 MiB chunks slow down as readers are added;
 * sharded, they do not (docs/bench.md). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "packstore_int.h"

#define SHARDS 16
#define BUCKETS 512

/* The LRU list's links: the first member of every entry, and each
 * shard's sentinel (links alone, as an entry ends in its data). */
struct lru {
	struct lru *prev, *next;     /* head (the sentinel's next) is the most recent */
};

struct entry {
	struct lru lru;
	struct ck_hash128 h;
	uint32_t len;
	struct entry *hnext;         /* hash chain */
	uint8_t data[];
};

struct shard {
	pthread_mutex_t lock;
	struct entry *bucket[BUCKETS];
	struct lru lru;              /* sentinel */
	uint64_t bytes, max;
	uint64_t hits, misses;
};

struct ck_chunk_cache {
	unsigned nshards;            /* SHARDS, or 1 (ck_chunk_cache_new_fifo) */
	int bump;                    /* a hit makes the entry the most recent */
	struct shard s[SHARDS];
};

static struct shard *shard_of(struct ck_chunk_cache *c, struct ck_hash128 h)
{
	return &c->s[h.lo % c->nshards];
}

static struct entry **slot_of(struct shard *s, struct ck_hash128 h)
{
	struct entry **p = &s->bucket[(h.hi ^ (h.lo >> 7)) % BUCKETS];

	while (*p && !ck_hash128_eq((*p)->h, h))
		p = &(*p)->hnext;
	return p;
}

/* The entry whose links l are (never the sentinel). */
static struct entry *entry_of(struct lru *l)
{
	return (struct entry *)l;
}

static void lru_unlink(struct entry *e)
{
	e->lru.prev->next = e->lru.next;
	e->lru.next->prev = e->lru.prev;
}

static void lru_push(struct shard *s, struct entry *e)
{
	e->lru.next = s->lru.next;
	e->lru.prev = &s->lru;
	s->lru.next->prev = &e->lru;
	s->lru.next = &e->lru;
}

static int cache_new(uint64_t max_bytes, unsigned nshards, int bump, struct ck_chunk_cache **out)
{
	struct ck_chunk_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->nshards = nshards;
	c->bump = bump;
	for (int i = 0; i < SHARDS; i++) {
		struct shard *s = &c->s[i];

		pthread_mutex_init(&s->lock, NULL);
		s->lru.next = s->lru.prev = &s->lru;
		s->max = max_bytes / nshards;
	}
	*out = c;
	return 0;
}

int ck_chunk_cache_new(uint64_t max_bytes, struct ck_chunk_cache **out)
{
	return cache_new(max_bytes, SHARDS, 1, out);
}

int ck_chunk_cache_new_fifo(uint64_t max_bytes, struct ck_chunk_cache **out)
{
	return cache_new(max_bytes, 1, 0, out);
}

void ck_chunk_cache_free(struct ck_chunk_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < SHARDS; i++) {
		struct shard *s = &c->s[i];
		struct lru *l = s->lru.next;

		while (l != &s->lru) {
			struct lru *next = l->next;

			free(entry_of(l));
			l = next;
		}
		pthread_mutex_destroy(&s->lock);
	}
	free(c);
}

void ck_chunk_cache_counters(const struct ck_chunk_cache *cc, uint64_t *hits, uint64_t *misses, uint64_t *bytes)
{
	struct ck_chunk_cache *c = (struct ck_chunk_cache *)cc;   /* only the locks change */
	uint64_t h = 0, m = 0, b = 0;

	for (unsigned i = 0; c && i < c->nshards; i++) {
		pthread_mutex_lock(&c->s[i].lock);
		h += c->s[i].hits;
		m += c->s[i].misses;
		b += c->s[i].bytes;
		pthread_mutex_unlock(&c->s[i].lock);
	}
	if (hits)
		*hits = h;
	if (misses)
		*misses = m;
	if (bytes)
		*bytes = b;
}

int ck_chunk_cache_read(struct ck_chunk_cache *c, struct ck_hash128 h, uint32_t off, uint32_t n, uint8_t *out,
			uint32_t *len)
{
	struct shard *s = shard_of(c, h);
	struct entry *e;

	pthread_mutex_lock(&s->lock);
	e = *slot_of(s, h);
	if (e && off <= e->len && n <= e->len - off) {
		if (c->bump) {
			lru_unlink(e);
			lru_push(s, e);
		}
		memcpy(out, e->data + off, n);
		*len = e->len;
		s->hits++;
	} else {
		e = NULL;
		s->misses++;
	}
	pthread_mutex_unlock(&s->lock);
	return e != NULL;
}

int ck_chunk_cache_copy(struct ck_chunk_cache *c, struct ck_hash128 h, uint8_t *out, uint32_t *len)
{
	struct shard *s = shard_of(c, h);
	struct entry *e;

	pthread_mutex_lock(&s->lock);
	e = *slot_of(s, h);
	if (e) {
		if (c->bump) {
			lru_unlink(e);
			lru_push(s, e);
		}
		memcpy(out, e->data, e->len);
		*len = e->len;
		s->hits++;
	} else {
		s->misses++;
	}
	pthread_mutex_unlock(&s->lock);
	return e != NULL;
}

int ck_chunk_cache_has(struct ck_chunk_cache *c, struct ck_hash128 h)
{
	struct shard *s = shard_of(c, h);
	int has;

	pthread_mutex_lock(&s->lock);
	has = *slot_of(s, h) != NULL;
	pthread_mutex_unlock(&s->lock);
	return has;
}

uint64_t ck_chunk_cache_bound(const struct ck_chunk_cache *c)
{
	return c->s[0].max * c->nshards;   /* each shard's, grown alike */
}

void ck_chunk_cache_grow(struct ck_chunk_cache *c, uint64_t max_bytes)
{
	for (unsigned i = 0; i < c->nshards; i++) {
		struct shard *s = &c->s[i];

		pthread_mutex_lock(&s->lock);
		if (s->max < max_bytes / c->nshards)
			s->max = max_bytes / c->nshards;
		pthread_mutex_unlock(&s->lock);
	}
}

static void evict_one(struct shard *s)
{
	struct entry *e = entry_of(s->lru.prev);

	*slot_of(s, e->h) = e->hnext;
	lru_unlink(e);
	s->bytes -= e->len;
	free(e);
}

void ck_chunk_cache_insert(struct ck_chunk_cache *c, struct ck_hash128 h, const uint8_t *p, uint32_t len)
{
	struct shard *s = shard_of(c, h);
	struct entry *e, **slot;

	if (len > s->max)
		return;   /* a cache smaller than a chunk per shard caches nothing */
	if (!c->bump) {
		/* first in, first out: inserting what is there makes it the newest */
		pthread_mutex_lock(&s->lock);
		e = *slot_of(s, h);
		if (e) {
			lru_unlink(e);
			lru_push(s, e);
		}
		pthread_mutex_unlock(&s->lock);
		if (e)
			return;
	}
	e = malloc(sizeof(*e) + len);
	if (!e)
		return;   /* a cache is allowed to forget */
	e->h = h;
	e->len = len;
	memcpy(e->data, p, len);
	pthread_mutex_lock(&s->lock);
	slot = slot_of(s, h);
	if (*slot) {
		pthread_mutex_unlock(&s->lock);
		free(e);   /* another thread decoded it meanwhile */
		return;
	}
	while (s->bytes + len > s->max && s->lru.prev != &s->lru)
		evict_one(s);
	slot = slot_of(s, h);
	e->hnext = NULL;
	*slot = e;
	lru_push(s, e);
	s->bytes += len;
	pthread_mutex_unlock(&s->lock);
}
