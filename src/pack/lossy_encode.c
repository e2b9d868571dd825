/* Encoder of the lossy codecs: a uniform quantizer of step just under
 * twice the bound, self-contained (QUANT) or on the decoded reference
 * (QDELTA), the codes as byte planes; checked by decoding before it
 * returns (include/ckptfs/lossy.h). */
#include "config.h"
#include "lossy_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

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

double ck_lossy_maxabs(const void *p, size_t len, enum ck_lossy_dtype dt)
{
	size_t n = len / ck_lossy_dtype_size(dt);
	float m = 0.0f;

	for (size_t i = 0; i < n; i++) {
		float a = fabsf(ck_lossy_load(p, i, dt));

		if (a > m && isfinite(a))
			m = a;
	}
	return m;
}

double ck_lossy_maxerr(const void *a, const void *b, size_t len, enum ck_lossy_dtype dt)
{
	unsigned es = ck_lossy_dtype_size(dt);
	size_t n = len / es;
	double m = 0.0;

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

/* The code of element i (x finite, b its base) within the bound, its
 * decoded value in *y: 0, or -1 (escape it). */
static int code_of(const struct enc *e, float x, float b, uint32_t *z, float *y)
{
	float qf = (x - b) * e->inv;
	int32_t q;

	if (!(fabsf(qf) < 32767.0f))
		return -1;
	q = (int32_t)lrintf(qf);
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
		ck_lossy_store(one, 0, e->dt, zz ? ck_lossy_recon(b, e->t[zz], e->nonneg) : b);
		v = ck_lossy_load(one, 0, e->dt);
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
			hq[ck_lossy_zigzag((int32_t)lrintf((x - quant_base) * e->inv))]++;
		else
			hq[256 + (a >= 32767.0f)]++, eq += a >= 32767.0f;
		if (isfinite(r) && d < 128.0f)
			hd[ck_lossy_zigzag((int32_t)lrintf((x - r) * e->inv))]++;
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
	int delta, nonneg = 1;
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
	for (size_t i = 0; i < n && nonneg; i++)
		nonneg = !(ck_lossy_load(raw, i, dt) < 0.0f);
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
	for (size_t i = 0; i < n; i++) {
		float x = ck_lossy_load(raw, i, dt), b = delta ? ck_lossy_load(ref, i, dt) : e.base, y;
		uint32_t z = 0;

		if (isfinite(x) && isfinite(b) && code_of(&e, x, b, &z, &y) == 0) {
			ck_le_store2(codes + 2 * i, (uint16_t)z);
			big += z > 0xff;
			ck_lossy_store(decoded, i, dt, y);
			continue;
		}
		if (nesc == ESC_MAX || nesc >= n >> ESC_SHIFT)
			return -E2BIG;
		esc[nesc++] = (uint32_t)i;
		ck_le_store2(codes + 2 * i, 0);
		memcpy(decoded + i * es, raw + i * es, es);
	}
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
