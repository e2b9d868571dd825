/* Encoder of the lossy codecs: a uniform quantizer of step just under
 * twice the bound, self-contained (QUANT) or on the decoded reference
 * (QDELTA), the codes as byte planes; checked by decoding before it
 * returns (include/ckptfs/lossy.h). */
#include "config.h"
#include "lossy_int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "ckptfs/leb128.h"

/* At most this share of a chunk's elements escaped (1 / 16): beyond it a
 * lossy record does not pay for its escapes. */
#define ESC_SHIFT 4
#define ESC_MAX (CK_CHUNK_MAX / 2 >> ESC_SHIFT)
/* Codes sampled to choose QUANT or QDELTA. */
#define SAMPLES 4096

const char *ck_lossy_method_name(unsigned method)
{
	return method == CK_LOSSY_METHOD ? "qres-linf" : "?";
}

int ck_lossy_dtype_of(enum ck_dtype dt, enum ck_lossy_dtype *out)
{
	switch (dt) {
	case CK_DT_F32: *out = CK_LOSSY_F32; return 0;
	case CK_DT_BF16: *out = CK_LOSSY_BF16; return 0;
	case CK_DT_F16: *out = CK_LOSSY_F16; return 0;
	default: return -EINVAL;
	}
}

unsigned ck_lossy_dtype_size(enum ck_lossy_dtype dt)
{
	return dt == CK_LOSSY_F32 ? 4 : 2;
}

/* The loops below run over every element of every chunk a lossy
 * compaction codes, most of its CPU: each is written once for all dtypes
 * (ELEM_LOOP) and compiled once per dtype, so that no load, store or
 * rounding branches on the dtype per element. */
#define ELEM_LOOP static inline __attribute__((always_inline))
#define PER_DTYPE(dt, call) \
	((dt) == CK_LOSSY_F32 ? call(CK_LOSSY_F32) : (dt) == CK_LOSSY_BF16 ? call(CK_LOSSY_BF16) : call(CK_LOSSY_F16))

ELEM_LOOP float maxabs_dt(const uint8_t *p, size_t n, enum ck_lossy_dtype dt)
{
	float m = 0.0f;

	for (size_t i = 0; i < n; i++) {
		float a = fabsf(ck_lossy_load(p, i, dt));

		if (a > m && isfinite(a))
			m = a;
	}
	return m;
}

/* Whether no element is below zero (NaNs are not). */
ELEM_LOOP int all_nonneg(const uint8_t *p, size_t n, enum ck_lossy_dtype dt)
{
	for (size_t i = 0; i < n; i++)
		if (ck_lossy_load(p, i, dt) < 0.0f)
			return 0;
	return 1;
}

/* The largest |b - a| over elements finite in both, or -1 when an
 * element is not finite in one of them (the caller compares those). */
ELEM_LOOP double maxerr_dt(const uint8_t *a, const uint8_t *b, size_t n, enum ck_lossy_dtype dt)
{
	double m = 0.0;
	int odd = 0;

	for (size_t i = 0; i < n; i++) {
		float x = ck_lossy_load(a, i, dt), y = ck_lossy_load(b, i, dt);
		double e = fabs((double)y - (double)x);

		odd |= !isfinite(x) || !isfinite(y);
		m = e > m ? e : m;
	}
	return odd ? -1.0 : m;
}

#ifdef __SSE2__
/* binary32 elements, four at a time: the largest finite magnitude (the
 * others masked to zero, so that no NaN meets the max). */
static float maxabs_f32(const uint8_t *p, size_t n)
{
	const __m128i abs = _mm_set1_epi32(0x7fffffff), inf = _mm_set1_epi32(0x7f800000);
	__m128 m0 = _mm_setzero_ps(), m1 = _mm_setzero_ps();
	float m[4];
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i a = _mm_and_si128(_mm_loadu_si128((const void *)(p + 4 * i)), abs);
		__m128i b = _mm_and_si128(_mm_loadu_si128((const void *)(p + 4 * i + 16)), abs);

		m0 = _mm_max_ps(m0, _mm_castsi128_ps(_mm_and_si128(a, _mm_cmplt_epi32(a, inf))));
		m1 = _mm_max_ps(m1, _mm_castsi128_ps(_mm_and_si128(b, _mm_cmplt_epi32(b, inf))));
	}
	_mm_storeu_ps(m, _mm_max_ps(m0, m1));
	return fmaxf(fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3])), maxabs_dt(p + 4 * i, n - i, CK_LOSSY_F32));
}

