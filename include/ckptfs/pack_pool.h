/* Decoders and chunk buffers for reading packs (src/pack/pack_pool.c).
 *
 * A decoder is the scratch of one decoding thread: a chunk context and
 * CK_CHUNK_MAX-byte buffers.  A pool keeps idle decoders and buffers so
 * that readers of one open store reuse them: their pages are faulted in
 * once instead of once per file (docs/bench.md).
 *
 * Thread rules: a decoder is used by one thread at a time; a pool may be
 * used from any thread at once (one mutex, short sections). */
#ifndef CKPTFS_PACK_POOL_H
#define CKPTFS_PACK_POOL_H

#include <stdint.h>

struct ck_chunk_ctx;

struct ck_decoder {
	struct ck_chunk_ctx *ctx;
	uint8_t *payload;
	uint8_t *buf[2];            /* a chain's intermediate chunks */
	uint8_t *out;               /* a whole chunk for the caller */
};
/* 0 or -ENOMEM (nothing left allocated).  clear frees what init made. */
int ck_decoder_init(struct ck_decoder *d);
void ck_decoder_clear(struct ck_decoder *d);

struct ck_pack_pool;
/* 0 or -ENOMEM.  free (NULL is fine) frees everything idle in the pool;
 * objects taken and not given back are the taker's. */
int ck_pack_pool_new(struct ck_pack_pool **out);
void ck_pack_pool_free(struct ck_pack_pool *p);
/* take: an idle object or a new one, NULL when out of memory.  give: keeps
 * it for the next taker, or frees it when the pool is full (NULL is
 * ignored). */
struct ck_decoder *ck_pool_decoder_take(struct ck_pack_pool *p);
void ck_pool_decoder_give(struct ck_pack_pool *p, struct ck_decoder *d);
uint8_t *ck_pool_buffer_take(struct ck_pack_pool *p);
void ck_pool_buffer_give(struct ck_pack_pool *p, uint8_t *b);

#endif
