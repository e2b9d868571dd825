/* The decoded-chunk caches (src/packstore/pack_cache.c): the readers' cache
 * is least recently used first out, a hit refreshing an entry; the
 * compaction's is first in, first out, a hit refreshing nothing and an
 * insert of what is there making it the newest, so that a bound of two
 * checkpoints holds exactly the last two inserted. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "packstore/packstore_int.h"
#include "testutil.h"

#define CHUNK (CK_CHUNK_MAX / 4)

static uint8_t data[4][CHUNK], out[CHUNK];

static struct ck_hash128 hash_of(int i)
{
	return (struct ck_hash128){ 0x1000u + (unsigned)i, 0 };   /* all in shard 0 */
}

static int has(struct ck_chunk_cache *c, int i)
{
	uint32_t len = 0;
	int hit = ck_chunk_cache_copy(c, hash_of(i), out, &len);

	return hit && len == CHUNK && memcmp(out, data[i], CHUNK) == 0;
}

/* Inserts 0 and 1 (the bound holds two), looks up 0, inserts 2: which of
 * 0 and 1 is left says which policy evicted. */
static void evict_after_lookup(struct ck_chunk_cache *c, int lru, const char *what)
{
	ck_chunk_cache_insert(c, hash_of(0), data[0], CHUNK);
	ck_chunk_cache_insert(c, hash_of(1), data[1], CHUNK);
	CHECK(has(c, 0) && has(c, 1), "%s: both cached", what);
	CHECK(has(c, 0), "%s: lookup", what);
	ck_chunk_cache_insert(c, hash_of(2), data[2], CHUNK);
	CHECK(has(c, 2), "%s: the newest cached", what);
	CHECK(lru ? has(c, 0) && !has(c, 1) : !ck_chunk_cache_has(c, hash_of(0)) && has(c, 1),
	      "%s: evicted %s", what, lru ? "the least recently used (1)" : "the first in (0)");
}

int main(void)
{
	struct ck_chunk_cache *lru, *fifo;

	for (int i = 0; i < 4; i++)
		for (unsigned j = 0; j < CHUNK; j++)
			data[i][j] = (uint8_t)((unsigned)i * 31 + j);
	/* 16 shards of two chunks each; hashes 0x100x all fall in shard 0 */
	SETUP(ck_chunk_cache_new(16u * 2 * CHUNK, &lru) == 0);
	SETUP(ck_chunk_cache_new_fifo(2u * CHUNK, &fifo) == 0);
	evict_after_lookup(lru, 1, "LRU cache");
	evict_after_lookup(fifo, 0, "FIFO cache");

	/* FIFO: inserting what is cached makes it the newest */
	ck_chunk_cache_insert(fifo, hash_of(1), data[1], CHUNK);   /* 2, then 1 */
	ck_chunk_cache_insert(fifo, hash_of(3), data[3], CHUNK);   /* evicts 2 */
	CHECK(has(fifo, 1) && has(fifo, 3) && !ck_chunk_cache_has(fifo, hash_of(2)),
	      "FIFO cache: a re-insert refreshes its entry");
	/* the bound grows, never shrinks */
	ck_chunk_cache_grow(fifo, 3u * CHUNK);
	ck_chunk_cache_insert(fifo, hash_of(0), data[0], CHUNK);
	CHECK(has(fifo, 0) && has(fifo, 1) && has(fifo, 3), "FIFO cache: grown to three");
	ck_chunk_cache_free(lru);
	ck_chunk_cache_free(fifo);
	return test_result();
}
