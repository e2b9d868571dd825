/* Chunk encoder: every allowed codec is tried, the smallest payload wins. */
#include "config.h"
#include "chunk_int.h"

#include <errno.h>
#include <string.h>

/* Does a plane look like noise that zstd cannot shrink?  The low mantissa
 * bytes of changed floats are: trying zstd on them costs as much as on any
 * other plane and gains nothing.  Judged on up to 16384 sampled bytes by
 * their collision rate: sum of p_i^2 is 1/256 for uniform bytes (plus
 * sampling noise of about 1/N); below 0.0041 (Renyi entropy over 7.93
 * bits per byte) zstd's Huffman stage saves under 1 %. */
#define NOISE_SAMPLES 16384

static int looks_random(const uint8_t *p, size_t n)
{
	uint32_t count[256] = { 0 };
	size_t step = n / NOISE_SAMPLES, m = 0;
	uint64_t sum = 0;

	if (step == 0)
		return 0;       /* small planes: just try zstd */
	for (size_t i = 0; i < n; i += step, m++)
		count[p[i]]++;
	for (int b = 0; b < 256; b++)
		sum += (uint64_t)count[b] * count[b];
	/* sum / m^2 < 0.0041, in integers */
	return sum * 10000 < (uint64_t)m * m * 41;
}

/* Is a plane mostly zeros, so that its sparse form may pay?  Judged on up
 * to NOISE_SAMPLES sampled bytes: at least half of them zero, and not all
 * of them (zstd makes runs of zeros nearly free). */
static int looks_sparse(const uint8_t *p, size_t n)
{
	size_t step = n / NOISE_SAMPLES, m = 0, zeros = 0;

	if (step == 0)
		return 0;
	for (size_t i = 0; i < n; i += step, m++)
		zeros += p[i] == 0;
	return 2 * zeros >= m && zeros < m;
}

/* The sparse form of a plane of n bytes into ctx->sparse (compact
 * layout): its length, or 0 when it is not smaller than limit. */
static size_t encode_sparse(struct ck_chunk_ctx *ctx, const uint8_t *plane, size_t n, size_t limit)
{
	uint8_t *bitmap = ctx->bitmap, *vals = ctx->bitmap + CK_SPARSE_BITMAP;
	size_t m = ck_sparse_split(plane, n, bitmap, vals), pos = ck_dirent_width(n), b, v;

	if (limit <= pos)
		return 0;
	b = ZSTD_compress2(ctx->plane_cctx, ctx->sparse + pos, limit - pos, bitmap, (n + 7) / 8);
	if (ZSTD_isError(b))
		return 0;
	ck_le_put(ctx->sparse, (unsigned)pos, b);
	pos += b;
	v = ZSTD_compress2(ctx->plane_cctx, ctx->sparse + pos, limit - pos, vals, m);
	if (ZSTD_isError(v))
		return 0;
	return pos + v < limit ? pos + v : 0;
}

/* A plane compressed whole with zstd into dst (at most limit bytes): its
 * length, or 0 when zstd does not fit. */
static size_t encode_zstd(ZSTD_CCtx *cctx, const uint8_t *plane, size_t n, size_t limit, uint8_t *dst)
{
	size_t z = ZSTD_compress2(cctx, dst, limit, plane, n);

	return ZSTD_isError(z) ? 0 : z;
}

/* Planes under this many bytes also try the runs form (chunk_runs.c):
 * those of zip headers and pickles; a larger plane with few changed bytes
 * is sparse-coded about as well. */
#define RUNS_MAX 16384

/* One plane of n bytes into dst, as the smallest of stored, zstd, (for
 * mostly-zero planes) sparse and (for small planes) runs; writes its
 * directory entry at ent (compact layout).
 *
 * A plane that looks sparse tries the sparse form first: it nearly always
 * wins there, and zstd of the whole plane, which codes every zero byte in
 * at least a bit, costs as much CPU as the rest of the encoding.  zstd is
 * still tried where the sparse form lost or came out under 1 % of the
 * plane (nearly all zeros, where zstd's runs win by a few dozen bytes and
 * cost little).  The bytes and CPU this trades: docs/bench.md. */
