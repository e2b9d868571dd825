/* Decoder of the lossy codecs (QUANT, QDELTA): every field of the payload
 * is checked before it is used (docs/format.md, "Lossy records"). */
#include "config.h"
#include "lossy_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "ckptfs/leb128.h"

void ck_lossy_table(float step, float *t, size_t n)
{
	for (size_t z = 0; z < n; z++)
		t[z] = (float)ck_lossy_unzigzag((uint32_t)z) * step;
}

const float *ck_lossy_table_for(struct ck_chunk_ctx *ctx, float step, size_t n)
{
	if (!ctx->table) {
		ctx->table = malloc(CK_LOSSY_TABLE_MAX * sizeof(*ctx->table));
		ctx->values = malloc(CK_LOSSY_TABLE_MAX * sizeof(*ctx->values));
		if (!ctx->table || !ctx->values) {
			free(ctx->table);
			free(ctx->values);
			ctx->table = NULL;
			ctx->values = NULL;
			return NULL;
		}
		ctx->table_n = 0;
	}
	if (ctx->table_n < n || ck_bits_of_f32(ctx->table_step) != ck_bits_of_f32(step)) {
		ck_lossy_table(step, ctx->table, n);
		ctx->table_step = step;
		ctx->table_n = n;
	}
	return ctx->table;
}

/* The elements: one loop for each dtype, code width, base (the reference
 * or a constant) and clamp, so that none of them branches per element
 * (a chain decodes every step of it, and this loop is most of the time).
 * Code 0 is the base itself, bit for bit. */
#define LOAD_F32(p, i) ck_f32_of_bits(ck_le_load4((p) + 4 * (i)))
#define LOAD_BF16(p, i) ck_bf16_to_f32(ck_le_load2((p) + 2 * (i)))
#define LOAD_F16(p, i) ck_f16_to_f32(ck_le_load2((p) + 2 * (i)))
#define STORE_F32(p, i, v) ck_le_store4((p) + 4 * (i), ck_bits_of_f32(v))
#define STORE_BF16(p, i, v) ck_le_store2((p) + 2 * (i), ck_f32_to_bf16(v))
#define STORE_F16(p, i, v) ck_le_store2((p) + 2 * (i), ck_f32_to_f16(v))
#define COPY_F32(d, s, i) ck_le_store4((d) + 4 * (i), ck_le_load4((s) + 4 * (i)))
#define COPY_BF16(d, s, i) ck_le_store2((d) + 2 * (i), ck_le_load2((s) + 2 * (i)))
#define COPY_F16(d, s, i) COPY_BF16(d, s, i)

#define DECODE_FN(NAME, DT, WIDE, DELTA, NONNEG)                                         \
static void NAME(size_t n, const uint8_t *c0, const uint8_t *c1, float base, const float *t, \
		 const uint8_t *ref, uint8_t *out)                                       \
{                                                                                        \
	(void)c1;                                                                        \
	(void)base;                                                                      \
	(void)ref;                                                                       \
	for (size_t i = 0; i < n; i++) {                                                 \
		uint32_t z = WIDE ? (uint32_t)c0[i] | (uint32_t)c1[i] << 8 : c0[i];      \
		if (DELTA && !z)                                                         \
			COPY_##DT(out, ref, i);                                          \
		else                                                                     \
			STORE_##DT(out, i, z ? ck_lossy_recon(DELTA ? LOAD_##DT(ref, i) : base, t[z], NONNEG) \
						: base);                                 \
	}                                                                                \
}

/* The same for one-byte codes kept as a sparse plane (most residuals):
 * out holds the bases already (the reference, or the constant), and only
 * the elements whose bit is set are computed, 64 bits of the bitmap at a
 * time: the loop over one word's set bits mispredicts once at its end,
 * where a loop per bitmap byte did so for every byte with a bit set
 * (docs/bench.md, lossy.sh). */
#define SPARSE_ONE(DT, DELTA, NONNEG, i)                                                 \
	do {                                                                             \
		uint32_t z = *vals++;                                                    \
		if (z)                                                                   \
			STORE_##DT(out, (i), ck_lossy_recon(DELTA ? LOAD_##DT(out, (i)) : base, t[z], \
							    NONNEG));                    \
	} while (0)
#define SPARSE_FN(NAME, DT, DELTA, NONNEG)                                               \
static void NAME(size_t n, const uint8_t *bitmap, const uint8_t *vals, float base, const float *t, \
		 uint8_t *out)                                                           \
{                                                                                        \
	size_t nb = (n + 7) / 8, w = 0;                                                  \
	(void)base;                                                                      \
	for (; w + 8 <= nb; w += 8)                                                      \
		for (uint64_t bits = ck_le_load8(bitmap + w); bits; bits &= bits - 1)    \
			SPARSE_ONE(DT, DELTA, NONNEG, w * 8 + (unsigned)__builtin_ctzll(bits)); \
	for (; w < nb; w++)                                                              \
		for (unsigned bits = bitmap[w]; bits; bits &= bits - 1)                  \
			SPARSE_ONE(DT, DELTA, NONNEG, w * 8 + (unsigned)__builtin_ctz(bits)); \
}

