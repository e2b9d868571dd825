/* The lossy codecs: every element of every dtype decodes within the bound
 * of its own original, self-contained or along a chain of residuals;
 * non-finite elements come back bit for bit, non-negative chunks stay
 * non-negative; the dtype conversions round as torch does; damaged
 * payloads fail, never decode to other bytes than the hash says. */
#include "config.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/lossy.h"
#include "pack/lossy_int.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Roughly normal, with an outlier now and then. */
static double gauss(void)
{
	double s = 0;

	for (int i = 0; i < 4; i++)
		s += (double)(next() >> 11) / 9007199254740992.0;
	s = (s - 2.0) * 1.732;
	return next() % 1000 == 0 ? s * 30 : s;
}

static void put(uint8_t *p, size_t i, enum ck_lossy_dtype dt, double v)
{
	ck_lossy_store(p, i, dt, (float)v);
}

static struct ck_chunk_ctx *ctx;

/* Encodes and decodes cur (against ref, if any) and checks everything the
 * header promises; returns the decoded bytes' hash in *h. */
static void roundtrip(const char *what, const uint8_t *cur, const uint8_t *ref, size_t len, enum ck_lossy_dtype dt,
		      double rel, uint8_t *dec)
{
	unsigned es = ck_lossy_dtype_size(dt);
	double bound = rel * ck_lossy_maxabs(cur, len, dt);
	struct ck_chunk_desc d;
	struct ck_lossy_result r;
	struct ck_error err = { "" };
	const uint8_t *payload;
	uint8_t *out = malloc(len), *bad = malloc(CK_CHUNK_MAX);
	int rc = ck_lossy_encode(ctx, cur, len, dt, bound, ref, ref ? len : 0, dec, &d, &payload, &r);

	SETUP(out && bad);
	if (rc == -E2BIG) {
		memcpy(dec, cur, len);
		free(out);
		free(bad);
		return;
	}
	CHECK(rc == 0, "%s: encode: %d", what, rc);
	if (rc) {
		memcpy(dec, cur, len);
		free(out);
		free(bad);
		return;
	}
	CHECK(ck_codec_lossy(d.codec) && d.elem_size == es && d.raw_len == len && d.enc_len < len,
	      "%s: descriptor", what);
	CHECK(ck_hash128_eq(d.raw_hash, ck_chunk_hash(dec, len)), "%s: hash is not the decoded bytes'", what);
	CHECK(r.max_err <= bound, "%s: max error %g over %g", what, r.max_err, bound);
	CHECK(ck_chunk_decode(ctx, &d, payload, ref, ref ? len : 0, out, &err) == 0, "%s: decode: %s", what, err.msg);
	CHECK(memcmp(out, dec, len) == 0, "%s: decoder and encoder disagree", what);
	CHECK(ck_lossy_maxerr(cur, out, len, dt) <= bound, "%s: decoded past the bound", what);
	for (size_t i = 0; i < len / es; i++) {
		float x = ck_lossy_load(cur, i, dt), y = ck_lossy_load(out, i, dt);

		if (!isfinite(x))
			CHECK(memcmp(cur + i * es, out + i * es, es) == 0, "%s: element %zu not finite, changed", what, i);
		else
			CHECK(fabs((double)y - x) <= bound, "%s: element %zu: %g for %g (bound %g)", what, i, y, x,
			      bound);
	}
	/* Decoded in place on the reference, as a chain is. */
	if (ref) {
		memcpy(out, ref, len);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, payload, out, out, &err) == 0 && memcmp(out, dec, len) == 0,
		      "%s: in-place decode", what);
	}
	/* Damage: a flipped bit anywhere never gives other bytes than these. */
	for (int k = 0; k < 64; k++) {
		size_t at = next() % d.enc_len;

		memcpy(bad, payload, d.enc_len);
		bad[at] ^= (uint8_t)(1u << (next() % 8));
		rc = ck_chunk_decode(ctx, &d, bad, ref, ref ? len : 0, out, &err);
		CHECK(rc == 0 ? memcmp(out, dec, len) == 0 : rc == -EINVAL || rc == -EIO,
		      "%s: flipped bit at %zu: rc %d", what, at, rc);
	}
	free(out);
	free(bad);
}

static void fill(uint8_t *p, size_t n, enum ck_lossy_dtype dt, double scale, int nonneg)
{
	for (size_t i = 0; i < n; i++) {
		double v = gauss() * scale;

		put(p, i, dt, nonneg ? v * v : v);
	}
}

