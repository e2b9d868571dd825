/* Chunk decoder: every length is checked against the descriptor before it
 * is used, and the result must hash as recorded. */
#include "config.h"
#include "chunk_int.h"
#include "ckptfs/buf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_desc(const struct ck_chunk_desc *d, struct ck_error *err)
{
	if ((unsigned)d->codec >= CK_CODEC__COUNT)
		return ck_fail(err, EINVAL, "chunk: unknown codec %u", (unsigned)d->codec);
	if (d->elem_size != 1 && d->elem_size != 2 && d->elem_size != 4 && d->elem_size != 8)
		return ck_fail(err, EINVAL, "chunk: element size %u is not 1, 2, 4 or 8", d->elem_size);
	if (d->raw_len > CK_CHUNK_MAX)
		return ck_fail(err, EINVAL, "chunk: raw length %" PRIu32 " over %u", d->raw_len, CK_CHUNK_MAX);
	if (d->codec == CK_CODEC_RAW ? d->enc_len != d->raw_len : d->enc_len >= d->raw_len)
		return ck_fail(err, EINVAL, "chunk: %s payload of %" PRIu32 " bytes for %" PRIu32 " raw bytes",
			       ck_codec_name(d->codec), d->enc_len, d->raw_len);
	if (!ck_codec_needs_ref(d->codec) && (d->ref_hash.hi || d->ref_hash.lo))
		return ck_fail(err, EINVAL, "chunk: %s chunk names a reference", ck_codec_name(d->codec));
	return 0;
}

/* Fills planes (ctx->planes, or another CK_CHUNK_MAX buffer) from a
 * PLANES/XOR/SUB payload and copies its tail to tail_out (raw_len %
 * elem_size bytes). */
static int decode_planes_into(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d,
			      const uint8_t *payload, uint8_t *planes, uint8_t *tail_out,
			      struct ck_error *err)
{
	unsigned size = d->elem_size;
	size_t n = d->raw_len / size, tail = d->raw_len % size;
	size_t pos = (size_t)size * CK_PLANE_DIRENT;

	if (pos > d->enc_len)
		return ck_fail(err, EINVAL, "chunk: payload of %" PRIu32 " bytes shorter than its plane directory",
			       d->enc_len);
	for (unsigned k = 0; k < size; k++) {
		const uint8_t *ent = payload + k * CK_PLANE_DIRENT;
		uint32_t len = ck_le32(ent + 1);
		uint8_t *plane = planes + k * n;

		if (len > d->enc_len - pos)
			return ck_fail(err, EINVAL, "chunk: plane %u of %" PRIu32 " bytes past the payload's end",
				       k, len);
		if (ent[0] == CK_PLANE_STORED) {
			if (len != n)
				return ck_fail(err, EINVAL, "chunk: stored plane %u has %" PRIu32 " bytes, not %zu",
					       k, len, n);
			memcpy(plane, payload + pos, n);
		} else if (ent[0] == CK_PLANE_ZSTD) {
			size_t got = ZSTD_decompressDCtx(ctx->dctx, plane, n, payload + pos, len);

			if (ZSTD_isError(got))
				return ck_fail(err, EINVAL, "chunk: plane %u: zstd: %s", k, ZSTD_getErrorName(got));
			if (got != n)
				return ck_fail(err, EINVAL, "chunk: plane %u decompresses to %zu bytes, not %zu",
					       k, got, n);
		} else {
			return ck_fail(err, EINVAL, "chunk: plane %u has unknown mode %u", k, ent[0]);
		}
		pos += len;
	}
	if (d->enc_len - pos != tail)
		return ck_fail(err, EINVAL, "chunk: %zu bytes after the planes, expected %zu",
			       (size_t)(d->enc_len - pos), tail);
	memcpy(tail_out, payload + pos, tail);
	return 0;
}

static int decode_planes(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d,
			 const uint8_t *payload, uint8_t *tail_out, struct ck_error *err)
{
	return decode_planes_into(ctx, d, payload, ctx->planes, tail_out, err);
}

static void hex128(struct ck_hash128 h, char out[33])
{
	snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, h.hi, h.lo);
}

/* known: the reference's hash, when the caller has checked its bytes. */
static int decode(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
		  const void *ref, size_t ref_len, const struct ck_hash128 *known, void *out,
		  struct ck_error *err)
{
	size_t body = d->raw_len - d->raw_len % (d->elem_size ? d->elem_size : 1);
	struct ck_hash128 got;
	char want_hex[33], got_hex[33];
	int rc = check_desc(d, err);