size_t ck_plane_encode(struct ck_chunk_ctx *ctx, ZSTD_CCtx *cctx, const uint8_t *plane, size_t n, uint8_t *ent,
		       uint8_t *dst)
{
	unsigned mode = CK_PLANE_STORED;
	size_t best = n, got;

	if (n > 1 && !looks_random(plane, n)) {
		if (looks_sparse(plane, n) && (got = encode_sparse(ctx, plane, n, n - 1)) != 0) {
			memcpy(dst, ctx->sparse, got);
			mode = CK_PLANE_SPARSE;
			best = got;
		}
		if (mode != CK_PLANE_SPARSE || best < n / 100) {
			/* zstd into its own buffer when the sparse form is in dst */
			uint8_t *to = mode == CK_PLANE_SPARSE ? ctx->sparse : dst;

			got = encode_zstd(cctx, plane, n, best - 1, to);
			if (got) {
				if (to != dst)
					memcpy(dst, to, got);
				mode = CK_PLANE_ZSTD;
				best = got;
			}
		}
	}
	if (n < RUNS_MAX && n > 1 && ck_runs_encode(plane, n, ctx->sparse, best, &got) == 0) {
		memcpy(dst, ctx->sparse, got);
		mode = CK_PLANE_RUNS;
		best = got;
	}
	if (mode == CK_PLANE_STORED)
		memcpy(dst, plane, n);   /* incompressible, or nothing fit in n - 1 bytes */
	ck_le_put(ent, ck_dirent_width(n), (uint64_t)best << 2 | mode);
	return best;
}

/* Byte planes of src, each as small as ck_plane_encode makes it, into dst.
 * Returns the payload length, or 0 when it is not smaller than len (the
 * codec does not pay for this chunk). */
static size_t encode_planes(struct ck_chunk_ctx *ctx, const uint8_t *src, size_t len,
			    unsigned size, uint8_t *dst)
{
	size_t n = len / size, tail = len % size;
	unsigned w = ck_dirent_width(n);
	size_t pos = (size_t)size * w;
	ZSTD_CCtx *cctx = size > 1 ? ctx->plane_cctx : ctx->cctx;

	ck_planes_split(src, len, size, ctx->planes);
	for (unsigned k = 0; k < size; k++)
		pos += ck_plane_encode(ctx, cctx, ctx->planes + k * n, n, dst + k * w, dst + pos);
	memcpy(dst + pos, src + n * size, tail);
	pos += tail;
	return pos < len ? pos : 0;
}

/* One codec into ctx->out[slot]: payload length, or 0 when it does not pay. */
static size_t encode_one(struct ck_chunk_ctx *ctx, enum ck_codec codec, const uint8_t *raw,
			 size_t len, unsigned size, const uint8_t *ref, int slot)
{
	const uint8_t *src = raw;

	if (codec == CK_CODEC_XOR) {
		ck_xor_bytes(raw, ref, len, ctx->delta);
		src = ctx->delta;
	} else if (codec == CK_CODEC_SUB) {
		ck_sub_elems(raw, ref, len, size, ctx->delta);
		src = ctx->delta;
	} else if (codec == CK_CODEC_ROT) {
		ck_rot_elems(raw, len, size, 0, ctx->delta);
		src = ctx->delta;
	}
	return encode_planes(ctx, src, len, size, ctx->out[slot]);
}

static int check_args(size_t len, unsigned elem_size)
{
	if (len > CK_CHUNK_MAX)
		return -EINVAL;
	if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
		return -EINVAL;
	return 0;
}

static void fill_desc(struct ck_chunk_desc *desc, enum ck_codec codec, size_t len, unsigned size,
		      size_t enc_len, struct ck_hash128 raw_hash, const uint8_t *ref)
{
	desc->codec = codec;
	desc->elem_size = size;
	desc->raw_len = (uint32_t)len;
	desc->enc_len = (uint32_t)enc_len;
	desc->raw_hash = raw_hash;
	desc->ref_hash = ck_codec_needs_ref(codec) ? ck_chunk_hash(ref, len) : (struct ck_hash128){ 0, 0 };
	desc->compact = 1;
}