/* A chain of versions, each a residual on the previous decoded one: every
 * version within its own bound, however long the chain. */
static void chain(enum ck_lossy_dtype dt, int nonneg, double rel)
{
	unsigned es = ck_lossy_dtype_size(dt);
	size_t n = CK_CHUNK_MAX / es, len = n * es;
	uint8_t *cur = malloc(len), *dec = malloc(len), *prev = malloc(len);
	char what[96];

	SETUP(cur && dec && prev);
	fill(cur, n, dt, 0.02, nonneg);
	snprintf(what, sizeof(what), "dtype %d nonneg %d rel %g version 0", dt, nonneg, rel);
	roundtrip(what, cur, NULL, len, dt, rel, prev);
	for (int v = 1; v <= 12; v++) {
		for (size_t i = 0; i < n; i++) {
			double x = ck_lossy_load(cur, i, dt), u = gauss() * 0.0005;

			put(cur, i, dt, nonneg ? fabs(x * 0.999 + u * u) : x + u);
		}
		snprintf(what, sizeof(what), "dtype %d nonneg %d rel %g version %d", dt, nonneg, rel, v);
		roundtrip(what, cur, prev, len, dt, rel, dec);
		CHECK(ck_lossy_maxerr(cur, dec, len, dt) <= rel * ck_lossy_maxabs(cur, len, dt), "%s: against its original",
		      what);
		if (nonneg)
			for (size_t i = 0; i < n; i++)
				CHECK(!(ck_lossy_load(dec, i, dt) < 0), "%s: element %zu negative", what, i);
		memcpy(prev, dec, len);
	}
	free(cur);
	free(dec);
	free(prev);
}

static void special_values(void)
{
	enum ck_lossy_dtype dts[] = { CK_LOSSY_F32, CK_LOSSY_BF16, CK_LOSSY_F16 };

	for (size_t k = 0; k < 3; k++) {
		enum ck_lossy_dtype dt = dts[k];
		unsigned es = ck_lossy_dtype_size(dt);
		size_t n = 50000, len = n * es;
		uint8_t *cur = malloc(len), *dec = malloc(len);
		char what[64];

		SETUP(cur && dec);
		fill(cur, n, dt, 1.0, 0);
		put(cur, 7, dt, NAN);
		put(cur, 8, dt, INFINITY);
		put(cur, 9, dt, -INFINITY);
		put(cur, 10, dt, -0.0);
		put(cur, n - 1, dt, NAN);
		snprintf(what, sizeof(what), "dtype %d with NaN and infinities", dt);
		roundtrip(what, cur, NULL, len, dt, 0.01, dec);
		/* a short odd-sized chunk, the end of a tensor */
		snprintf(what, sizeof(what), "dtype %d, 3 elements", dt);
		roundtrip(what, cur + 100 * es, NULL, 3 * es, dt, 0.3, dec);
		free(cur);
		free(dec);
	}
}

/* ck_lossy_maxabs and ck_lossy_maxerr (four elements at a time where the
 * machine has SSE2) against the definition, element by element: every
 * length up to past two vectors' worth, so every tail is met, with
 * infinities, NaNs, subnormals and -0 scattered in. */
static void extremes(void)
{
	enum ck_lossy_dtype dts[] = { CK_LOSSY_F32, CK_LOSSY_BF16, CK_LOSSY_F16 };
	const float odd[] = { NAN, INFINITY, -INFINITY, 1e-40f, -0.0f, 3e38f, -3e38f };

	for (size_t k = 0; k < 3; k++) {
		enum ck_lossy_dtype dt = dts[k];
		uint8_t a[68 * 4], b[68 * 4];

		for (int trial = 0; trial < 400; trial++) {
			size_t n = (size_t)trial % 68;
			double want_abs = 0, want_err = 0;

			for (size_t i = 0; i < n; i++) {
				double x = gauss();

				put(a, i, dt, next() % 5 == 0 ? odd[next() % 7] : x);
				put(b, i, dt, next() % 3 == 0 ? ck_lossy_load(a, i, dt) :
					      next() % 6 == 0 ? odd[next() % 7] : x + gauss() * 0.01);
			}
			for (size_t i = 0; i < n; i++) {
				float x = ck_lossy_load(a, i, dt), y = ck_lossy_load(b, i, dt);

				if (isfinite(x) && fabsf(x) > want_abs)
					want_abs = fabsf(x);
				if (!isfinite(x) || !isfinite(y)) {
					if (memcmp(a + i * ck_lossy_dtype_size(dt), b + i * ck_lossy_dtype_size(dt),
						   ck_lossy_dtype_size(dt)) != 0)
						want_err = INFINITY;
				} else if (want_err < INFINITY && fabs((double)y - (double)x) > want_err) {
					want_err = fabs((double)y - (double)x);
				}
			}
			CHECK(ck_lossy_maxabs(a, n * ck_lossy_dtype_size(dt), dt) == want_abs,
			      "dtype %d, %zu elements: max |x| %g, want %g", dt, n,
			      ck_lossy_maxabs(a, n * ck_lossy_dtype_size(dt), dt), want_abs);
			CHECK(ck_lossy_maxerr(a, b, n * ck_lossy_dtype_size(dt), dt) == want_err,
			      "dtype %d, %zu elements: max error %g, want %g", dt, n,
			      ck_lossy_maxerr(a, b, n * ck_lossy_dtype_size(dt), dt), want_err);
		}
	}
}

