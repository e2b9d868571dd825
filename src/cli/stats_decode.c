/* Decoding of the floating-point tensor formats ckptctl stats measures. */
#include "config.h"

#include <string.h>

#include "ckptfs/buf.h"
#include "stats.h"

float stats_f16_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
	float v;

	if (exp == 0) {
		/* Zero and subnormals: mant * 2^-24, exact in a float. */
		v = (float)mant * 5.9604644775390625e-8f;
		return sign ? -v : v;
	}
	if (exp == 31)
		u = sign | 0x7f800000u | mant << 13;          /* infinities and NaNs */
	else
		u = sign | (exp + 112) << 23 | mant << 13;    /* rebias 15 -> 127 */
	memcpy(&v, &u, sizeof(v));
	return v;
}

float stats_bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

int stats_dtype_is_measured(enum ck_dtype dt)
{
	return dt == CK_DT_F32 || dt == CK_DT_F16 || dt == CK_DT_BF16 || dt == CK_DT_F64;
}

/* Element i of a little-endian buffer as a double. */
static double element(enum ck_dtype dt, const unsigned char *p, size_t i)
{
	switch (dt) {
	case CK_DT_F32: {
		uint32_t u = ck_le32(p + i * 4);
		float f;

		memcpy(&f, &u, sizeof(f));
		return f;
	}
	case CK_DT_F64: {
		uint64_t u = ck_le64(p + i * 8);
		double d;

		memcpy(&d, &u, sizeof(d));
		return d;
	}
	case CK_DT_F16:
		return stats_f16_to_float(ck_le16(p + i * 2));
	case CK_DT_BF16:
		return stats_bf16_to_float(ck_le16(p + i * 2));
	default:
		return 0;
	}
}

void stats_l2_add(struct stats_l2 *acc, enum ck_dtype dt, const void *prev, const void *cur, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double c = element(dt, cur, i);

		acc->cur2 += c * c;
		if (prev) {
			double p = element(dt, prev, i);

			acc->prev2 += p * p;
			acc->diff2 += (c - p) * (c - p);
		}
	}
}
