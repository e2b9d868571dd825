/* The numeric core of update norms (include/ckptfs/tensor_math.h): every float16 and bfloat16 code decodes to
 * the value the format defines, and update norms accumulate over
 * little-endian float32/float16/bfloat16/float64 buffers. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "ckptfs/tensor_math.h"
#include "testutil.h"

/* 2^e by repeated halving/doubling: independent of the bit tricks under test. */
static double pow2(int e)
{
	double v = 1;

	for (; e > 0; e--)
		v *= 2;
	for (; e < 0; e++)
		v /= 2;
	return v;
}

/* The binary16 value of h by its definition. */
static double f16_reference(uint16_t h)
{
	int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	double v;

	if (exp == 31)
		v = mant ? NAN : INFINITY;
	else if (exp == 0)
		v = mant / 1024.0 * pow2(-14);
	else
		v = (1 + mant / 1024.0) * pow2(exp - 15);
	return sign ? -v : v;
}

static double bf16_reference(uint16_t b)
{
	int sign = b >> 15, exp = (b >> 7) & 0xff, mant = b & 0x7f;
	double v;

	if (exp == 255)
		v = mant ? NAN : INFINITY;
	else if (exp == 0)
		v = mant / 128.0 * pow2(-126);
	else
		v = (1 + mant / 128.0) * pow2(exp - 127);
	return sign ? -v : v;
}

static int same(double got, double want)
{
	if (isnan(want))
		return isnan(got);
	return got == want && signbit(got) == signbit(want);
}

static void test_every_code(void)
{
	for (uint32_t c = 0; c <= 0xffff; c++) {
		double h = ck_f16_to_float((uint16_t)c), b = ck_bf16_to_float((uint16_t)c);

		CHECK(same(h, f16_reference((uint16_t)c)), "f16 0x%04x: %.17g, want %.17g", c, h,
		      f16_reference((uint16_t)c));
		CHECK(same(b, bf16_reference((uint16_t)c)), "bf16 0x%04x: %.17g, want %.17g", c, b,
		      bf16_reference((uint16_t)c));
	}
	CHECK(ck_f16_to_float(0x3c00) == 1.0f, "f16 1.0");
	CHECK(ck_f16_to_float(0xc000) == -2.0f, "f16 -2.0");
	CHECK(ck_f16_to_float(0x7bff) == 65504.0f, "f16 max");
	CHECK(ck_bf16_to_float(0x4049) == 3.140625f, "bf16 pi");
	CHECK(isinf(ck_bf16_to_float(0xff80)) && ck_bf16_to_float(0xff80) < 0, "bf16 -inf");
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

/* prev = {3, 4}, cur = {3, 0}: |cur - prev|^2 = 16, |prev|^2 = 25, |cur|^2 = 9. */
static void check_acc(const char *what, enum ck_dtype dt, const void *prev, const void *cur)
{
	struct ck_l2 acc = { 0 };

	ck_l2_add(&acc, dt, prev, cur, 2);
	CHECK(acc.diff2 == 16 && acc.prev2 == 25 && acc.cur2 == 9, "%s: diff2 %g prev2 %g cur2 %g", what, acc.diff2,
	      acc.prev2, acc.cur2);
	CHECK(acc.max_abs == 4, "%s: max_abs %g", what, acc.max_abs);
	CHECK(fabs(ck_l2_relative(&acc) - 0.8) < 1e-12, "%s: relative L2 %g", what, ck_l2_relative(&acc));
	memset(&acc, 0, sizeof(acc));
	ck_l2_add(&acc, dt, NULL, prev, 2);
	CHECK(acc.diff2 == 0 && acc.prev2 == 0 && acc.cur2 == 25, "%s without prev: cur2 %g", what, acc.cur2);
}

static void test_norms(void)
{
	unsigned char p16[4], c16[4], pb[4], cb[4], p32[8], c32[8], p64[16], c64[16];
	float f[2] = { 3, 4 }, g[2] = { 3, 0 };
	double d[2] = { 3, 4 }, e[2] = { 3, 0 };

	put16(p16, 0x4200);   /* 3.0 */
	put16(p16 + 2, 0x4400);   /* 4.0 */
	put16(c16, 0x4200);
	put16(c16 + 2, 0x0000);
	put16(pb, 0x4040);
	put16(pb + 2, 0x4080);
	put16(cb, 0x4040);
	put16(cb + 2, 0x8000);   /* -0.0 */
	/* The build machine is little-endian like the files; these test the decode, not the host. */
	memcpy(p32, f, sizeof(f));
	memcpy(c32, g, sizeof(g));
	memcpy(p64, d, sizeof(d));
	memcpy(c64, e, sizeof(e));
	check_acc("float16", CK_DT_F16, p16, c16);
	check_acc("bfloat16", CK_DT_BF16, pb, cb);
	check_acc("float32", CK_DT_F32, p32, c32);
	check_acc("float64", CK_DT_F64, p64, c64);
	CHECK(ck_dtype_is_measured(CK_DT_F32) && ck_dtype_is_measured(CK_DT_BF16) &&
	      ck_dtype_is_measured(CK_DT_F16) && ck_dtype_is_measured(CK_DT_F64), "float dtypes measured");
	CHECK(!ck_dtype_is_measured(CK_DT_I64) && !ck_dtype_is_measured(CK_DT_U8) &&
	      !ck_dtype_is_measured(CK_DT_F8_E4M3), "other dtypes skipped");
}

int main(void)
{
	test_every_code();
	test_norms();
	return test_result();
}
