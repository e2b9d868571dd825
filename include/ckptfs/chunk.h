/* The chunk codec of the packed store.
 *
 * Committed tensor data is cut into chunks of at most CK_CHUNK_MAX bytes
 * (the last chunk of a tensor is shorter).  A chunk is encoded on its own,
 * or against a reference chunk: the same chunk index of the neighbouring
 * version of the same tensor.  The encoder chooses among the codecs allowed
 * by its options the one with the smallest payload (by an entropy estimate
 * or by trying each, see ck_chunk_opts), raw when nothing is smaller:
 *
 *   RAW     the bytes as they are;
 *   PLANES  byte planes (byte k of every element together), each plane
 *           zstd-compressed, stored, or (mostly zeros) split into a
 *           bitmap of its nonzero bytes and those bytes (both zstd),
 *           whichever is smaller (a sparse form that fits is kept
 *           without trying zstd unless it is under 1 % of the plane);
 *   ROT     the same over every element rotated left by one bit: a
 *           float's sign moves to the bottom, so its exponent fills the
 *           top byte whole and the next byte is mantissa only (two
 *           planes that compress better than one mixed one);
 *   XOR     the same over the XOR of the chunk with its reference;
 *   SUB     the same over the element-wise difference chunk - reference
 *           (little-endian unsigned integers of the element size, zigzag
 *           coded so that small changes either way give small numbers).
 *
 * Two more codecs are lossy (include/ckptfs/lossy.h): QUANT and QDELTA
 * code floating-point elements to within an error bound, self-contained
 * or as a residual against a reference.  ck_chunk_encode never picks them
 * (ck_lossy_encode does, on request); every decoder decodes them, and a
 * lossy record's hash is that of the bytes it decodes to, so everything
 * below holds for them as for the others.
 *
 * docs/format.md ("Pack files") gives the payload layout byte by byte.
 * Every chunk carries the XXH3-128 of its raw bytes (and a delta the hash of
 * its reference); decoding checks both and fails with -EIO, never returning
 * wrong bytes.
 *
 * Threads: a struct ck_chunk_ctx holds zstd contexts and scratch buffers and
 * is used by one thread at a time; use one per thread.  Nothing else is
 * shared: there is no global state.
 */
#ifndef CKPTFS_CHUNK_H
#define CKPTFS_CHUNK_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/error.h"

/* Largest chunk (raw bytes). */
#define CK_CHUNK_MAX (1u << 20)

enum ck_codec {
	CK_CODEC_RAW = 0,
	CK_CODEC_PLANES = 1,
	CK_CODEC_XOR = 2,
	CK_CODEC_SUB = 3,
	CK_CODEC_ROT = 4,
	CK_CODEC__LOSSLESS,   /* the codecs before it are lossless */
	CK_CODEC_QUANT = CK_CODEC__LOSSLESS,   /* lossy, self-contained (lossy.h) */
	CK_CODEC_QDELTA,      /* lossy, a residual against the reference (lossy.h) */
	CK_CODEC__COUNT
};

/* Bit masks for ck_chunk_opts.codecs (lossless codecs only). */
#define CK_CODEC_BIT(c) (1u << (c))
#define CK_CODECS_ALL ((1u << CK_CODEC__LOSSLESS) - 1)

/* XXH3-128 of a chunk: hi and lo as XXH128_hash_t's high64 and low64. */
struct ck_hash128 {
	uint64_t hi, lo;
};

static inline int ck_hash128_eq(struct ck_hash128 a, struct ck_hash128 b)
{
	return a.hi == b.hi && a.lo == b.lo;
}

struct ck_hash128 ck_chunk_hash(const void *p, size_t len);

/* Does a chunk encoded with this codec need its reference to decode? */
static inline int ck_codec_needs_ref(enum ck_codec c)
{
	return c == CK_CODEC_XOR || c == CK_CODEC_SUB || c == CK_CODEC_QDELTA;
}

/* Does a chunk encoded with this codec decode to other bytes than it was
 * given (include/ckptfs/lossy.h)? */
static inline int ck_codec_lossy(enum ck_codec c)
{
	return c == CK_CODEC_QUANT || c == CK_CODEC_QDELTA;
}

/* Name for logs and reports: "raw", "planes", "xor", "sub", "rot",
 * "quant", "qdelta" or "?". */
const char *ck_codec_name(enum ck_codec c);

struct ck_chunk_opts {
	int level;          /* zstd level; 0 means CK_CHUNK_DEFAULT_LEVEL */
	unsigned codecs;    /* CK_CODEC_BIT()s the encoder may use; 0 means the
	                     * default set. RAW is always allowed. */
	int exhaustive;     /* 0: pick the candidate with the smallest entropy
	                     * estimate (from sampled bytes) and compress only
	                     * that one; 1: compress every candidate and keep the
	                     * smallest (slower, at most a little smaller) */
};

/* zstd level 1, with the match finder tuned for byte planes (chunk_ctx.c):
 * higher levels compress byte planes little better, much slower. */
