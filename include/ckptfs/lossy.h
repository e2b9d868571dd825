/* The lossy chunk codecs: floating-point tensor chunks coded to within an
 * error bound (docs/format.md, "Lossy records"; docs/design.md, "The lossy
 * tier").
 *
 * A chunk of float32, bfloat16 or float16 elements x[i] is coded as small
 * integers q[i] such that the decoded element is
 *
 *     y[i] = round(b[i] + T[q[i]])      T[q] = q * step, in binary32
 *
 * (y[i] = b[i] bit for bit where q[i] is 0: most residuals are, and a
 * decoder of a sparse plane of codes touches only the others), where
 * b[i] is the reference chunk's element (QDELTA: a residual against
 * the reference as it decodes, so that errors never add up along a chain)
 * or one constant (QUANT: self-contained), the sum is one binary32
 * addition (round to nearest even, subnormals kept) and round() is the
 * rounding to the chunk's dtype (none for float32).  T is a table the
 * decoder builds, so no compiler can fuse the product into the addition:
 * every decoder on every machine rebuilds the same bytes, and the record's
 * XXH3-128 is that of those bytes.
 *
 * The encoder picks each q[i] so that |y[i] - x[i]| <= bound, with a step
 * just under 2 * bound (a uniform quantizer: under a maximum-error bound
 * no other quantizer needs fewer levels); elements it cannot code so
 * (NaN, infinities, codes out of range, rounding to the dtype that
 * overshoots) are stored exactly ("escapes").  In a chunk with no negative
 * element no decoded element is negative either: the decoder clamps at
 * zero, and a self-contained chunk's levels are offset by the bound so
 * that small elements decode to the bound, not to zero (Adam's second
 * moment divides by their square root).  The codes are coded as byte
 * planes (chunk.h's PLANES payload: zstd, sparse, runs or stored).
 *
 * ck_lossy_encode decodes what it encoded with the decoder that serves it
 * and checks every element against the original before it returns, so a
 * record it hands out is within its bound.
 *
 * Threads: as chunk.h (one struct ck_chunk_ctx per thread).
 */
#ifndef CKPTFS_LOSSY_H
#define CKPTFS_LOSSY_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/chunk.h"
#include "ckptfs/dtype.h"

/* How a lossy file was coded, as file maps record it: this codec, each
 * tensor within a bound relative to its largest |x|. */
#define CK_LOSSY_METHOD 1
/* "qres-linf" for CK_LOSSY_METHOD, else "?". */
const char *ck_lossy_method_name(unsigned method);

/* The element types coded lossily; the value is the payload's dtype field. */
enum ck_lossy_dtype {
	CK_LOSSY_F32 = 0,
	CK_LOSSY_BF16 = 1,
	CK_LOSSY_F16 = 2,
};

/* The lossy dtype of a tensor dtype: 0 and *out, or -EINVAL for a dtype
 * that stays exact (integers, bool, float64, float8, complex, ...). */
int ck_lossy_dtype_of(enum ck_dtype dt, enum ck_lossy_dtype *out);
/* Bytes per element: 4 or 2. */
unsigned ck_lossy_dtype_size(enum ck_lossy_dtype dt);

/* The largest |x| over the finite elements of len bytes (len / size
 * elements); 0 when there is none. */
double ck_lossy_maxabs(const void *p, size_t len, enum ck_lossy_dtype dt);
/* The largest |a[i] - b[i]| over elements finite in both (len bytes
 * each); elements that are not finite in a must be bit-identical in b,
 * else the result is INFINITY. */
double ck_lossy_maxerr(const void *a, const void *b, size_t len, enum ck_lossy_dtype dt);

/* What one encoding achieved. */
struct ck_lossy_result {
	double max_err;        /* largest |decoded - original| (finite elements) */
	uint32_t escapes;      /* elements stored exactly */
	unsigned code_bytes;   /* 1 or 2 bytes per code */
	int delta;             /* 1: coded against the reference (QDELTA) */
};

/* Encodes len bytes (a whole number of elements of dt, at most
 * CK_CHUNK_MAX) to within bound (> 0, an absolute error) as a QUANT
 * record, or as a QDELTA record against ref (ref_len == len bytes of the
 * same dtype, e.g. the decoded previous version of the chunk; NULL for
 * none) when that is estimated smaller.  Fills desc (raw_hash: the hash of
 * the decoded bytes; codec QUANT or QDELTA; elem_size the dtype's size;
 * compact) and points *payload at desc->enc_len bytes inside ctx, valid
 * until the next call on ctx; copies the decoded bytes to decoded (len
 * bytes; may not be raw or ref).  res may be NULL.
 * Returns 0; -E2BIG when a lossy record would not pay (as large as the
 * chunk, or more than a sixteenth of its elements escaped: code it
 * exactly); -EINVAL for bad arguments; -ENOMEM; -EIO when decoding the
 * result did not give bytes within the bound (a bug: nothing is returned). */
int ck_lossy_encode(struct ck_chunk_ctx *ctx, const void *raw, size_t len, enum ck_lossy_dtype dt,
		    double bound, const void *ref, size_t ref_len, void *decoded, struct ck_chunk_desc *desc,
		    const uint8_t **payload, struct ck_lossy_result *res);

#endif
