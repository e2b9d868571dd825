/* Private to src/packstore: open pack descriptors, the chunk resolver and
 * the decoded-chunk cache's internals, shared by compaction, reading and
 * verify.  The records they look up are in store/chunk_table.h. */
#ifndef CKPTFS_PACKSTORE_INT_H
#define CKPTFS_PACKSTORE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#include "ckptfs/buf.h"
#include "ckptfs/chunk.h"
#include "ckptfs/error.h"
#include "ckptfs/packstore.h"
#include "ckptfs/pack_pool.h"
#include "store/chunk_table.h"

/* Open pack descriptors of a store, shared by threads, and a few raw
 * files that chains end in (a chunk read should not cost an open). */
#define CK_RAW_FDS 8

struct ck_pack_fds {
	pthread_mutex_t lock;
	int *fd;
	size_t n;
	/* Packs opened with POSIX_FADV_RANDOM (set before the first get):
	 * for readers of one file's chunks, whose records lie between other
	 * files' (a packed model.pt's chains run through the optimizer
	 * records of each checkpoint they pass), which the kernel's readahead
	 * would read too (docs/bench.md, eval_views). */
	int random;
	struct {
		uint64_t file_id;
		int fd;                 /* -1: free */
		unsigned users;         /* threads reading through it now */
		uint64_t used;          /* when last taken, for replacement */
	} raw[CK_RAW_FDS];
	uint64_t clock;
};
void ck_pack_fds_init(struct ck_pack_fds *f);
void ck_pack_fds_close(struct ck_pack_fds *f);
/* The descriptor of pack_id (opened on first use): >= 0 or -errno. */
int ck_pack_fds_get(struct ck_pack_fds *f, const char *store, uint32_t pack_id);
/* A descriptor of the raw file of a raw location (kept open for the next
 * chunks): >= 0 or -errno; give it back with ck_pack_fds_put_raw. */
int ck_pack_fds_get_raw(struct ck_pack_fds *f, const struct ck_chunk_loc *l);
void ck_pack_fds_put_raw(struct ck_pack_fds *f, int fd);

/* Decodes the chunk h (raw_len bytes) into out (CK_CHUNK_MAX bytes) by
 * following its chain in txn; cache (may be NULL) supplies decoded
 * references, and with keep_steps also receives the packed steps the chain
 * passes through (the same chunk of newer versions, which a reader going
 * through a series reads next).  Every step is hash-checked: -EIO with err
 * naming the chunk, pack or file, offset and the failing step.  *depth
 * (may be NULL) gets the number of deltas decoded.  0 or -errno. */
int ck_chunk_resolve(MDB_txn *txn, struct ck_store *st, struct ck_pack_fds *fds, struct ck_decoder *d,
		     struct ck_chunk_cache *cache, int keep_steps, struct ck_hash128 h, uint8_t *out,
		     uint32_t *len, unsigned *depth, struct ck_error *err);
/* Walks h's chain without decoding: its delta depth, and whether avoid
 * appears on it (a delta against h would close a cycle).  0 or -errno. */
int ck_chunk_depth(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, struct ck_hash128 avoid,
		   unsigned *depth, int *meets);

/* Cache internals used by the resolver: copies a cached chunk into out
 * (1) or reports a miss (0); inserts a decoded chunk. */
int ck_chunk_cache_copy(struct ck_chunk_cache *c, struct ck_hash128 h, uint8_t *out, uint32_t *len);
/* The same for bytes [off, off + n) of the chunk only (a read of part of
 * it): 1 when cached and that long, with *len its whole length. */
int ck_chunk_cache_read(struct ck_chunk_cache *c, struct ck_hash128 h, uint32_t off, uint32_t n, uint8_t *out,
			uint32_t *len);
void ck_chunk_cache_insert(struct ck_chunk_cache *c, struct ck_hash128 h, const uint8_t *p, uint32_t len);
int ck_chunk_cache_has(struct ck_chunk_cache *c, struct ck_hash128 h);
/* The bound c was made with, in bytes. */
uint64_t ck_chunk_cache_bound(const struct ck_chunk_cache *c);
/* Raises the cache's bound to max_bytes (never lowers it). */
void ck_chunk_cache_grow(struct ck_chunk_cache *c, uint64_t max_bytes);



#endif
