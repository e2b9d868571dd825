/* Internals of the lossy codecs shared by the encoder and the decoder: the
 * payload header, the element conversions and the one reconstruction both
 * must compute identically (include/ckptfs/lossy.h, docs/format.md). */
#ifndef CKPTFS_PACK_LOSSY_INT_H
#define CKPTFS_PACK_LOSSY_INT_H

#include <stdint.h>
#include <string.h>
#include "chunk_int.h"
#include "ckptfs/lossy.h"

/* The payload's first byte. */
#define CK_LOSSY_DTYPE_MASK 0x03
#define CK_LOSSY_WIDE 0x04      /* codes are 2 bytes (else 1) */
#define CK_LOSSY_NONNEG 0x08    /* decoded elements are clamped at zero */
#define CK_LOSSY_RESERVED 0xf0

/* Fixed header bytes: the first byte and the step; QUANT adds its base. */
#define CK_LOSSY_HEAD 5
#define CK_LOSSY_HEAD_QUANT 9

/* Codes of 1 or 2 bytes: zigzag-coded integers (0, -1, 1, -2, ... as 0,
 * 1, 2, 3, ...), so the table has 256 or 65536 entries. */
#define CK_LOSSY_TABLE_MAX 65536

static inline uint32_t ck_lossy_zigzag(int32_t q)
{
	return ((uint32_t)q << 1) ^ (uint32_t)(q >> 31);
}

static inline int32_t ck_lossy_unzigzag(uint32_t z)
{
	return (int32_t)(z >> 1) ^ -(int32_t)(z & 1);
}

static inline float ck_f32_of_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t ck_bits_of_f32(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float ck_bf16_to_f32(uint16_t h)
{
	return ck_f32_of_bits((uint32_t)h << 16);
}

/* Round to nearest even; NaN stays NaN (made quiet). */
static inline uint16_t ck_f32_to_bf16(float f)
{
	uint32_t u = ck_bits_of_f32(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float ck_f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

	if (e == 0x1f)
		return ck_f32_of_bits(s | 0x7f800000u | m << 13);
	if (e)
		return ck_f32_of_bits(s | (e + 112) << 23 | m << 13);
	if (!m)
		return ck_f32_of_bits(s);
	/* subnormal: m * 2^-24, normalized */
	e = 113;
	while (!(m & 0x400u)) {
		m <<= 1;
		e--;
	}
	return ck_f32_of_bits(s | e << 23 | (m & 0x3ffu) << 13);
}

/* Round to nearest even, subnormals included; NaN stays NaN (quiet). */
static inline uint16_t ck_f32_to_f16(float f)
{
	uint32_t u = ck_bits_of_f32(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;

	if (a > 0x7f800000u)
		return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u)           /* 65520 and up round to infinity */
		return (uint16_t)(s | 0x7c00u);
	if (a >= 0x38800000u) {         /* 2^-14 and up: normal */
		uint32_t r = a - 0x38000000u;

		r += 0xfffu + ((r >> 13) & 1);
		return (uint16_t)(s | r >> 13);
	}
	if (a < 0x33000000u)            /* under 2^-25: zero (2^-25 itself ties to 0) */
		return (uint16_t)s;
	{
		uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
		uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);

		if (rem > mid || (rem == mid && (h & 1)))
			h++;
		return (uint16_t)(s | h);
	}
}

/* Element i of a chunk as binary32 (exact for all three dtypes). */
static inline float ck_lossy_load(const uint8_t *p, size_t i, enum ck_lossy_dtype dt)
{
	switch (dt) {
	case CK_LOSSY_BF16: return ck_bf16_to_f32(ck_le_load2(p + 2 * i));
	case CK_LOSSY_F16: return ck_f16_to_f32(ck_le_load2(p + 2 * i));
	default: return ck_f32_of_bits(ck_le_load4(p + 4 * i));
	}
}

/* v rounded to dt, stored as element i. */
static inline void ck_lossy_store(uint8_t *p, size_t i, enum ck_lossy_dtype dt, float v)
{
	switch (dt) {
	case CK_LOSSY_BF16: ck_le_store2(p + 2 * i, ck_f32_to_bf16(v)); break;
	case CK_LOSSY_F16: ck_le_store2(p + 2 * i, ck_f32_to_f16(v)); break;
	default: ck_le_store4(p + 4 * i, ck_bits_of_f32(v)); break;
	}
}

/* The table of a step: T[z] = unzigzag(z) * step for z < n, each one
 * binary32 product. */
void ck_lossy_table(float step, float *t, size_t n);
/* ctx->table for step with at least n entries, rebuilt only when either
 * changes (the chunks of one tensor share their step); NULL when out of
 * memory. */
const float *ck_lossy_table_for(struct ck_chunk_ctx *ctx, float step, size_t n);

/* The reconstruction, before rounding to the dtype: one binary32 addition
 * and, for non-negative chunks, the clamp (NaN passes). */
static inline float ck_lossy_recon(float base, float t, int nonneg)
{
	float v = base + t;

	return nonneg && v < 0.0f ? 0.0f : v;
}

/* Decodes a QUANT or QDELTA payload (desc checked by the caller: codec,
 * elem_size 2 or 4 matching the dtype, raw_len a multiple of it, compact)
 * into out, against ref (QDELTA; raw_len bytes, may be out).  No hash is
 * checked.  0, or -EINVAL with err for a malformed payload; -ENOMEM. */
int ck_lossy_decode(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
		    const uint8_t *ref, uint8_t *out, struct ck_error *err);

#endif