/* Arguments the encoder refuses, and bounds too tight to pay. */
static void refusals(void)
{
	uint8_t cur[4096], dec[4096];
	struct ck_chunk_desc d;
	const uint8_t *p;

	fill(cur, 1024, CK_LOSSY_F32, 1, 0);
	CHECK(ck_lossy_encode(ctx, cur, 4096, CK_LOSSY_F32, 0.0, NULL, 0, dec, &d, &p, NULL) == -EINVAL, "bound 0");
	CHECK(ck_lossy_encode(ctx, cur, 4095, CK_LOSSY_F32, 0.1, NULL, 0, dec, &d, &p, NULL) == -EINVAL, "odd length");
	CHECK(ck_lossy_encode(ctx, cur, 4096, CK_LOSSY_F32, 0.1, NULL, 0, cur, &d, &p, NULL) == -EINVAL, "in place");
	CHECK(ck_lossy_encode(ctx, cur, 4096, CK_LOSSY_F32, 1e-12, NULL, 0, dec, &d, &p, NULL) == -E2BIG,
	      "a bound of 1e-12 pays");
	CHECK(ck_lossy_encode(ctx, cur, 4096, CK_LOSSY_BF16, 1e-5, NULL, 0, dec, &d, &p, NULL) == -E2BIG,
	      "a bound under bfloat16's rounding pays");
}

/* Conversions against the hardware's (fp16) and bit-for-bit identities. */
static void conversions(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = ck_f16_to_f32((uint16_t)h);

		if (isnan(f))
			CHECK(isnan(ck_f16_to_f32(ck_f32_to_f16(f))), "f16 NaN 0x%04x", h);
		else
			CHECK(ck_f32_to_f16(f) == h, "f16 0x%04x round trip: 0x%04x", h, ck_f32_to_f16(f));
		f = ck_bf16_to_f32((uint16_t)h);
		if (!isnan(f))
			CHECK(ck_f32_to_bf16(f) == h, "bf16 0x%04x round trip", h);
	}
#ifdef __FLT16_MAX__
	for (int k = 0; k < 2000000; k++) {
		uint32_t u = (uint32_t)next();
		float f = ck_f32_of_bits(u);
		_Float16 g = (_Float16)f;
		uint16_t want;

		memcpy(&want, &g, 2);
		if (isnan(f))
			continue;
		CHECK(ck_f32_to_f16(f) == want, "f16 of 0x%08x: 0x%04x, hardware 0x%04x", u, ck_f32_to_f16(f), want);
	}
#endif
	/* bf16: ties to even */
	CHECK(ck_f32_to_bf16(ck_f32_of_bits(0x3f808000u)) == 0x3f80, "bf16 tie down");
	CHECK(ck_f32_to_bf16(ck_f32_of_bits(0x3f818000u)) == 0x3f82, "bf16 tie up");
	CHECK(ck_f32_to_bf16(ck_f32_of_bits(0x7f7fffffu)) == 0x7f80, "bf16 overflow");
}

int main(void)
{
	SETUP(ck_chunk_ctx_new(NULL, &ctx) == 0);
	conversions();
	refusals();
	extremes();
	special_values();
	for (int nonneg = 0; nonneg < 2; nonneg++) {
		chain(CK_LOSSY_F32, nonneg, 0.05);
		chain(CK_LOSSY_F32, nonneg, 0.001);
		chain(CK_LOSSY_BF16, nonneg, 0.05);
		chain(CK_LOSSY_F16, nonneg, 0.02);
	}
	ck_chunk_ctx_free(ctx);
	return test_result();
}
