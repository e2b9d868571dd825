/* Chunk decoder: every length is checked against the descriptor before it
 * is used, and the result must hash as recorded. */
#include "config.h"
#include "chunk_int.h"
#include "lossy_int.h"
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
	if (ck_codec_lossy(d->codec) && (d->elem_size < 2 || d->elem_size > 4 || d->raw_len % d->elem_size ||
					 !d->compact))
		return ck_fail(err, EINVAL, "chunk: %s chunk of %u-byte elements, %" PRIu32 " bytes%s",
			       ck_codec_name(d->codec), d->elem_size, d->raw_len, d->compact ? "" : ", framed");
	return 0;
}

/* A sparse plane's data (len bytes at p) expanded into plane (n bytes). */
int ck_sparse_parts(struct ck_chunk_ctx *ctx, int compact, unsigned k, const uint8_t *p, uint32_t len, size_t n,
		    const uint8_t **bitmap_out, const uint8_t **vals_out, struct ck_error *err)
{
	uint8_t *bitmap = ctx->bitmap, *vals = ctx->bitmap + CK_SPARSE_BITMAP;
	ZSTD_DCtx *dctx = compact ? ctx->dctx_bare : ctx->dctx;
	unsigned w = compact ? ck_dirent_width(n) : 4;   /* b's bytes */
	size_t bytes = (n + 7) / 8, m, got;
	uint64_t b;

	if (len < w)
		return ck_fail(err, EINVAL, "chunk: sparse plane %u of %" PRIu32 " bytes has no bitmap length", k, len);
	b = compact ? ck_le_get(p, w) : ck_le32(p);
	if (b > len - w)
		return ck_fail(err, EINVAL, "chunk: sparse plane %u: bitmap of %" PRIu64 " bytes past its end", k, b);
	got = ZSTD_decompressDCtx(dctx, bitmap, bytes, p + w, (size_t)b);
	if (ZSTD_isError(got) || got != bytes)
		return ck_fail(err, EINVAL, "chunk: sparse plane %u: bitmap %s", k,
			       ZSTD_isError(got) ? ZSTD_getErrorName(got) : "of the wrong length");
	if (n % 8 && bitmap[bytes - 1] >> (n % 8))
		return ck_fail(err, EINVAL, "chunk: sparse plane %u: bitmap bits past its %zu bytes", k, n);
	m = ck_sparse_count(bitmap, n);
	got = ZSTD_decompressDCtx(dctx, vals, m, p + w + b, len - w - b);
	if (ZSTD_isError(got) || got != m)
		return ck_fail(err, EINVAL, "chunk: sparse plane %u: %s where the bitmap has %zu bytes", k,
			       ZSTD_isError(got) ? ZSTD_getErrorName(got) : "another number of values", m);
	*bitmap_out = bitmap;
	*vals_out = vals;
	return 0;
}

static int expand_sparse(struct ck_chunk_ctx *ctx, int compact, unsigned k, const uint8_t *p, uint32_t len,
			 size_t n, uint8_t *plane, struct ck_error *err)
{
	const uint8_t *bitmap, *vals;
	int rc = ck_sparse_parts(ctx, compact, k, p, len, n, &bitmap, &vals, err);

	if (rc == 0)
		ck_sparse_expand(bitmap, vals, n, plane);
	return rc;
}

/* Directory entry k: its mode and length. */
static void dirent_of(int compact, const uint8_t *payload, unsigned w, unsigned k, unsigned *mode, uint64_t *len)
{
	const uint8_t *ent = payload + (size_t)k * w;

	if (compact) {
		uint64_t v = ck_le_get(ent, w);

		*mode = (unsigned)(v & 3);
		*len = v >> 2;
	} else {
		*mode = ent[0];
		*len = ck_le32(ent + 1);
	}
}