/* maxerr_dt for binary32, four at a time (the same double arithmetic). */
static double maxerr_f32(const uint8_t *a, const uint8_t *b, size_t n)
{
	const __m128i abs = _mm_set1_epi32(0x7fffffff), big = _mm_set1_epi32(0x7f7fffff);
	const __m128d sign = _mm_set1_pd(-0.0);
	__m128i odd = _mm_setzero_si128();
	__m128d m = _mm_setzero_pd();
	double two[2], tail;
	size_t i = 0;

	for (; i + 4 <= n; i += 4) {
		__m128i xi = _mm_loadu_si128((const void *)(a + 4 * i));
		__m128i yi = _mm_loadu_si128((const void *)(b + 4 * i));
		__m128 x = _mm_castsi128_ps(xi), y = _mm_castsi128_ps(yi);
		__m128d lo = _mm_sub_pd(_mm_cvtps_pd(y), _mm_cvtps_pd(x));
		__m128d hi = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(y, y)), _mm_cvtps_pd(_mm_movehl_ps(x, x)));

		odd = _mm_or_si128(odd, _mm_cmpgt_epi32(_mm_and_si128(xi, abs), big));
		odd = _mm_or_si128(odd, _mm_cmpgt_epi32(_mm_and_si128(yi, abs), big));
		m = _mm_max_pd(m, _mm_andnot_pd(sign, lo));
		m = _mm_max_pd(m, _mm_andnot_pd(sign, hi));
	}
	tail = maxerr_dt(a + 4 * i, b + 4 * i, n - i, CK_LOSSY_F32);
	if (_mm_movemask_epi8(odd) || tail < 0)
		return -1.0;
	_mm_storeu_pd(two, m);
	two[0] = two[0] > two[1] ? two[0] : two[1];
	return two[0] > tail ? two[0] : tail;
}
#endif

double ck_lossy_maxabs(const void *p, size_t len, enum ck_lossy_dtype dt)
{
	size_t n = len / ck_lossy_dtype_size(dt);

#ifdef __SSE2__
	if (dt == CK_LOSSY_F32)
		return maxabs_f32(p, n);
#endif
#define MAXABS(DT) maxabs_dt(p, n, DT)
	return PER_DTYPE(dt, MAXABS);
#undef MAXABS
}

double ck_lossy_maxerr(const void *a, const void *b, size_t len, enum ck_lossy_dtype dt)
{
	unsigned es = ck_lossy_dtype_size(dt);
	size_t n = len / es;
	double m;

#define MAXERR(DT) maxerr_dt(a, b, n, DT)
#ifdef __SSE2__
	m = dt == CK_LOSSY_F32 ? maxerr_f32(a, b, n) : PER_DTYPE(dt, MAXERR);
#else
	m = PER_DTYPE(dt, MAXERR);
#endif
#undef MAXERR
	if (m >= 0.0)
		return m;
	/* Rare: infinities or NaNs, which must be kept bit for bit. */
	m = 0.0;
	for (size_t i = 0; i < n; i++) {
		float x = ck_lossy_load(a, i, dt), y = ck_lossy_load(b, i, dt);
		double e;

		if (!isfinite(x) || !isfinite(y)) {
			if (memcmp((const uint8_t *)a + i * es, (const uint8_t *)b + i * es, es) != 0)
				return INFINITY;
			continue;
		}
		e = fabs((double)y - (double)x);
		if (e > m)
			m = e;
	}
	return m;
}

/* Largest relative half-unit of rounding to the dtype: the decoder's
 * rounding of a reconstruction adds up to this times its magnitude. */
