/* Chunk codec contexts, hashes and names. */
#include "config.h"
#include "chunk_int.h"

#include <errno.h>
#include <stdlib.h>
#include <xxhash.h>

struct ck_hash128 ck_chunk_hash(const void *p, size_t len)
{
	XXH128_hash_t h = XXH3_128bits(p, len);

	return (struct ck_hash128){ .hi = h.high64, .lo = h.low64 };
}

const char *ck_codec_name(enum ck_codec c)
{
	switch (c) {
	case CK_CODEC_RAW: return "raw";
	case CK_CODEC_PLANES: return "planes";
	case CK_CODEC_XOR: return "xor";
	case CK_CODEC_SUB: return "sub";
	case CK_CODEC_ROT: return "rot";
	case CK_CODEC_QUANT: return "quant";
	case CK_CODEC_QDELTA: return "qdelta";
	default: return "?";
	}
}

/* Byte planes of tensor elements are nearly all literals for zstd: an
 * exponent plane is a few dozen symbols in no repeating order, a mantissa
 * plane noise.  At level 1 zstd still finds 4-byte matches in them and
 * codes many short ones, whose lengths and offsets cost more bits than
 * Huffman-coding the same bytes as literals, and which decode slower.  So
 * at the default level planes get zstd's fast strategy with 7-byte
 * matches from a 64-entry table within 128 KiB: only long runs (zeros of
 * unchanged elements) become matches, which makes planes smaller and
 * faster to decode (docs/bench.md, "compress.sh and pack_ratio").  Other
 * levels are zstd's own. */
static int tune_for_planes(ZSTD_CCtx *c, int level)
{
	static const struct {
		ZSTD_cParameter p;
		int v;
	} tuned[] = {
		{ ZSTD_c_strategy, ZSTD_fast }, { ZSTD_c_minMatch, 7 },	{ ZSTD_c_hashLog, 6 },
		{ ZSTD_c_chainLog, 6 },	{ ZSTD_c_searchLog, 1 },	{ ZSTD_c_targetLength, 0 },
		{ ZSTD_c_windowLog, 17 },
	};

	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)))
		return -EINVAL;
	if (level != CK_CHUNK_DEFAULT_LEVEL)
		return 0;
	for (size_t i = 0; i < sizeof(tuned) / sizeof(tuned[0]); i++)
		if (ZSTD_isError(ZSTD_CCtx_setParameter(c, tuned[i].p, tuned[i].v)))
			return -EINVAL;
	return 0;
}

/* The encoder writes compact payloads: zstd frames without the 4-byte
 * magic number and without the content size (the plane's length is known
 * to the decoder), 3 to 7 bytes less per plane.  No checksum either (the
 * chunk's XXH3-128 covers the decoded bytes). */
static int bare_frames(ZSTD_CCtx *c)
{
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_format, ZSTD_f_zstd1_magicless)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)))
		return -EINVAL;
	return 0;
}

int ck_chunk_ctx_new(const struct ck_chunk_opts *opts, struct ck_chunk_ctx **out)
{
	struct ck_chunk_ctx *ctx;
	int level = opts && opts->level ? opts->level : CK_CHUNK_DEFAULT_LEVEL;
	unsigned codecs = opts && opts->codecs ? opts->codecs : CK_CODECS_DEFAULT;

	*out = NULL;
	if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel() || (codecs & ~CK_CODECS_ALL))
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->level = level;
	ctx->codecs = codecs | CK_CODEC_BIT(CK_CODEC_RAW);
	ctx->exhaustive = opts && opts->exhaustive;
	ctx->cctx = ZSTD_createCCtx();
	ctx->plane_cctx = ZSTD_createCCtx();
	ctx->dctx = ZSTD_createDCtx();
	ctx->dctx_bare = ZSTD_createDCtx();
	ctx->delta = malloc(CK_CHUNK_MAX);
	ctx->planes = malloc(CK_CHUNK_MAX);
	ctx->bitmap = calloc(1, CK_SPARSE_SCRATCH);   /* slack read, masked */
	ctx->sparse = malloc(CK_CHUNK_MAX);
	ctx->out[0] = malloc(CK_CHUNK_MAX + CK_PLANES_OVERHEAD);
	ctx->out[1] = malloc(CK_CHUNK_MAX + CK_PLANES_OVERHEAD);
	if (!ctx->cctx || !ctx->plane_cctx || !ctx->dctx || !ctx->dctx_bare || !ctx->delta || !ctx->planes ||
	    !ctx->bitmap || !ctx->sparse || !ctx->out[0] || !ctx->out[1]) {
		ck_chunk_ctx_free(ctx);
		return -ENOMEM;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_compressionLevel, level)) ||
	    tune_for_planes(ctx->plane_cctx, level) || bare_frames(ctx->cctx) || bare_frames(ctx->plane_cctx) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(ctx->dctx_bare, ZSTD_d_format, ZSTD_f_zstd1_magicless))) {
		ck_chunk_ctx_free(ctx);
		return -EINVAL;
	}
	*out = ctx;
	return 0;
}

void ck_chunk_ctx_free(struct ck_chunk_ctx *ctx)
{
	if (!ctx)
		return;
	ZSTD_freeCCtx(ctx->cctx);
	ZSTD_freeCCtx(ctx->plane_cctx);
	ZSTD_freeDCtx(ctx->dctx);
	ZSTD_freeDCtx(ctx->dctx_bare);
	free(ctx->delta);
	free(ctx->planes);
	free(ctx->bitmap);
	free(ctx->sparse);
	free(ctx->out[0]);
	free(ctx->out[1]);
	free(ctx->table);
	free(ctx->values);
	free(ctx->esc);
	free(ctx);
}