#define CK_CHUNK_DEFAULT_LEVEL 1
/* The default candidates: XOR is left out because SUB is at least as small
 * wherever a delta pays, so trying it only costs time; ROT is what fp32 and
 * bf16 anchors pick (docs/bench.md, "compress.sh and pack_ratio"). */
#define CK_CODECS_DEFAULT (CK_CODEC_BIT(CK_CODEC_RAW) | CK_CODEC_BIT(CK_CODEC_PLANES) | \
			   CK_CODEC_BIT(CK_CODEC_SUB) | CK_CODEC_BIT(CK_CODEC_ROT))

/* What describes an encoded chunk besides its payload: the fields of a pack
 * record's header. */
struct ck_chunk_desc {
	enum ck_codec codec;
	unsigned elem_size;         /* 1, 2, 4 or 8 */
	uint32_t raw_len;           /* 0 .. CK_CHUNK_MAX */
	uint32_t enc_len;           /* payload bytes; never more than raw_len */
	struct ck_hash128 raw_hash;
	struct ck_hash128 ref_hash; /* deltas: the reference's hash; else zero */
	int compact;                /* payload layout: 1 compact (what the encoder
	                             * writes, pack version 3: narrow plane
	                             * directory, zstd frames without magic or
	                             * content size), 0 framed (versions 1 and 2) */
};

struct ck_chunk_ctx;

/* A context for one thread.  opts may be NULL (defaults).  Returns 0,
 * -EINVAL (bad level or codec bits) or -ENOMEM. */
int ck_chunk_ctx_new(const struct ck_chunk_opts *opts, struct ck_chunk_ctx **out);
void ck_chunk_ctx_free(struct ck_chunk_ctx *ctx);

/* Encodes len bytes (len <= CK_CHUNK_MAX) of elements of elem_size bytes
 * (1, 2, 4 or 8; len need not be a multiple: the odd tail bytes are kept
 * as they are, or XORed with the reference's).  ref may be NULL; a
 * reference of another length than len is not used.  Fills desc and points
 * *payload at desc->enc_len bytes inside ctx, valid until the next call on
 * ctx (or at raw itself for a RAW chunk).  Returns 0, or -EINVAL (len or
 * elem_size out of range). */
int ck_chunk_encode(struct ck_chunk_ctx *ctx, const void *raw, size_t len, unsigned elem_size,
		    const void *ref, size_t ref_len, struct ck_chunk_desc *desc,
		    const uint8_t **payload);

/* Encodes with exactly one lossless codec (for tests and measurements).
 * Fails with -EINVAL for a lossy codec, or when the codec needs a
 * reference and none of length len is given,
 * and with -E2BIG when its payload would not be smaller than len (that
 * codec cannot be used for this chunk). */
int ck_chunk_encode_as(struct ck_chunk_ctx *ctx, enum ck_codec codec, const void *raw, size_t len,
		       unsigned elem_size, const void *ref, size_t ref_len,
		       struct ck_chunk_desc *desc, const uint8_t **payload);

/* Decodes desc->enc_len payload bytes into out (desc->raw_len bytes).  A
 * delta needs ref (ref_len == raw_len, hashing to desc->ref_hash).  Returns
 * 0; -EINVAL with err for a malformed descriptor or payload (unknown
 * codec, bad lengths, corrupt zstd frame, missing reference); -EIO with err
 * when the reference or the decoded bytes do not hash as recorded.  out may
 * be ref: a chain of deltas decodes in place.  On failure out holds no
 * usable bytes. */
int ck_chunk_decode(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *desc,
		    const uint8_t *payload, const void *ref, size_t ref_len, void *out,
		    struct ck_error *err);
/* As ck_chunk_decode, for a reference whose bytes are known to hash to
 * ref_hash (the previous step of a chain, checked as it was decoded, or a
 * cached chunk): the delta's recorded reference hash is compared with
 * ref_hash instead of hashing the reference again.  The decoded bytes are
 * always hashed and checked. */
int ck_chunk_decode_known_ref(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *desc,
			      const uint8_t *payload, const void *ref, size_t ref_len,
			      struct ck_hash128 ref_hash, void *out, struct ck_error *err);

/* A chain decoded in one pass: no hash is checked, the caller hashes the
 * result (and decodes step by step with the checked calls above when it
 * does not match, to say which step is damaged).  A RAW, PLANES, ROT or
 * QUANT chunk is decoded into out (ref is not used); an XOR, SUB or QDELTA
 * delta is applied to ref (desc->raw_len bytes of its reference) into out, which may be ref:
 * the rest of a chain decodes in place.  Returns 0, or -EINVAL with err
 * for a malformed descriptor or payload or a delta without ref; on
 * failure out holds no usable bytes. */
int ck_chunk_decode_unchecked(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *desc,
			      const uint8_t *payload, const void *ref, void *out, struct ck_error *err);

/* Byte planes, exposed for benchmarks: planes[k * n + i] = src[i * size + k]
 * for n = len / size elements; the len % size tail bytes are not touched. */
void ck_planes_split(const uint8_t *src, size_t len, unsigned size, uint8_t *planes);
void ck_planes_join(const uint8_t *planes, size_t len, unsigned size, uint8_t *dst);

#endif