static double rounding_of(enum ck_lossy_dtype dt)
{
	return dt == CK_LOSSY_BF16 ? 0x1p-8 : dt == CK_LOSSY_F16 ? 0x1p-11 : 0x1p-24;
}

struct enc {
	const uint8_t *raw, *ref;
	size_t n;
	enum ck_lossy_dtype dt;
	double bound;
	float step, inv, base;
	int nonneg;
	const float *t;
};

/* lrintf(x) for |x| < 2^22 in the default rounding mode (to nearest,
 * ties to even), inline: x + 1.5 * 2^23 has no bits below the units, so
 * taking 1.5 * 2^23 away again leaves x rounded.  (lrintf is a libm call
 * where it may have to set errno.) */
static inline int32_t rint_small(float x)
{
#if FLT_EVAL_METHOD == 0
	return (int32_t)((x + 0x1.8p23f) - 0x1.8p23f);
#else
	return (int32_t)lrintf(x);
#endif
}

/* The code of element i (x finite, b its base) within the bound, its
 * decoded value in *y: 0, or -1 (escape it). */
ELEM_LOOP int code_of(const struct enc *e, float x, float b, uint32_t *z, float *y, enum ck_lossy_dtype dt)
{
	float qf = (x - b) * e->inv;
	int32_t q;

	if (!(fabsf(qf) < 32767.0f))
		return -1;
	q = rint_small(qf);
	/* Code 0 first where it may do (the reference kept, or the offset
	 * level of a non-negative chunk rather than zero), then the nearest
	 * level and its neighbours (the rounding to the dtype may push the
	 * nearest one past the bound). */
	for (int k = q >= -1 && q <= 1 ? 0 : 1; k < 4; k++) {
		int32_t c = k == 0 ? 0 : k == 1 ? q : k == 2 ? q - 1 : q + 1;
		uint32_t zz = ck_lossy_zigzag(c);
		uint8_t one[4];
		float v;

		if (zz > 0xffff)
			continue;
		/* as the decoder: code 0 is the base itself */
		ck_lossy_store(one, 0, dt, zz ? ck_lossy_recon(b, e->t[zz], e->nonneg) : b);
		v = ck_lossy_load(one, 0, dt);
		if (e->nonneg && v < 0.0f)
			continue;
		if (fabs((double)v - (double)x) <= e->bound) {
			*z = zz;
			*y = v;
			return 0;
		}
	}
	return -1;
}

/* Every element's code (2-byte little-endian in codes) and decoded value
 * (in decoded), against the reference (delta) or the constant base; the
 * elements no code fits are escaped: their indexes in esc (*nesc of
 * them), code 0, the raw element in decoded.  *big: codes over one
 * byte.  0, or -E2BIG when too many escape. */
ELEM_LOOP int code_elems(const struct enc *e, int delta, uint8_t *codes, uint8_t *decoded, uint32_t *esc,
			 size_t *nesc, size_t *big, enum ck_lossy_dtype dt)
{
	unsigned es = ck_lossy_dtype_size(dt);

	for (size_t i = 0; i < e->n; i++) {
		float x = ck_lossy_load(e->raw, i, dt), b = delta ? ck_lossy_load(e->ref, i, dt) : e->base, y;
		uint32_t z = 0;

		if (isfinite(x) && isfinite(b) && code_of(e, x, b, &z, &y, dt) == 0) {
			ck_le_store2(codes + 2 * i, (uint16_t)z);
			*big += z > 0xff;
			ck_lossy_store(decoded, i, dt, y);
			continue;
		}
		if (*nesc == ESC_MAX || *nesc >= e->n >> ESC_SHIFT)
			return -E2BIG;
		esc[(*nesc)++] = (uint32_t)i;
		ck_le_store2(codes + 2 * i, 0);
		memcpy(decoded + i * es, e->raw + i * es, es);
	}
	return 0;
}

/* Bits per code of a histogram of m samples (order-0 entropy), plus what
 * escaping costs. */
static double est_bits(const uint32_t *hist, size_t bins, size_t m, size_t esc, unsigned es)
{
	double bits = 0;

	for (size_t i = 0; i < bins; i++)
		if (hist[i])
			bits -= (double)hist[i] * log2((double)hist[i] / (double)m);
	return bits + (double)esc * (8.0 * es + 16);
}

