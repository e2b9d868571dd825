/* Internals of the chunk codec shared by its source files. */
#ifndef CKPTFS_PACK_CHUNK_INT_H
#define CKPTFS_PACK_CHUNK_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* ZSTD_c_format / ZSTD_d_format (magicless frames): in zstd since 1.3.4,
 * still in its experimental section. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include "ckptfs/chunk.h"

/* Elements are little-endian integers: ck_le_load<W> and ck_le_store<W>
 * for W-byte elements.  On little-endian machines they are memcpy, which
 * vectorizes; elsewhere byte by byte, so that the format is the same
 * everywhere. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CK_LE_IO(W, T)                                                         \
static inline T ck_le_load##W(const uint8_t *p) { T v; memcpy(&v, p, sizeof(v)); return v; } \
static inline void ck_le_store##W(uint8_t *p, T v) { memcpy(p, &v, sizeof(v)); }
#else
#define CK_LE_IO(W, T)                                                         \
static inline T ck_le_load##W(const uint8_t *p)                                \
{                                                                              \
	T v = 0;                                                               \
	for (unsigned b = 0; b < W; b++)                                       \
		v |= (T)((T)p[b] << (8 * b));                                  \
	return v;                                                              \
}                                                                              \
static inline void ck_le_store##W(uint8_t *p, T v)                             \
{                                                                              \
	for (unsigned b = 0; b < W; b++)                                       \
		p[b] = (uint8_t)(v >> (8 * b));                                \
}
#endif

CK_LE_IO(1, uint8_t) CK_LE_IO(2, uint16_t) CK_LE_IO(4, uint32_t) CK_LE_IO(8, uint64_t)
#undef CK_LE_IO

/* The element-wise transforms, one W-byte element at a time, shared by the
 * codec's loops (chunk_planes.c) and the estimator, which must see what
 * the encoder would code.  SUB: d = cur - ref (mod 2^bits), zigzag coded
 * so that -1 is 1, not all ones: (d << 1) ^ (sign of d repeated); ROT: x
 * rotated left by one bit. */
#define CK_ELEM_OPS(W, T)                                                      \
static inline T ck_zigzag_sub##W(T cur, T ref)                                 \
{                                                                              \
	T d = (T)(cur - ref);                                                  \
                                                                               \
	return (T)((T)(d << 1) ^ (T)(0 - (d >> (8 * W - 1))));                 \
}                                                                              \
static inline T ck_rotl##W(T x) { return (T)((T)(x << 1) | (T)(x >> (8 * W - 1))); }

CK_ELEM_OPS(1, uint8_t) CK_ELEM_OPS(2, uint16_t) CK_ELEM_OPS(4, uint32_t) CK_ELEM_OPS(8, uint64_t)
#undef CK_ELEM_OPS

/* A PLANES/XOR/SUB/ROT payload: one directory entry per plane (its mode
 * and length), the planes' bytes in order, then the raw_len % elem_size
 * tail bytes (XORed with the reference's for deltas).  A sparse plane is a
 * length b, b bytes of zstd that give the bitmap of its nonzero bytes (bit
 * i % 8 of byte i / 8 for byte i), then zstd of those bytes in order:
 * zstd's Huffman stage codes a byte in no less than a bit, and most bytes
 * of a delta's top plane are zero.
 *
 * Two layouts (struct ck_chunk_desc.compact).  Framed (pack versions 1
 * and 2): a directory entry is a mode byte and a u32 length, a sparse
 * plane's b a u32, zstd frames are standard ones.  Compact (version 3,
 * what the encoder writes): a directory entry is one little-endian integer
 * (length << 2 | mode) of ck_dirent_width(n) bytes for planes of n bytes,
 * b is an integer of that width too, and zstd frames have neither magic
 * number nor content size (the decoder knows both). */
