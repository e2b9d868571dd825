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
	default: return "?";
	}
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
	ctx->dctx = ZSTD_createDCtx();
	ctx->delta = malloc(CK_CHUNK_MAX);
	ctx->planes = malloc(CK_CHUNK_MAX);
	ctx->out[0] = malloc(CK_CHUNK_MAX + CK_PLANES_OVERHEAD);
	ctx->out[1] = malloc(CK_CHUNK_MAX + CK_PLANES_OVERHEAD);
	if (!ctx->cctx || !ctx->dctx || !ctx->delta || !ctx->planes || !ctx->out[0] || !ctx->out[1]) {
		ck_chunk_ctx_free(ctx);
		return -ENOMEM;
	}
	*out = ctx;
	return 0;
}

void ck_chunk_ctx_free(struct ck_chunk_ctx *ctx)
{
	if (!ctx)
		return;
	ZSTD_freeCCtx(ctx->cctx);
	ZSTD_freeDCtx(ctx->dctx);
	free(ctx->delta);
	free(ctx->planes);
	free(ctx->out[0]);
	free(ctx->out[1]);
	free(ctx);
}