/* QUANT or QDELTA, from the codes of sampled elements. */
static int pick_delta(const struct enc *e, float quant_base)
{
	uint32_t hq[258] = { 0 }, hd[258] = { 0 };
	size_t step = e->n > SAMPLES ? e->n / SAMPLES : 1, m = 0, eq = 0, ed = 0;

	for (size_t i = 0; i < e->n; i += step, m++) {
		float x = ck_lossy_load(e->raw, i, e->dt), r = ck_lossy_load(e->ref, i, e->dt);
		float a = fabsf((x - quant_base) * e->inv), d = fabsf((x - r) * e->inv);

		if (!isfinite(x))
			continue;
		if (a < 128.0f)
			hq[ck_lossy_zigzag(rint_small((x - quant_base) * e->inv))]++;
		else
			hq[256 + (a >= 32767.0f)]++, eq += a >= 32767.0f;
		if (isfinite(r) && d < 128.0f)
			hd[ck_lossy_zigzag(rint_small((x - r) * e->inv))]++;
		else
			hd[256 + !(isfinite(r) && d < 32767.0f)]++, ed += !(isfinite(r) && d < 32767.0f);
	}
	return est_bits(hd, 258, m, ed, ck_lossy_dtype_size(e->dt)) <
	       est_bits(hq, 258, m, eq, ck_lossy_dtype_size(e->dt));
}

static size_t put_f32(uint8_t *p, float f)
{
	ck_le_store4(p, ck_bits_of_f32(f));
	return 4;
}

