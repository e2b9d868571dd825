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
		if (!ctx->table)
			return NULL;
		ctx->table_n = 0;
	}
	if (ctx->table_n < n || ck_bits_of_f32(ctx->table_step) != ck_bits_of_f32(step)) {
		ck_lossy_table(step, ctx->table, n);
		ctx->table_step = step;
		ctx->table_n = n;
	}
	return ctx->table;
}

/* The elements, one loop per dtype and code width; base is the reference
 * (delta) or the constant. */
#define DECODE_LOOP(LOAD, STORE)                                                         \
	for (size_t i = 0; i < n; i++) {                                                 \
		uint32_t z = wide ? (uint32_t)c0[i] | (uint32_t)c1[i] << 8 : c0[i];      \
		float b = ref ? LOAD : base;                                             \
		float v = ck_lossy_recon(b, t[z], nonneg);                               \
		STORE;                                                                   \
	}

static void decode_elems(enum ck_lossy_dtype dt, size_t n, const uint8_t *c0, const uint8_t *c1, int wide,
			 int nonneg, float base, const float *t, const uint8_t *ref, uint8_t *out)
{
	switch (dt) {
	case CK_LOSSY_BF16:
		DECODE_LOOP(ck_bf16_to_f32(ck_le_load2(ref + 2 * i)), ck_le_store2(out + 2 * i, ck_f32_to_bf16(v)))
		break;
	case CK_LOSSY_F16:
		DECODE_LOOP(ck_f16_to_f32(ck_le_load2(ref + 2 * i)), ck_le_store2(out + 2 * i, ck_f32_to_f16(v)))
		break;
	default:
		DECODE_LOOP(ck_f32_of_bits(ck_le_load4(ref + 4 * i)), ck_le_store4(out + 4 * i, ck_bits_of_f32(v)))
		break;
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
	unsigned es = d->elem_size, width;
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
	rc = ck_planes_decode(ctx, 1, payload + pos, len - pos, n, width, planes, &end, err);
	if (rc)
		return rc;
	if (end != len - pos)
		return ck_fail(err, EINVAL, "lossy chunk: %zu bytes after the codes", len - pos - end);
	t = ck_lossy_table_for(ctx, step, (size_t)1 << (8 * width));
	if (!t)
		return ck_fail(err, ENOMEM, "out of memory");
	decode_elems(dt, n, planes[0], width == 2 ? planes[1] : NULL, width == 2, !!(flags & CK_LOSSY_NONNEG),
		     base, t, d->codec == CK_CODEC_QDELTA ? ref : NULL, out);
	at = 0;
	for (uint32_t k = 0; k < nesc; k++) {
		uint32_t gap;

		ck_leb128_get(payload, len, &esc_at, &gap);
		at += gap + (k > 0);
		memcpy(out + (size_t)at * es, payload + vals + (size_t)k * es, es);
	}
	return 0;
}
