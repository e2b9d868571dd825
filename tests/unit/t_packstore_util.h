/* What the packed store's tests share: reading every packed file of a
 * store back through ck_packed_pread and comparing it with its raw file,
 * and checking that no chunk's chain is longer than the anchor interval. */
#ifndef CKPTFS_T_PACKSTORE_UTIL_H
#define CKPTFS_T_PACKSTORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/packstore.h"

struct pk_readback {
	uint64_t files, packed, bytes;     /* files looked at, packed ones, bytes compared */
	unsigned max_depth;                /* the longest chain met */
	uint64_t failures;                 /* reads that failed or differed (printed) */
};

/* Every file of every checkpoint of st: packed ones read back in pieces of
 * seeded random sizes (and by 4 threads at once for the largest) must
 * equal their raw file; every chunk of every file map must be at most
 * anchor_k deltas deep.  cache may be NULL.  Returns 0, or -errno when
 * the store cannot be walked. */
int pk_readback(struct ck_store *st, struct ck_chunk_cache *cache, unsigned anchor_k, unsigned seed,
		struct pk_readback *out);

#endif