	if (rc)
		return rc;
	if (ck_codec_needs_ref(d->codec)) {
		if (!ref || ref_len != d->raw_len)
			return ck_fail(err, EINVAL, "chunk: %s delta needs its %" PRIu32 "-byte reference",
				       ck_codec_name(d->codec), d->raw_len);
		got = known ? *known : ck_chunk_hash(ref, ref_len);
		if (!ck_hash128_eq(got, d->ref_hash)) {
			hex128(d->ref_hash, want_hex);
			hex128(got, got_hex);
			return ck_fail(err, EIO, "chunk: reference hashes to %s, the delta was made against %s",
				       got_hex, want_hex);
		}
	}
	switch (d->codec) {
	case CK_CODEC_RAW:
		memcpy(out, payload, d->raw_len);
		break;
	case CK_CODEC_PLANES:
		rc = decode_planes(ctx, d, payload, (uint8_t *)out + body, err);
		if (rc)
			return rc;
		ck_planes_join(ctx->planes, d->raw_len, d->elem_size, out);
		break;
	default:
		rc = decode_planes(ctx, d, payload, ctx->delta + body, err);
		if (rc)
			return rc;
		ck_planes_join(ctx->planes, d->raw_len, d->elem_size, ctx->delta);
		if (d->codec == CK_CODEC_XOR)
			ck_xor_bytes(ctx->delta, ref, d->raw_len, out);
		else
			ck_add_elems(ctx->delta, ref, d->raw_len, d->elem_size, out);
		break;
	}
	got = ck_chunk_hash(out, d->raw_len);
	if (!ck_hash128_eq(got, d->raw_hash)) {
		hex128(d->raw_hash, want_hex);
		hex128(got, got_hex);
		return ck_fail(err, EIO, "chunk: decoded %" PRIu32 " bytes hash to %s, recorded %s",
			       d->raw_len, got_hex, want_hex);
	}
	return 0;
}

int ck_chunk_decode(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d,
		    const uint8_t *payload, const void *ref, size_t ref_len, void *out,
		    struct ck_error *err)
{
	return decode(ctx, d, payload, ref, ref_len, NULL, out, err);
}

int ck_chunk_decode_known_ref(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d,
			      const uint8_t *payload, const void *ref, size_t ref_len,
			      struct ck_hash128 ref_hash, void *out, struct ck_error *err)
{
	return decode(ctx, d, payload, ref, ref_len, &ref_hash, out, err);
}

int ck_chunk_xor_fold(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
		      int first, uint8_t *acc, struct ck_error *err)
{
	size_t body = d->raw_len - d->raw_len % (d->elem_size ? d->elem_size : 1);
	int rc = check_desc(d, err);

	if (rc)
		return rc;
	if (d->codec != CK_CODEC_XOR)
		return ck_fail(err, EINVAL, "chunk: a %s chunk in a chain of XOR deltas", ck_codec_name(d->codec));
	if (first)
		return decode_planes_into(ctx, d, payload, acc, acc + body, err);
	rc = decode_planes_into(ctx, d, payload, ctx->planes, ctx->planes + body, err);
	if (rc == 0)
		ck_xor_bytes(acc, ctx->planes, d->raw_len, acc);
	return rc;
}

int ck_chunk_xor_unfold(struct ck_chunk_ctx *ctx, const uint8_t *acc, size_t len, unsigned elem_size,
			const void *ref, struct ck_hash128 want, void *out, struct ck_error *err)
{
	size_t body = len - len % (elem_size ? elem_size : 1);
	char want_hex[33], got_hex[33];
	struct ck_hash128 got;

	if (len > CK_CHUNK_MAX || (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8))
		return ck_fail(err, EINVAL, "chunk: fold of %zu bytes of %u-byte elements", len, elem_size);
	ck_planes_join(acc, len, elem_size, ctx->delta);
	memcpy(ctx->delta + body, acc + body, len - body);
	ck_xor_bytes(ctx->delta, ref, len, out);
	got = ck_chunk_hash(out, len);
	if (!ck_hash128_eq(got, want)) {
		hex128(want, want_hex);
		hex128(got, got_hex);
		return ck_fail(err, EIO, "chunk: chain decoded to %zu bytes hashing to %s, recorded %s",
			       len, got_hex, want_hex);
	}
	return 0;
}