/* The codecs tried, in order; the first of equal sizes wins. */
static const enum ck_codec tries[] = { CK_CODEC_PLANES, CK_CODEC_ROT, CK_CODEC_XOR, CK_CODEC_SUB };

/* May the encoder try c on this chunk?  ROT moves nothing across byte
 * planes of single bytes. */
static int may_try(const struct ck_chunk_ctx *ctx, enum ck_codec c, unsigned size, const uint8_t *ref)
{
	if (!(ctx->codecs & CK_CODEC_BIT(c)) || (ck_codec_needs_ref(c) && !ref))
		return 0;
	return c != CK_CODEC_ROT || size > 1;
}

/* The allowed candidate with the smallest estimate, or RAW (try them all)
 * when there is at most one to try. */
static enum ck_codec pick_by_estimate(struct ck_chunk_ctx *ctx, const uint8_t *raw, size_t len,
				      unsigned size, const uint8_t *ref)
{
	enum ck_codec pick = CK_CODEC_RAW;
	size_t best = SIZE_MAX, est[CK_CODEC__COUNT];
	unsigned codecs = 0;
	int candidates = 0;

	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++)
		if (may_try(ctx, tries[i], size, ref)) {
			codecs |= CK_CODEC_BIT(tries[i]);
			candidates++;
		}
	if (candidates < 2)
		return CK_CODEC_RAW;
	ck_chunk_estimate(codecs, raw, ref, len, size, est);
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++)
		if ((codecs & CK_CODEC_BIT(tries[i])) && est[tries[i]] < best) {
			best = est[tries[i]];
			pick = tries[i];
		}
	return pick;
}

int ck_chunk_encode(struct ck_chunk_ctx *ctx, const void *raw, size_t len, unsigned elem_size,
		    const void *ref, size_t ref_len, struct ck_chunk_desc *desc,
		    const uint8_t **payload)
{
	enum ck_codec best = CK_CODEC_RAW, only = CK_CODEC_RAW;
	size_t best_len = len;
	int slot = 0, rc = check_args(len, elem_size);

	if (rc)
		return rc;
	if (!ref || ref_len != len)
		ref = NULL;
	if (!ctx->exhaustive)
		only = pick_by_estimate(ctx, raw, len, elem_size, ref);
	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		enum ck_codec c = tries[i];
		size_t got;

		if (!may_try(ctx, c, elem_size, ref))
			continue;
		if (only != CK_CODEC_RAW && c != only)
			continue;
		got = encode_one(ctx, c, raw, len, elem_size, ref, slot);
		if (got && got < best_len) {
			best = c;
			best_len = got;
			ctx->best = slot;
			slot = !slot;
		}
	}
	fill_desc(desc, best, len, elem_size, best_len, ck_chunk_hash(raw, len), ref);
	*payload = best == CK_CODEC_RAW ? raw : ctx->out[ctx->best];
	return 0;
}

int ck_chunk_encode_as(struct ck_chunk_ctx *ctx, enum ck_codec codec, const void *raw, size_t len,
		       unsigned elem_size, const void *ref, size_t ref_len,
		       struct ck_chunk_desc *desc, const uint8_t **payload)
{
	size_t got = len;
	int rc = check_args(len, elem_size);

	if (rc)
		return rc;
	if ((unsigned)codec >= CK_CODEC__LOSSLESS)
		return -EINVAL;
	if (ck_codec_needs_ref(codec) && (!ref || ref_len != len))
		return -EINVAL;
	if (codec != CK_CODEC_RAW) {
		got = encode_one(ctx, codec, raw, len, elem_size, ref, 0);
		if (!got)
			return -E2BIG;
		ctx->best = 0;
	}
	fill_desc(desc, codec, len, elem_size, got, ck_chunk_hash(raw, len), ref);
	*payload = codec == CK_CODEC_RAW ? raw : ctx->out[0];
	return 0;
}