#define DECODE_FNS(DT)                                                                   \
DECODE_FN(dec_##DT##_0000, DT, 0, 0, 0) DECODE_FN(dec_##DT##_0001, DT, 0, 0, 1)          \
DECODE_FN(dec_##DT##_0010, DT, 0, 1, 0) DECODE_FN(dec_##DT##_0011, DT, 0, 1, 1)          \
DECODE_FN(dec_##DT##_0100, DT, 1, 0, 0) DECODE_FN(dec_##DT##_0101, DT, 1, 0, 1)          \
DECODE_FN(dec_##DT##_0110, DT, 1, 1, 0) DECODE_FN(dec_##DT##_0111, DT, 1, 1, 1)          \
SPARSE_FN(sparse_##DT##_00, DT, 0, 0) SPARSE_FN(sparse_##DT##_01, DT, 0, 1)              \
SPARSE_FN(sparse_##DT##_10, DT, 1, 0) SPARSE_FN(sparse_##DT##_11, DT, 1, 1)

DECODE_FNS(F32)
DECODE_FNS(BF16)
DECODE_FNS(F16)

typedef void (*decode_fn)(size_t, const uint8_t *, const uint8_t *, float, const float *, const uint8_t *,
			  uint8_t *);
typedef void (*sparse_fn)(size_t, const uint8_t *, const uint8_t *, float, const float *, uint8_t *);

/* [dtype][wide << 2 | delta << 1 | nonneg] */
static const decode_fn decoders[3][8] = {
	{ dec_F32_0000, dec_F32_0001, dec_F32_0010, dec_F32_0011,
	  dec_F32_0100, dec_F32_0101, dec_F32_0110, dec_F32_0111 },
	{ dec_BF16_0000, dec_BF16_0001, dec_BF16_0010, dec_BF16_0011,
	  dec_BF16_0100, dec_BF16_0101, dec_BF16_0110, dec_BF16_0111 },
	{ dec_F16_0000, dec_F16_0001, dec_F16_0010, dec_F16_0011,
	  dec_F16_0100, dec_F16_0101, dec_F16_0110, dec_F16_0111 },
};
/* [dtype][delta << 1 | nonneg] */
static const sparse_fn sparse_decoders[3][4] = {
	{ sparse_F32_00, sparse_F32_01, sparse_F32_10, sparse_F32_11 },
	{ sparse_BF16_00, sparse_BF16_01, sparse_BF16_10, sparse_BF16_11 },
	{ sparse_F16_00, sparse_F16_01, sparse_F16_10, sparse_F16_11 },
};

/* A self-contained chunk's elements depend on their code alone: every
 * value a code decodes to, as the element's bytes (rounded to dt), once
 * per chunk, and then each element is one lookup. */
static void quant_values(enum ck_lossy_dtype dt, size_t nz, float base, const float *t, int nonneg, uint32_t *v)
{
	uint8_t one[4] = { 0 };

	for (size_t z = 0; z < nz; z++) {
		ck_lossy_store(one, 0, dt, z ? ck_lossy_recon(base, t[z], nonneg) : base);
		v[z] = dt == CK_LOSSY_F32 ? ck_le_load4(one) : ck_le_load2(one);
	}
}

static void quant_elems(enum ck_lossy_dtype dt, size_t n, const uint8_t *c0, const uint8_t *c1, const uint32_t *v,
			uint8_t *out)
{
	if (dt == CK_LOSSY_F32 && !c1) {
		for (size_t i = 0; i < n; i++)
			ck_le_store4(out + 4 * i, v[c0[i]]);
	} else if (dt == CK_LOSSY_F32) {
		for (size_t i = 0; i < n; i++)
			ck_le_store4(out + 4 * i, v[(uint32_t)c0[i] | (uint32_t)c1[i] << 8]);
	} else if (!c1) {
		for (size_t i = 0; i < n; i++)
			ck_le_store2(out + 2 * i, (uint16_t)v[c0[i]]);
	} else {
		for (size_t i = 0; i < n; i++)
			ck_le_store2(out + 2 * i, (uint16_t)v[(uint32_t)c0[i] | (uint32_t)c1[i] << 8]);
	}
}

/* n elements of the constant base (rounded to dt). */
static void fill(enum ck_lossy_dtype dt, size_t n, float base, uint8_t *out)
{
	uint8_t one[4];

	ck_lossy_store(one, 0, dt, base);
	if (dt == CK_LOSSY_F32) {
		uint32_t v = ck_le_load4(one);

		for (size_t i = 0; i < n; i++)
			ck_le_store4(out + 4 * i, v);
	} else {
		uint16_t v = ck_le_load2(one);

		for (size_t i = 0; i < n; i++)
			ck_le_store2(out + 2 * i, v);
	}
}

static int get_f32(const uint8_t *p, float *out)
{
	*out = ck_f32_of_bits(ck_le_load4(p));
	return isfinite(*out) ? 0 : -1;
}

int ck_lossy_decode(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
		    const uint8_t *ref, uint8_t *out, struct ck_error *err)
{
	unsigned es = d->elem_size, width, w;
	int delta, nonneg;
	size_t n = d->raw_len / es, len = d->enc_len, pos, esc_at, vals, end;
	const uint8_t *planes[8];
	enum ck_lossy_dtype dt;
	uint32_t nesc, at = 0;
	float step, base = 0.0f;
	const float *t;
	uint8_t flags;
	int rc;

	if (len < CK_LOSSY_HEAD)
		return ck_fail(err, EINVAL, "lossy chunk: payload of %zu bytes has no header", len);
	flags = payload[0];
	dt = (enum ck_lossy_dtype)(flags & CK_LOSSY_DTYPE_MASK);
	if ((flags & CK_LOSSY_RESERVED) || dt > CK_LOSSY_F16 || ck_lossy_dtype_size(dt) != es)
		return ck_fail(err, EINVAL, "lossy chunk: flags 0x%02x for %u-byte elements", flags, es);
	if (get_f32(payload + 1, &step) || !(step > 0.0f))
		return ck_fail(err, EINVAL, "lossy chunk: step is not a positive number");
	pos = CK_LOSSY_HEAD;
	if (d->codec == CK_CODEC_QUANT) {
		if (len < CK_LOSSY_HEAD_QUANT || get_f32(payload + CK_LOSSY_HEAD, &base))
			return ck_fail(err, EINVAL, "lossy chunk: no base, or not a number");
		pos = CK_LOSSY_HEAD_QUANT;
	} else if (!ref) {
		return ck_fail(err, EINVAL, "lossy chunk: qdelta needs its reference");
	}
	if (ck_leb128_get(payload, len, &pos, &nesc) != 1 || nesc > n)
		return ck_fail(err, EINVAL, "lossy chunk: bad count of escaped elements");
	/* Escapes: their positions (checked now, applied after the codes), then their values. */
	esc_at = pos;
	for (uint32_t k = 0; k < nesc; k++) {
		uint32_t gap;

		if (ck_leb128_get(payload, len, &pos, &gap) != 1 || gap >= n - at)
			return ck_fail(err, EINVAL, "lossy chunk: escaped element %" PRIu32 " out of place", k);
		at += gap + 1;
	}
	vals = pos;
	if ((size_t)nesc * es > len - pos)
		return ck_fail(err, EINVAL, "lossy chunk: escaped values past the payload's end");
	pos += (size_t)nesc * es;
	width = flags & CK_LOSSY_WIDE ? 2 : 1;
	t = ck_lossy_table_for(ctx, step, (size_t)1 << (8 * width));
	if (!t)
		return ck_fail(err, ENOMEM, "out of memory");
	delta = d->codec == CK_CODEC_QDELTA;
	nonneg = !!(flags & CK_LOSSY_NONNEG);
	w = ck_dirent_width(n);
	if (width == 1 && len - pos >= w && ((ck_le_get(payload + pos, w) & 3) == CK_PLANE_SPARSE) &&
	    (ck_le_get(payload + pos, w) >> 2) == len - pos - w) {
		const uint8_t *bitmap, *nonzero;

		rc = ck_sparse_parts(ctx, 1, 0, payload + pos + w, (uint32_t)(len - pos - w), n, &bitmap, &nonzero, err);
		if (rc)
			return rc;
		if (!delta)
			fill(dt, n, base, out);
		else if (out != ref)
			memcpy(out, ref, n * es);
		sparse_decoders[dt][delta << 1 | nonneg](n, bitmap, nonzero, base, t, out);
	} else {
		rc = ck_planes_decode(ctx, 1, payload + pos, len - pos, n, width, planes, &end, err);
		if (rc)
			return rc;
		if (end != len - pos)
			return ck_fail(err, EINVAL, "lossy chunk: %zu bytes after the codes", len - pos - end);
		if (!delta && ctx->values) {
			quant_values(dt, (size_t)1 << (8 * width), base, t, nonneg, ctx->values);
			quant_elems(dt, n, planes[0], width == 2 ? planes[1] : NULL, ctx->values, out);
		} else {
			decoders[dt][(width == 2) << 2 | delta << 1 | nonneg](n, planes[0], width == 2 ? planes[1] : NULL,
									       base, t, ref, out);
		}
	}
	at = 0;
	for (uint32_t k = 0; k < nesc; k++) {
		uint32_t gap;

		ck_leb128_get(payload, len, &esc_at, &gap);
		at += gap + (k > 0);
		memcpy(out + (size_t)at * es, payload + vals + (size_t)k * es, es);
	}
	return 0;
}