#define CK_PLANE_STORED 0
#define CK_PLANE_ZSTD 1
#define CK_PLANE_SPARSE 2
#define CK_PLANE_RUNS 3         /* compact payloads only (chunk_runs.c) */
#define CK_PLANE_DIRENT 5       /* framed directory entry */
#define CK_PLANES_OVERHEAD (8 * CK_PLANE_DIRENT + 8)

/* Bytes of a compact directory entry for planes of n bytes: enough for
 * (n << 2) | 3, so 3 for the planes of any 1 MiB chunk. */
static inline unsigned ck_dirent_width(size_t n)
{
	unsigned w = 1;

	while (w < 8 && ((uint64_t)n << 2 | 3) >> (8 * w))
		w++;
	return w;
}

/* Width of a directory entry, and of a sparse plane's b, in a layout. */
static inline unsigned ck_dirent_bytes(int compact, size_t n)
{
	return compact ? ck_dirent_width(n) : CK_PLANE_DIRENT;
}

static inline uint64_t ck_le_get(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < w; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline void ck_le_put(uint8_t *p, unsigned w, uint64_t v)
{
	for (unsigned i = 0; i < w; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct ck_chunk_ctx {
	int level;
	unsigned codecs;
	ZSTD_CCtx *cctx;        /* byte streams (element size 1): zstd at level */
	ZSTD_CCtx *plane_cctx;  /* planes of wider elements: see chunk_ctx.c */
	ZSTD_DCtx *dctx;        /* framed payloads: standard zstd frames */
	ZSTD_DCtx *dctx_bare;   /* compact payloads: magicless frames */
	uint8_t *delta;     /* CK_CHUNK_MAX: XOR or SUB of chunk and reference */
	uint8_t *planes;    /* CK_CHUNK_MAX: byte planes */
	uint8_t *bitmap;    /* CK_SPARSE_SCRATCH: a sparse plane's bitmap, then its values */
	uint8_t *sparse;    /* CK_CHUNK_MAX: a sparse plane's encoding, while it is tried */
	uint8_t *out[2];    /* CK_CHUNK_MAX + CK_PLANES_OVERHEAD: best and candidate payloads */
	int best;           /* which out[] holds the payload last returned */
	int exhaustive;     /* compress every candidate instead of estimating */
	/* lossy codecs (lossy_*.c), allocated on first use */
	float *table;       /* CK_LOSSY_TABLE_MAX reconstruction offsets */
	float table_step;   /* the step table[] was built for ... */
	size_t table_n;     /* ... and how many entries (0: none yet) */
	uint32_t *values;   /* CK_LOSSY_TABLE_MAX: a self-contained chunk's decoded elements by code */
	uint32_t *esc;      /* the encoder's escaped elements */
};

/* A sparse plane of up to CK_CHUNK_MAX bytes: its bitmap, then its
 * nonzero bytes, then slack for ck_sparse_expand's reads. */
#define CK_SPARSE_BITMAP (CK_CHUNK_MAX / 8)
#define CK_SPARSE_SCRATCH (CK_SPARSE_BITMAP + CK_CHUNK_MAX + 16)

/* Bitmap of the n bytes of plane into bitmap (n / 8 rounded up bytes, the
 * bits past n clear) and its nonzero bytes into vals (which may be written
 * up to 7 bytes past the last one); returns their count. */
size_t ck_sparse_split(const uint8_t *plane, size_t n, uint8_t *bitmap, uint8_t *vals);
/* The inverse: n bytes into out from bitmap and the nonzero bytes vals
 * (which may be read up to 8 bytes past the last one). */
void ck_sparse_expand(const uint8_t *bitmap, const uint8_t *vals, size_t n, uint8_t *out);
/* The bitmap ((n + 7) / 8 bytes) and the nonzero bytes of a sparse plane
 * of n bytes whose data is the len bytes at p (plane k, for messages),
 * decoded into ctx->bitmap: 0, or -EINVAL with err.  The values may be
 * read up to 8 bytes past the last one. */
int ck_sparse_parts(struct ck_chunk_ctx *ctx, int compact, unsigned k, const uint8_t *p, uint32_t len, size_t n,
		    const uint8_t **bitmap, const uint8_t **vals, struct ck_error *err);
/* Bits set in the n / 8 rounded up bytes of bitmap. */
size_t ck_sparse_count(const uint8_t *bitmap, size_t n);

/* Runs form of the n bytes of plane into out, its length in *len (0 for
 * a plane of zeros): 0, or -1 when it would not be shorter than limit. */
int ck_runs_encode(const uint8_t *plane, size_t n, uint8_t *out, size_t limit, size_t *len);
/* The inverse, len bytes of runs into plane (n bytes): 0, or -1 when they
 * are malformed or do not fit in n bytes. */
int ck_runs_decode(const uint8_t *p, size_t len, uint8_t *plane, size_t n);

void ck_xor_bytes(const uint8_t *a, const uint8_t *b, size_t len, uint8_t *out);
/* SUB transform and its inverse over len bytes of size-byte elements; the
 * len % size tail is XORed. */
void ck_sub_elems(const uint8_t *cur, const uint8_t *ref, size_t len, unsigned size, uint8_t *out);
void ck_add_elems(const uint8_t *zz, const uint8_t *ref, size_t len, unsigned size, uint8_t *out);
/* ROT's transform (right 0) and its inverse (right 1): every size-byte
 * element rotated left (right) by one bit; the len % size tail is copied. */
void ck_rot_elems(const uint8_t *src, size_t len, unsigned size, int right, uint8_t *out);

/* What ck_planes_apply does with the elements joined from the planes. */
enum ck_planes_op {
	CK_PLANES_SET,   /* out = element */
	CK_PLANES_XOR,   /* out = ref ^ element */
	CK_PLANES_ADD,   /* out = ref + zigzag-decoded element (SUB's inverse) */
	CK_PLANES_ROTR   /* out = element rotated right by one bit (ROT's inverse) */
};

/* Joins n elements of size bytes from planes[0..size) (plane k: byte k of
 * every element, each plane its own pointer) and writes to out the n
 * elements of ref combined with them by op (ref is not read for SET; it
 * may be out), a block at a time: a delta lands on its reference in one
 * pass, without a chunk-sized intermediate or a copy of the reference. */
void ck_planes_apply(const uint8_t *const *planes, size_t n, unsigned size, enum ck_planes_op op,
		     const uint8_t *ref, uint8_t *out);

/* One plane of n bytes into dst as the smallest of its modes (stored,
 * zstd with cctx, sparse, runs), its compact directory entry at ent: the
 * plane's length in dst.  dst needs room for n bytes. */
size_t ck_plane_encode(struct ck_chunk_ctx *ctx, ZSTD_CCtx *cctx, const uint8_t *plane, size_t n, uint8_t *ent,
		       uint8_t *dst);
/* Points planes[k] at plane k (n bytes) of the size planes that start at
 * payload[0] (their directory) and end at or before payload[len]: a
 * stored plane where it lies, the others decoded into ctx->planes + k * n
 * (size * n <= CK_CHUNK_MAX).  *end is where the planes end.  0, or
 * -EINVAL with err. */
int ck_planes_decode(struct ck_chunk_ctx *ctx, int compact, const uint8_t *payload, size_t len, size_t n,
		     unsigned size, const uint8_t *planes[8], size_t *end, struct ck_error *err);

/* Estimated payload bytes of the PLANES/XOR/SUB/ROT encodings named in
 * codecs (CK_CODEC_BIT()s; ref is needed for XOR and SUB) from the order-0
 * entropy of sampled byte planes, into est[codec]; one pass over the
 * samples for all of them. */
void ck_chunk_estimate(unsigned codecs, const uint8_t *raw, const uint8_t *ref, size_t len, unsigned es,
		       size_t est[CK_CODEC__COUNT]);

#endif