int ck_planes_decode(struct ck_chunk_ctx *ctx, int compact, const uint8_t *payload, size_t enc_len, size_t n,
		     unsigned size, const uint8_t *planes[8], size_t *end, struct ck_error *err)
{
	unsigned w = ck_dirent_bytes(compact, n);
	size_t pos = (size_t)size * w;

	if (pos > enc_len)
		return ck_fail(err, EINVAL, "chunk: payload of %zu bytes shorter than its plane directory", enc_len);
	for (unsigned k = 0; k < size; k++) {
		uint8_t *plane = ctx->planes + k * n;
		unsigned mode;
		uint64_t len;
		int rc;

		dirent_of(compact, payload, w, k, &mode, &len);
		if (len > enc_len - pos)
			return ck_fail(err, EINVAL, "chunk: plane %u of %" PRIu64 " bytes past the payload's end",
				       k, len);
		if (mode == CK_PLANE_STORED) {
			if (len != n)
				return ck_fail(err, EINVAL, "chunk: stored plane %u has %" PRIu64 " bytes, not %zu",
					       k, len, n);
			planes[k] = payload + pos;
		} else if (mode == CK_PLANE_ZSTD) {
			size_t got = ZSTD_decompressDCtx(compact ? ctx->dctx_bare : ctx->dctx, plane, n,
							 payload + pos, (size_t)len);

			if (ZSTD_isError(got))
				return ck_fail(err, EINVAL, "chunk: plane %u: zstd: %s", k, ZSTD_getErrorName(got));
			if (got != n)
				return ck_fail(err, EINVAL, "chunk: plane %u decompresses to %zu bytes, not %zu",
					       k, got, n);
			planes[k] = plane;
		} else if (mode == CK_PLANE_RUNS && compact) {
			if (ck_runs_decode(payload + pos, (size_t)len, plane, n))
				return ck_fail(err, EINVAL, "chunk: plane %u: runs malformed or past its %zu bytes",
					       k, n);
			planes[k] = plane;
		} else if (mode == CK_PLANE_SPARSE) {
			rc = expand_sparse(ctx, compact, k, payload + pos, (uint32_t)len, n, plane, err);
			if (rc)
				return rc;
			planes[k] = plane;
		} else {
			return ck_fail(err, EINVAL, "chunk: plane %u has unknown mode %u", k, mode);
		}
		pos += len;
	}
	*end = pos;
	return 0;
}

/* Points planes[k] at plane k of a PLANES/XOR/SUB/ROT payload and *tail
 * at the raw_len % elem_size tail bytes after them. */
static int planes_of(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
		     const uint8_t *planes[8], const uint8_t **tail, struct ck_error *err)
{
	size_t rest = d->raw_len % d->elem_size, pos;
	int rc = ck_planes_decode(ctx, d->compact, payload, d->enc_len, d->raw_len / d->elem_size, d->elem_size,
				  planes, &pos, err);

	if (rc)
		return rc;
	if (d->enc_len - pos != rest)
		return ck_fail(err, EINVAL, "chunk: %zu bytes after the planes, expected %zu",
			       (size_t)(d->enc_len - pos), rest);
	*tail = payload + pos;
	return 0;
}

/* The payload decoded into out: a self-contained chunk, or a delta
 * applied to ref (raw_len bytes; may be out).  No hash is checked. */
static int apply(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
		 const uint8_t *ref, uint8_t *out, struct ck_error *err)
{
	size_t body = d->raw_len - d->raw_len % d->elem_size;
	const uint8_t *planes[8], *tail = NULL;
	int rc;

	if (d->codec == CK_CODEC_RAW) {
		memcpy(out, payload, d->raw_len);
		return 0;
	}
	if (ck_codec_lossy(d->codec))
		return ck_lossy_decode(ctx, d, payload, ref, out, err);
	rc = planes_of(ctx, d, payload, planes, &tail, err);
	if (rc)
		return rc;
	if (d->codec == CK_CODEC_PLANES || d->codec == CK_CODEC_ROT) {
		ck_planes_apply(planes, d->raw_len / d->elem_size, d->elem_size,
				d->codec == CK_CODEC_ROT ? CK_PLANES_ROTR : CK_PLANES_SET, NULL, out);
		memcpy(out + body, tail, d->raw_len - body);
	} else {
		ck_planes_apply(planes, d->raw_len / d->elem_size, d->elem_size,
				d->codec == CK_CODEC_XOR ? CK_PLANES_XOR : CK_PLANES_ADD, ref, out);
		ck_xor_bytes(tail, ref + body, d->raw_len - body, out + body);
	}
	return 0;
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
	rc = apply(ctx, d, payload, ref, out, err);
	if (rc)
		return rc;
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

int ck_chunk_decode_unchecked(struct ck_chunk_ctx *ctx, const struct ck_chunk_desc *d, const uint8_t *payload,
			      const void *ref, void *out, struct ck_error *err)
{
	int rc = check_desc(d, err);

	if (rc == 0 && ck_codec_needs_ref(d->codec) && !ref)
		rc = ck_fail(err, EINVAL, "chunk: %s delta needs its reference", ck_codec_name(d->codec));
	return rc ? rc : apply(ctx, d, payload, ref, out, err);
}