int ck_lossy_encode(struct ck_chunk_ctx *ctx, const void *rawp, size_t len, enum ck_lossy_dtype dt,
		    double bound, const void *refp, size_t ref_len, void *decodedp, struct ck_chunk_desc *desc,
		    const uint8_t **payload, struct ck_lossy_result *res)
{
	const uint8_t *raw = rawp, *ref = refp;
	uint8_t *decoded = decodedp, *out, *codes8, *codes;
	unsigned es, width;
	struct enc e;
	size_t n, nesc = 0, nesc2 = 0, big = 0, pos, cap = CK_CHUNK_MAX + CK_PLANES_OVERHEAD;
	uint32_t *esc, *esc2, prev = 0;
	double margin, maxerr;
	int delta, nonneg, rc;
	struct ck_error why;

	if ((unsigned)dt > CK_LOSSY_F16 || !(bound > 0) || !isfinite(bound))
		return -EINVAL;
	es = ck_lossy_dtype_size(dt);
	if (len == 0 || len > CK_CHUNK_MAX || len % es || decoded == raw || (ref && decoded == ref))
		return -EINVAL;
	if (ref && ref_len != len)
		ref = NULL;
	n = len / es;
	if (!ctx->esc) {
		ctx->esc = malloc(2 * ESC_MAX * sizeof(*ctx->esc));
		if (!ctx->esc)
			return -ENOMEM;
	}
	esc = ctx->esc;
	esc2 = ctx->esc + ESC_MAX;
#define NONNEG(DT) all_nonneg(raw, n, DT)
	nonneg = PER_DTYPE(dt, NONNEG);
#undef NONNEG
	/* The step leaves room for the rounding to the dtype of the largest
	 * element, so that most codes pass at the first try. */
	margin = bound - ck_lossy_maxabs(raw, len, dt) * rounding_of(dt);
	if (!(margin > bound / 4))
		return -E2BIG;
	e = (struct enc){ .raw = raw, .ref = ref, .n = n, .dt = dt, .bound = bound, .nonneg = nonneg };
	e.step = (float)(2 * margin * (1 - 0x1p-10));
	if (!(e.step > 0.0f) || !isfinite(e.step))
		return -E2BIG;
	e.inv = 1.0f / e.step;
	/* A self-contained chunk of no negative element has its levels offset
	 * by the bound: the smallest elements decode to it, not to zero. */
	e.base = nonneg ? (float)margin : 0.0f;
	delta = ref && pick_delta(&e, e.base);
	e.t = ck_lossy_table_for(ctx, e.step, CK_LOSSY_TABLE_MAX);
	if (!e.t)
		return -ENOMEM;
	/* Codes as 2-byte little-endian integers in ctx->delta, for now. */
	codes = ctx->delta;
#define CODE(DT) code_elems(&e, delta, codes, decoded, esc, &nesc, &big, DT)
	rc = PER_DTYPE(dt, CODE);
#undef CODE
	if (rc)
		return rc;
	/* One-byte codes unless escaping the larger ones costs more than a
	 * quarter of a bit an element. */
	width = (double)big * (8.0 * es + 16) < (double)n / 4 && nesc + big <= ESC_MAX &&
		nesc + big < n >> ESC_SHIFT ? 1 : 2;
	codes8 = ctx->delta;
	for (size_t i = 0, k = 0; i < n; i++) {
		int escaped = k < nesc && esc[k] == i;
		uint16_t z = ck_le_load2(codes + 2 * i);

		k += escaped;
		if (width == 1 && !escaped && z > 0xff) {
			memcpy(decoded + i * es, raw + i * es, es);
			escaped = 1;
		}
		if (escaped) {
			esc2[nesc2++] = (uint32_t)i;
			if (width == 1)
				codes8[i] = 0;
			continue;
		}
		if (width == 1)
			codes8[i] = (uint8_t)z;   /* in place: byte i is behind entry i */
	}
	/* The payload: header, escapes, codes. */
	out = ctx->out[0];
	pos = 0;
	out[pos++] = (uint8_t)(dt | (width == 2 ? CK_LOSSY_WIDE : 0) | (nonneg ? CK_LOSSY_NONNEG : 0));
	pos += put_f32(out + pos, e.step);
	if (!delta)
		pos += put_f32(out + pos, e.base);
	pos += ck_leb128_put(out + pos, (uint32_t)nesc2);
	for (size_t k = 0; k < nesc2; k++) {
		pos += ck_leb128_put(out + pos, esc2[k] - (k ? prev + 1 : 0));
		prev = esc2[k];
	}
	for (size_t k = 0; k < nesc2; k++, pos += es)
		memcpy(out + pos, raw + (size_t)esc2[k] * es, es);
	if (pos + (size_t)width * (ck_dirent_width(n) + n) > cap)
		return -E2BIG;
	{
		size_t at = pos + (size_t)width * ck_dirent_width(n);

		if (width == 1) {
			at += ck_plane_encode(ctx, ctx->plane_cctx, codes8, n, out + pos, out + at);
		} else {
			ck_planes_split(ctx->delta, 2 * n, 2, ctx->planes);
			for (unsigned k = 0; k < 2; k++)
				at += ck_plane_encode(ctx, ctx->plane_cctx, ctx->planes + k * n, n,
						      out + pos + k * ck_dirent_width(n), out + at);
		}
		pos = at;
	}
	if (pos >= len)
		return -E2BIG;
	desc->codec = delta ? CK_CODEC_QDELTA : CK_CODEC_QUANT;
	desc->elem_size = es;
	desc->raw_len = (uint32_t)len;
	desc->enc_len = (uint32_t)pos;
	desc->raw_hash = ck_chunk_hash(decoded, len);
	desc->ref_hash = delta ? ck_chunk_hash(ref, len) : (struct ck_hash128){ 0, 0 };
	desc->compact = 1;
	/* Decoded as every reader will, into scratch, and checked. */
	if (ck_lossy_decode(ctx, desc, out, ref, ctx->delta, &why) != 0 || memcmp(ctx->delta, decoded, len) != 0)
		return -EIO;
	maxerr = ck_lossy_maxerr(raw, decoded, len, dt);
	if (!(maxerr <= bound))
		return -EIO;
	if (res) {
		res->max_err = maxerr;
		res->escapes = (uint32_t)nesc2;
		res->code_bytes = width;
		res->delta = delta;
	}
	ctx->best = 0;
	*payload = out;
	return 0;
}
