/* The chunk codec: every codec and element size round-trips, the encoder
 * picks the smallest payload, and damaged payloads, descriptors or
 * references fail with -EINVAL / -EIO, never with wrong bytes. */
#include "config.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "ckptfs/chunk.h"
#include "testutil.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)next();
}

/* fp32 "weights" around 0.02 and a version after a small update: what a
 * training step does to most values. */
static void fill_weights(uint8_t *cur, uint8_t *ref, size_t n)
{
	for (size_t i = 0; i + 4 <= n; i += 4) {
		float w = (float)((double)(next() % 20000) / 1e6 - 0.01);
		float u = w + (float)((double)(next() % 200) / 1e9 - 1e-7);

		memcpy(ref + i, &w, 4);
		memcpy(cur + i, &u, 4);
	}
	for (size_t i = n - n % 4; i < n; i++)
		cur[i] = ref[i] = (uint8_t)next();
}

static struct ck_chunk_ctx *ctx;
static uint8_t *out;

static void roundtrip(const char *what, enum ck_codec codec, const uint8_t *raw, size_t len,
		      unsigned es, const uint8_t *ref)
{
	struct ck_chunk_desc d;
	const uint8_t *payload;
	struct ck_error err = { "" };
	int rc = ck_chunk_encode_as(ctx, codec, raw, len, es, ref, ref ? len : 0, &d, &payload);

	if (rc == -E2BIG) {
		CHECK(codec != CK_CODEC_RAW, "%s: raw refused", what);
		return;
	}
	CHECK(rc == 0, "%s %s es=%u len=%zu: encode %d", what, ck_codec_name(codec), es, len, rc);
	if (rc)
		return;
	CHECK(d.codec == codec && d.raw_len == len && d.elem_size == es, "%s: descriptor", what);
	CHECK(codec == CK_CODEC_RAW ? d.enc_len == len : d.enc_len < len, "%s: enc_len %u for %zu",
	      what, d.enc_len, len);
	memset(out, 0xa5, CK_CHUNK_MAX);
	rc = ck_chunk_decode(ctx, &d, payload, ref, ref ? len : 0, out, &err);
	CHECK(rc == 0, "%s %s es=%u len=%zu: decode %d (%s)", what, ck_codec_name(codec), es, len, rc,
	      err.msg);
	CHECK(rc || memcmp(out, raw, len) == 0, "%s %s es=%u len=%zu: bytes differ", what,
	      ck_codec_name(codec), es, len);
}

static void test_roundtrips(void)
{
	static const size_t lens[] = { 0, 1, 3, 7, 9, 100, 4097, 65536 + 5, CK_CHUNK_MAX };
	static const unsigned sizes[] = { 1, 2, 4, 8 };
	uint8_t *cur = malloc(CK_CHUNK_MAX), *ref = malloc(CK_CHUNK_MAX), *rnd = malloc(CK_CHUNK_MAX);

	SETUP(cur && ref && rnd);
	fill_weights(cur, ref, CK_CHUNK_MAX);
	fill_random(rnd, CK_CHUNK_MAX);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		for (size_t s = 0; s < 4; s++) {
			for (int c = 0; c < CK_CODEC__LOSSLESS; c++) {
				const uint8_t *r = ck_codec_needs_ref(c) ? ref : NULL;

				roundtrip("weights", c, cur, lens[l], sizes[s], r);
				roundtrip("random", c, rnd, lens[l], sizes[s], r);
			}
		}
	}
	free(cur);
	free(ref);
	free(rnd);
}

/* The automatic choice: never larger than any single codec, raw for noise,
 * a delta for a small update, planes when the reference is unrelated. */
static size_t size_as(enum ck_codec c, const uint8_t *raw, size_t len, unsigned es, const uint8_t *ref)
{
	struct ck_chunk_desc d;
	const uint8_t *p;

	return ck_chunk_encode_as(ctx, c, raw, len, es, ref, ref ? len : 0, &d, &p) ? len : d.enc_len;
}

/* The estimate samples every element of a chunk under 2 x 16384 elements,
 * and every (n / 16384)-th of a larger one: either way its counts reach
 * past 16385 (a table sized for that was read out of bounds).  A small
 * update is still found to be a delta at such sizes. */
static void test_estimate_sizes(void)
{
	static const size_t elems[] = { 16386, 32767, 114714, 262143 };
	uint8_t *cur = malloc(CK_CHUNK_MAX), *ref = malloc(CK_CHUNK_MAX);
	struct ck_chunk_desc d;
	const uint8_t *p;

	SETUP(cur && ref);
	for (size_t e = 0; e < sizeof(elems) / sizeof(elems[0]); e++) {
		size_t n = elems[e] * 4;

		fill_weights(cur, ref, n);
		SETUP(ck_chunk_encode(ctx, cur, n, 4, ref, n, &d, &p) == 0);
		CHECK(ck_codec_needs_ref(d.codec), "%zu elements, small update: a delta, got %s", elems[e],
		      ck_codec_name(d.codec));
		roundtrip("estimate sizes", d.codec, cur, n, 4, ref);
	}
	free(cur);
	free(ref);
}

static void test_choice(void)
{
	size_t n = 256 * 1024;
	uint8_t *cur = malloc(n), *ref = malloc(n), *rnd = malloc(n), *zero = calloc(1, n);
	struct ck_chunk_desc d;
	const uint8_t *p;
	struct ck_error err;

	SETUP(cur && ref && rnd && zero);
	fill_weights(cur, ref, n);
	fill_random(rnd, n);

	CHECK(ck_chunk_encode(ctx, rnd, n, 4, NULL, 0, &d, &p) == 0 && d.codec == CK_CODEC_RAW &&
	      p == rnd && d.enc_len == n, "random bytes: raw, got %s", ck_codec_name(d.codec));
	CHECK(ck_chunk_encode(ctx, zero, n, 4, NULL, 0, &d, &p) == 0 && d.codec == CK_CODEC_PLANES &&
	      d.enc_len < 1000, "zeros: planes, got %s %u", ck_codec_name(d.codec), d.enc_len);
	CHECK(d.ref_hash.hi == 0 && d.ref_hash.lo == 0, "planes: no reference hash");

	SETUP(ck_chunk_encode(ctx, cur, n, 4, ref, n, &d, &p) == 0);
	CHECK(ck_codec_needs_ref(d.codec), "small update: a delta, got %s", ck_codec_name(d.codec));
	CHECK(ck_hash128_eq(d.ref_hash, ck_chunk_hash(ref, n)), "delta: reference hash");
	{
		/* exhaustive: never larger than any codec; by estimate: close */
		struct ck_chunk_opts o = { .exhaustive = 1 };
		struct ck_chunk_ctx *ex;
		struct ck_chunk_desc de;
		uint32_t est_len = d.enc_len;

		SETUP(ck_chunk_ctx_new(&o, &ex) == 0 && ck_chunk_encode(ex, cur, n, 4, ref, n, &de, &p) == 0);
		for (int c = 0; c < CK_CODEC__LOSSLESS; c++)
			CHECK(de.enc_len <= size_as(c, cur, n, 4, ck_codec_needs_ref(c) ? ref : NULL),
			      "choice %s (%u) larger than %s", ck_codec_name(de.codec), de.enc_len, ck_codec_name(c));
		CHECK(est_len <= de.enc_len + de.enc_len / 50, "estimate chose %u bytes, exhaustive %u",
		      est_len, de.enc_len);
		ck_chunk_ctx_free(ex);
	}
	CHECK(size_as(CK_CODEC_XOR, cur, n, 4, ref) < size_as(CK_CODEC_PLANES, cur, n, 4, NULL),
	      "a small update XORs smaller than it compresses alone");
	/* the payload lives in ctx until the next call: encode again */
	SETUP(ck_chunk_encode(ctx, cur, n, 4, ref, n, &d, &p) == 0);
	CHECK(ck_chunk_decode(ctx, &d, p, ref, n, out, &err) == 0 && memcmp(out, cur, n) == 0,
	      "auto delta round trip");
	/* A reference known to hash as recorded is not hashed again ... */
	CHECK(ck_chunk_decode_known_ref(ctx, &d, p, ref, n, d.ref_hash, out, &err) == 0 &&
	      memcmp(out, cur, n) == 0, "known reference round trip");
	/* ... a known hash other than the recorded one is refused ... */
	{
		struct ck_hash128 other = d.ref_hash;

		other.lo ^= 1;
		CHECK(ck_chunk_decode_known_ref(ctx, &d, p, ref, n, other, out, &err) == -EIO,
		      "another reference's hash accepted");
	}
	/* ... and wrong bytes vouched for still never come out: the decoded
	 * chunk does not hash as recorded. */
	ref[n / 2] ^= 0x40;
	CHECK(ck_chunk_decode_known_ref(ctx, &d, p, ref, n, d.ref_hash, out, &err) == -EIO,
	      "a damaged reference vouched for decoded");
	ref[n / 2] ^= 0x40;

	/* a reference of another length is not used */
	SETUP(ck_chunk_encode(ctx, cur, n, 4, ref, n - 4, &d, &p) == 0);
	CHECK(!ck_codec_needs_ref(d.codec), "shorter reference used");
	/* an unrelated reference loses against planes */
	SETUP(ck_chunk_encode(ctx, zero, n, 4, rnd, n, &d, &p) == 0);
	CHECK(d.codec == CK_CODEC_PLANES, "unrelated reference: planes, got %s", ck_codec_name(d.codec));

	free(cur);
	free(ref);
	free(rnd);
	free(zero);
}

static void test_codec_mask(void)
{
	struct ck_chunk_opts o = { .codecs = CK_CODEC_BIT(CK_CODEC_PLANES) };
	struct ck_chunk_ctx *c2;
	size_t n = 65536;
	uint8_t *cur = malloc(n), *ref = malloc(n);
	struct ck_chunk_desc d;
	const uint8_t *p;
	struct ck_chunk_ctx *bad;

	SETUP(cur && ref && ck_chunk_ctx_new(&o, &c2) == 0);
	fill_weights(cur, ref, n);
	CHECK(ck_chunk_encode(c2, cur, n, 4, ref, n, &d, &p) == 0 && d.codec == CK_CODEC_PLANES,
	      "planes only: got %s", ck_codec_name(d.codec));
	ck_chunk_ctx_free(c2);

	o.codecs = 1u << 7;
	CHECK(ck_chunk_ctx_new(&o, &bad) == -EINVAL && !bad, "unknown codec bit accepted");
	o.codecs = 0;
	o.level = 1000;
	CHECK(ck_chunk_ctx_new(&o, &bad) == -EINVAL && !bad, "zstd level 1000 accepted");
	CHECK(ck_chunk_encode(ctx, cur, CK_CHUNK_MAX + 1, 4, NULL, 0, &d, &p) == -EINVAL, "oversized chunk");
	CHECK(ck_chunk_encode(ctx, cur, n, 3, NULL, 0, &d, &p) == -EINVAL, "element size 3");
	CHECK(ck_chunk_encode_as(ctx, CK_CODEC_XOR, cur, n, 4, NULL, 0, &d, &p) == -EINVAL,
	      "delta without reference");
	free(cur);
	free(ref);
}

/* Naive planes and SUB against the fast ones. */
static void test_planes(void)
{
	size_t n = 8 * 5000 + 5;   /* several join blocks and a partial one */
	uint8_t *src = malloc(n), *pl = malloc(n), *back = malloc(n);

	SETUP(src && pl && back);
	fill_random(src, n);
	for (unsigned es = 1; es <= 8; es *= 2) {
		size_t m = n / es;
		int ok = 1;

		ck_planes_split(src, n, es, pl);
		for (size_t i = 0; i < m; i++)
			for (unsigned k = 0; k < es; k++)
				ok &= pl[k * m + i] == src[i * es + k];
		CHECK(ok, "split es=%u", es);
		memset(back, 0, n);
		ck_planes_join(pl, n, es, back);
		CHECK(memcmp(back, src, m * es) == 0, "join es=%u", es);
	}
	free(src);
	free(pl);
	free(back);
}

/* fp32 values whose exponents repeat in no order, as in a tensor: the
 * default level's plane compressor, tuned to code them as literals, must
 * beat zstd level 1 on the same planes (the tuning is in effect), and
 * other levels must round-trip with zstd's own parameters. */
static size_t zstd1_planes(const uint8_t *raw, size_t len)
{
	size_t n = len / 4, total = 4 * 5;
	uint8_t *pl = malloc(len), *dst = malloc(ZSTD_compressBound(n));

	SETUP(pl && dst);
	ck_planes_split(raw, len, 4, pl);
	for (unsigned k = 0; k < 4; k++) {
		size_t z = ZSTD_compress(dst, ZSTD_compressBound(n), pl + k * n, n, 1);

		total += ZSTD_isError(z) || z >= n ? n : z;
	}
	free(pl);
	free(dst);
	return total;
}

static void test_plane_tuning(void)
{
	size_t n = CK_CHUNK_MAX;
	uint8_t *w = malloc(n);
	struct ck_chunk_desc d;
	const uint8_t *p;

	SETUP(w);
	for (size_t i = 0; i < n; i += 4) {
		/* log-uniform magnitudes over 2^-12..2^-4, random signs */
		double e = -12.0 + 8.0 * (double)(next() % 1000000) / 1e6;
		float v = (float)((next() & 1 ? 1.0 : -1.0) * exp2(e));

		memcpy(w + i, &v, 4);
	}
	SETUP(ck_chunk_encode_as(ctx, CK_CODEC_PLANES, w, n, 4, NULL, 0, &d, &p) == 0);
	CHECK(d.enc_len < zstd1_planes(w, n), "tuned planes %u bytes, zstd level 1 %zu", d.enc_len,
	      zstd1_planes(w, n));
	free(w);
}

static void test_other_levels(void)
{
	static const int levels[] = { 3, -5 };
	struct ck_chunk_ctx *dflt = ctx;

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		struct ck_chunk_opts o = { .level = levels[i] };

		SETUP(ck_chunk_ctx_new(&o, &ctx) == 0);
		test_roundtrips();
		ck_chunk_ctx_free(ctx);
	}
	ctx = dflt;
}

/* SUB beats XOR where a value crosses a power of two by a small step. */
static void test_sub_carry(void)
{
	size_t n = 65536;
	uint8_t *cur = malloc(n), *ref = malloc(n);

	SETUP(cur && ref);
	for (size_t i = 0; i < n; i += 4) {
		uint32_t r = 0x3c7fffffu - (uint32_t)(next() % 4), c = r + 1 + (uint32_t)(next() % 8);

		memcpy(ref + i, &r, 4);
		memcpy(cur + i, &c, 4);
	}
	CHECK(size_as(CK_CODEC_SUB, cur, n, 4, ref) < size_as(CK_CODEC_XOR, cur, n, 4, ref),
	      "carries: sub %zu, xor %zu", size_as(CK_CODEC_SUB, cur, n, 4, ref),
	      size_as(CK_CODEC_XOR, cur, n, 4, ref));
	roundtrip("carries", CK_CODEC_SUB, cur, n, 4, ref);
	roundtrip("carries", CK_CODEC_SUB, cur, n, 2, ref);
	roundtrip("carries", CK_CODEC_SUB, cur, n, 8, ref);
	free(cur);
	free(ref);
}

/* A delta decoded over its own reference buffer. */
static void test_in_place(void)
{
	size_t n = 100000;
	uint8_t *cur = malloc(n), *ref = malloc(n), *payload = malloc(n);
	struct ck_chunk_desc d;
	const uint8_t *p;
	struct ck_error err;

	SETUP(cur && ref && payload);
	fill_weights(cur, ref, n);
	for (int c = CK_CODEC_XOR; c <= CK_CODEC_SUB; c++) {
		uint8_t *buf = malloc(n);

		SETUP(buf && ck_chunk_encode_as(ctx, c, cur, n, 4, ref, n, &d, &p) == 0);
		memcpy(payload, p, d.enc_len);
		memcpy(buf, ref, n);
		CHECK(ck_chunk_decode(ctx, &d, payload, buf, n, buf, &err) == 0 && memcmp(buf, cur, n) == 0,
		      "%s in place", ck_codec_name(c));
		free(buf);
	}
	free(cur);
	free(ref);
	free(payload);
}

/* Damage: flipped payload bits, wrong descriptors and references. */
static void test_damage(void)
{
	size_t n = 65536 + 3;
	uint8_t *cur = malloc(n), *ref = malloc(n), *payload = malloc(n);
	struct ck_chunk_desc d, bad;
	const uint8_t *p;
	struct ck_error err;

	SETUP(cur && ref && payload);
	fill_weights(cur, ref, n);
	for (int c = 0; c < CK_CODEC__LOSSLESS; c++) {
		const uint8_t *r = ck_codec_needs_ref(c) ? ref : NULL;
		int wrong = 0, caught = 0;

		SETUP(ck_chunk_encode_as(ctx, c, cur, n, 4, r, r ? n : 0, &d, &p) == 0);
		memcpy(payload, p, d.enc_len);
		for (int t = 0; t < 300; t++) {
			size_t bit = next() % ((size_t)d.enc_len * 8);
			int rc;

			payload[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			memset(err.msg, 0, sizeof(err.msg));
			rc = ck_chunk_decode(ctx, &d, payload, r, r ? n : 0, out, &err);
			payload[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (rc == 0 && memcmp(out, cur, n) != 0)
				wrong++;
			if (rc == -EIO || rc == -EINVAL) {
				caught++;
				CHECK(strncmp(err.msg, "chunk: ", 7) == 0, "no reason for %d", rc);
			}
		}
		/* A flip may be harmless (a zstd window size made larger decodes
		 * the same bytes), so the promise is: an error or the right bytes.
		 * Most flips must still be caught, or the check has no teeth. */
		CHECK(wrong == 0, "%s: %d flips gave wrong bytes", ck_codec_name(c), wrong);
		CHECK(caught >= 280, "%s: only %d of 300 flips caught", ck_codec_name(c), caught);

		bad = d;
		bad.raw_hash.lo ^= 1;
		CHECK(ck_chunk_decode(ctx, &bad, payload, r, r ? n : 0, out, &err) == -EIO &&
		      strstr(err.msg, "hash"), "%s: wrong raw hash: %s", ck_codec_name(c), err.msg);
		bad = d;
		bad.enc_len = d.raw_len + 1;
		CHECK(ck_chunk_decode(ctx, &bad, payload, r, r ? n : 0, out, &err) == -EINVAL,
		      "%s: enc_len > raw_len", ck_codec_name(c));
		bad = d;
		bad.elem_size = 3;
		CHECK(ck_chunk_decode(ctx, &bad, payload, r, r ? n : 0, out, &err) == -EINVAL,
		      "%s: element size 3", ck_codec_name(c));
		bad = d;
		bad.codec = CK_CODEC__COUNT;
		CHECK(ck_chunk_decode(ctx, &bad, payload, r, r ? n : 0, out, &err) == -EINVAL,
		      "%s: unknown codec", ck_codec_name(c));
		if (c != CK_CODEC_RAW) {
			bad = d;
			bad.elem_size = 2;
			CHECK(ck_chunk_decode(ctx, &bad, payload, r, r ? n : 0, out, &err) != 0,
			      "%s: other element size decoded", ck_codec_name(c));
		}
		if (!r) {
			bad = d;
			bad.ref_hash.hi = 1;
			CHECK(ck_chunk_decode(ctx, &bad, payload, NULL, 0, out, &err) == -EINVAL,
			      "%s: reference hash on a non-delta", ck_codec_name(c));
			continue;
		}
		CHECK(ck_chunk_decode(ctx, &d, payload, NULL, 0, out, &err) == -EINVAL,
		      "%s: no reference", ck_codec_name(c));
		CHECK(ck_chunk_decode(ctx, &d, payload, ref, n - 1, out, &err) == -EINVAL,
		      "%s: short reference", ck_codec_name(c));
		ref[n / 2] ^= 0x10;
		CHECK(ck_chunk_decode(ctx, &d, payload, ref, n, out, &err) == -EIO && strstr(err.msg, "reference"),
		      "%s: wrong reference: %s", ck_codec_name(c), err.msg);
		ref[n / 2] ^= 0x10;
	}
	free(cur);
	free(ref);
	free(payload);
}

/* A chain decoded in one pass (ck_chunk_decode_unchecked: the bottom into
 * a buffer, each delta applied in place) gives the top version, as the
 * checked step-by-step decode does, for XOR, SUB and mixed chains; a
 * damaged delta or bottom cannot give the top's hash. */
#define CHAIN_VERSIONS 5

static int chain_top(struct ck_chunk_desc *d, uint8_t **pay, uint8_t *cur, struct ck_error *err)
{
	int rc = 0;

	for (int i = 0; i < CHAIN_VERSIONS && rc == 0; i++)
		rc = ck_chunk_decode_unchecked(ctx, &d[i], pay[i], i ? cur : NULL, cur, err);
	return rc;
}

static void test_one_pass(unsigned es, const enum ck_codec *codecs)
{
	const size_t n = 4 * 40000 + 3;   /* an odd tail for every element size */
	uint8_t *v[CHAIN_VERSIONS], *pay[CHAIN_VERSIONS], *cur = malloc(n);
	struct ck_chunk_desc d[CHAIN_VERSIONS];
	struct ck_error err = { "" };
	struct ck_hash128 top;
	int rc;

	SETUP(cur != NULL);
	for (int i = 0; i < CHAIN_VERSIONS; i++) {
		v[i] = malloc(n);
		pay[i] = malloc(n);
		SETUP(v[i] && pay[i]);
	}
	fill_weights(v[1], v[0], n);
	for (int i = 2; i < CHAIN_VERSIONS; i++) {
		uint8_t *scratch = malloc(n);

		SETUP(scratch != NULL);
		fill_weights(v[i], scratch, n);   /* an update's size, on top of v[i - 1] */
		for (size_t k = 0; k < n; k++)
			v[i][k] = (uint8_t)(v[i - 1][k] ^ (v[i][k] ^ scratch[k]));
		free(scratch);
	}
	/* v[0] is the bottom (planes, or raw); v[i] a delta against v[i - 1]. */
	for (int i = 0; i < CHAIN_VERSIONS; i++) {
		const uint8_t *p;

		rc = ck_chunk_encode_as(ctx, i ? codecs[i - 1] : CK_CODEC_PLANES, v[i], n, es, i ? v[i - 1] : NULL,
					i ? n : 0, &d[i], &p);
		if (rc == -E2BIG && i == 0)   /* floats as 2-byte elements: planes do not pay */
			rc = ck_chunk_encode_as(ctx, CK_CODEC_RAW, v[0], n, es, NULL, 0, &d[0], &p);
		SETUP(rc == 0);
		memcpy(pay[i], p, d[i].enc_len);
	}
	top = d[CHAIN_VERSIONS - 1].raw_hash;
	rc = chain_top(d, pay, cur, &err);
	CHECK(rc == 0 && memcmp(cur, v[CHAIN_VERSIONS - 1], n) == 0, "es=%u: one pass: %s", es, err.msg);
	/* the first delta read from a reference elsewhere (a cached bottom) */
	rc = ck_chunk_decode_unchecked(ctx, &d[1], pay[1], v[0], cur, &err);
	for (int i = 2; i < CHAIN_VERSIONS && rc == 0; i++)
		rc = ck_chunk_decode_unchecked(ctx, &d[i], pay[i], cur, cur, &err);
	CHECK(rc == 0 && memcmp(cur, v[CHAIN_VERSIONS - 1], n) == 0, "es=%u: one pass from a reference: %s", es,
	      err.msg);
	CHECK(ck_chunk_decode_unchecked(ctx, &d[1], pay[1], NULL, cur, &err) == -EINVAL,
	      "es=%u: a delta decoded without its reference", es);
	/* the same as step by step, checked */
	memcpy(cur, v[0], n);
	for (int i = 1; i < CHAIN_VERSIONS; i++)
		SETUP(ck_chunk_decode(ctx, &d[i], pay[i], cur, n, cur, &err) == 0);
	CHECK(memcmp(cur, v[CHAIN_VERSIONS - 1], n) == 0, "es=%u: step by step", es);

	/* A bit flipped in the middle delta's last plane, or in the bottom's. */
	for (int victim = 0; victim < CHAIN_VERSIONS; victim += 2) {
		pay[victim][d[victim].enc_len - 1] ^= 0x10;
		rc = chain_top(d, pay, cur, &err);
		CHECK(rc == -EINVAL || (rc == 0 && !ck_hash128_eq(ck_chunk_hash(cur, n), top)),
		      "es=%u: damaged step %d gave the top's bytes", es, victim);
		pay[victim][d[victim].enc_len - 1] ^= 0x10;
	}
	/* A plane directory pointing past the payload is refused, not read. */
	pay[2][1] = 0xff;
	pay[2][4] = 0x7f;
	CHECK(chain_top(d, pay, cur, &err) == -EINVAL, "es=%u: bad plane length applied", es);
	for (int i = 0; i < CHAIN_VERSIONS; i++) {
		free(v[i]);
		free(pay[i]);
	}
	free(cur);
}

/* Float weights on their own pick ROT over PLANES (a float's exponent
 * whole in one plane), as fp32 and as bf16 (the top halves). */
static void test_rot(void)
{
	size_t n = 256 * 1024;
	uint8_t *w = malloc(n), *ref = malloc(n), *half = malloc(n / 2);
	struct ck_chunk_desc d;
	const uint8_t *p;

	SETUP(w && ref && half);
	fill_weights(w, ref, n);
	for (size_t i = 0; i < n / 4; i++)
		memcpy(half + 2 * i, w + 4 * i + 2, 2);
	CHECK(ck_chunk_encode(ctx, w, n, 4, NULL, 0, &d, &p) == 0 && d.codec == CK_CODEC_ROT,
	      "fp32 weights: rot, got %s", ck_codec_name(d.codec));
	CHECK(d.enc_len < size_as(CK_CODEC_PLANES, w, n, 4, NULL), "fp32 rot %u not below planes", d.enc_len);
	roundtrip("fp32 rot", CK_CODEC_ROT, w, n, 4, NULL);
	CHECK(ck_chunk_encode(ctx, half, n / 2, 2, NULL, 0, &d, &p) == 0 && d.codec == CK_CODEC_ROT,
	      "bf16 weights: rot, got %s", ck_codec_name(d.codec));
	roundtrip("bf16 rot", CK_CODEC_ROT, half, n / 2, 2, NULL);
	/* single bytes: nothing to rotate across planes, never chosen */
	CHECK(ck_chunk_encode(ctx, w, n, 1, NULL, 0, &d, &p) == 0 && d.codec != CK_CODEC_ROT,
	      "bytes: rot chosen");
	free(w);
	free(ref);
	free(half);
}

/* A plane mostly of zeros is coded sparse (mode 2 in its directory entry)
 * and smaller than zstd makes it; odd plane lengths round-trip. */
static void test_sparse(void)
{
	static const size_t elems[] = { 64 * 1024, 64 * 1024 + 3, 40000 + 7 };
	uint8_t *raw = malloc(CK_CHUNK_MAX);
	struct ck_chunk_desc d;
	const uint8_t *p;

	SETUP(raw != NULL);
	for (size_t e = 0; e < sizeof(elems) / sizeof(elems[0]); e++) {
		size_t len = elems[e] * 4 + e;   /* and a tail of e bytes */
		uint32_t z;

		fill_random(raw, len);
		for (size_t i = 0; i < elems[e]; i++) {
			raw[4 * i + 3] = next() % 5 ? 0 : (uint8_t)(1 + next() % 3);
			if (i % 64 < 40)
				raw[4 * i + 3] = 0;   /* and runs of zeros */
		}
		SETUP(ck_chunk_encode_as(ctx, CK_CODEC_PLANES, raw, len, 4, NULL, 0, &d, &p) == 0);
		/* compact directory: 3-byte entries (length << 2 | mode) for these planes */
		z = (uint32_t)p[9] | (uint32_t)p[10] << 8 | (uint32_t)p[11] << 16;
		CHECK(d.compact && (z & 3) == 2, "%zu elements: plane 3 mode %u, not sparse", elems[e], z & 3);
		z >>= 2;
		CHECK(z < ZSTD_compressBound(elems[e]) && z < elems[e] / 4, "sparse plane of %u bytes", z);
		roundtrip("sparse", CK_CODEC_PLANES, raw, len, 4, NULL);
	}
	free(raw);
}

/* A one-plane payload (element size 1) of n bytes whose plane is sparse:
 * bitmap and values as given, each one zstd frame; in the framed layout
 * (5-byte directory entry, u32 bitmap length, standard frames) or the
 * compact one (w-byte entry and length, frames without their magic). */
static size_t sparse_payload(uint8_t *pay, size_t n, int compact, const uint8_t *bitmap, size_t bitmap_len,
			     const uint8_t *vals, size_t nvals, uint32_t b_override)
{
	uint8_t fb[300], fv[300];
	size_t b = ZSTD_compress(fb, sizeof(fb), bitmap, bitmap_len, 1);
	size_t v = ZSTD_compress(fv, sizeof(fv), vals, nvals, 1);
	size_t skip = compact ? 4 : 0, w = compact ? 2 : 4, head = compact ? 2 : 5, pos;
	uint32_t len, bl;

	SETUP(!ZSTD_isError(b) && !ZSTD_isError(v) && head + w + b + v < n);
	b -= skip;
	v -= skip;
	len = (uint32_t)(w + b + v);
	bl = b_override ? b_override : (uint32_t)b;
	if (compact) {
		pay[0] = (uint8_t)(len << 2 | 2);
		pay[1] = (uint8_t)(len >> 6);
	} else {
		pay[0] = 2;
		for (int i = 0; i < 4; i++)
			pay[1 + i] = (uint8_t)(len >> (8 * i));
	}
	for (size_t i = 0; i < w; i++)
		pay[head + i] = (uint8_t)(bl >> (8 * i));
	pos = head + w;
	memcpy(pay + pos, fb + skip, b);
	memcpy(pay + pos + b, fv + skip, v);
	return pos + b + v;
}

/* Malformed sparse planes are refused, never expanded, in both layouts. */
static void test_sparse_damage(void)
{
	const size_t n = 1000;   /* 125 bitmap bytes; 1000 % 8 == 0, so n - 3 for an odd end */
	uint8_t bitmap[125] = { 0 }, vals[64], pay[1000], got[1000];
	struct ck_error err = { "" };

	memset(vals, 7, sizeof(vals));
	bitmap[3] = 0x81;
	bitmap[100] = 0xff;
	for (int compact = 0; compact < 2; compact++) {
		struct ck_chunk_desc d = { .codec = CK_CODEC_PLANES, .elem_size = 1, .raw_len = (uint32_t)n,
					   .compact = compact };

		bitmap[124] = 0;
		d.enc_len = (uint32_t)sparse_payload(pay, n, compact, bitmap, sizeof(bitmap), vals, 10, 0);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == 0 && got[24] == 7 &&
		      got[31] == 7 && got[25] == 0 && got[800] == 7 && got[808] == 0,
		      "layout %d: well-formed sparse plane: %s", compact, err.msg);
		d.compact = !compact;
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == -EINVAL,
		      "layout %d: read as the other layout", compact);
		d.compact = compact;
		d.enc_len = (uint32_t)sparse_payload(pay, n, compact, bitmap, sizeof(bitmap), vals, 9, 0);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == -EINVAL,
		      "layout %d: too few values expanded", compact);
		d.enc_len = (uint32_t)sparse_payload(pay, n, compact, bitmap, sizeof(bitmap), vals, 11, 0);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == -EINVAL,
		      "layout %d: too many values expanded", compact);
		d.enc_len = (uint32_t)sparse_payload(pay, n, compact, bitmap, sizeof(bitmap) - 1, vals, 10, 0);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == -EINVAL,
		      "layout %d: short bitmap expanded", compact);
		d.enc_len = (uint32_t)sparse_payload(pay, n, compact, bitmap, sizeof(bitmap), vals, 10, 5000);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == -EINVAL,
		      "layout %d: bitmap length past the plane", compact);
		/* n - 3 bytes: the last bitmap byte's top three bits lie past the plane */
		d.raw_len = (uint32_t)(n - 3);
		bitmap[124] = 0x80;
		d.enc_len = (uint32_t)sparse_payload(pay, n, compact, bitmap, sizeof(bitmap), vals, 11, 0);
		CHECK(ck_chunk_decode_unchecked(ctx, &d, pay, NULL, got, &err) == -EINVAL && strstr(err.msg, "past"),
		      "layout %d: bitmap bits past the plane: %s", compact, err.msg);
	}
}

/* A zip local header that changed only in the CRC of the bytes behind it
 * (as torch.save writes them version after version): its SUB delta is a
 * plane of zeros but for 4 bytes, coded as runs (mode 3: a 2-byte
 * directory entry for a 64-byte plane, counts 14 and 4, the 4 bytes) in
 * 8 bytes. */
static void test_runs(void)
{
	uint8_t ref[64], cur[64];
	struct ck_chunk_desc d;
	const uint8_t *p;

	for (size_t i = 0; i < sizeof(ref); i++)
		ref[i] = (uint8_t)(i < 30 ? "PK\3\4\0\0\10\10\0\0\0\0\0\0\x11\x22\x33\x44 archive/data/0"[i] : 'F');
	memcpy(cur, ref, sizeof(cur));
	cur[14] = 0x99, cur[15] = 0x88, cur[16] = 0x77, cur[17] = 0x66;
	SETUP(ck_chunk_encode(ctx, cur, sizeof(cur), 1, ref, sizeof(ref), &d, &p) == 0);
	CHECK(d.codec == CK_CODEC_SUB || d.codec == CK_CODEC_XOR, "header delta: codec %s", ck_codec_name(d.codec));
	CHECK(d.enc_len == 8 && p[0] == (6 << 2 | 3) && p[1] == 0 && p[2] == 14 && p[3] == 4,
	      "header delta: %u bytes, entry 0x%02x", d.enc_len, p[0]);
	roundtrip("runs", CK_CODEC_SUB, cur, sizeof(cur), 1, ref);
	roundtrip("runs", CK_CODEC_XOR, cur, sizeof(cur), 1, ref);
	/* a plane equal to its reference but for two places, and one of zeros */
	cur[40] = 1;
	cur[41] = 0;
	cur[63] ^= 0x40;
	roundtrip("runs, three places", CK_CODEC_XOR, cur, sizeof(cur), 1, ref);
	SETUP(ck_chunk_encode_as(ctx, CK_CODEC_XOR, ref, sizeof(ref), 1, ref, sizeof(ref), &d, &p) == 0);
	CHECK(d.enc_len == 2 && p[0] == 3 && p[1] == 0, "a delta of zeros: %u bytes", d.enc_len);
	roundtrip("runs, zeros", CK_CODEC_XOR, ref, sizeof(ref), 1, ref);
}

/* Runs decode into a 10-byte plane (1-byte directory entries), and
 * malformed ones are refused: counts past the plane, a literal run of
 * length 0, literals past the data, a count cut short, a 4-byte count;
 * and mode 3 means nothing in a framed payload. */
static void test_runs_damage(void)
{
	static const struct {
		uint8_t pay[8];
		size_t len;
		int seven_at;          /* where the byte 7 lands; -1: refused */
	} cases[] = {
		{ { 3 << 2 | 3, 2, 1, 7 }, 4, 2 },                 /* two zeros, then 7 */
		{ { 3 << 2 | 3, 9, 1, 7 }, 4, 9 },                 /* nine zeros, then 7 */
		{ { 3 << 2 | 3, 10, 1, 7 }, 4, -1 },               /* ten zeros, then past the plane */
		{ { 2 << 2 | 3, 2, 0 }, 3, -1 },                   /* a literal run of 0 bytes */
		{ { 3 << 2 | 3, 2, 2, 7 }, 4, -1 },                /* 2 literals, 1 there */
		{ { 2 << 2 | 3, 0x80, 0x80 }, 3, -1 },             /* a count cut short */
		{ { 5 << 2 | 3, 0x80, 0x80, 0x80, 0, 1 }, 6, -1 }, /* a 4-byte count */
	};
	uint8_t got[16];
	struct ck_error err = { "" };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ck_chunk_desc d = { .codec = CK_CODEC_PLANES, .elem_size = 1, .raw_len = 10,
					   .enc_len = (uint32_t)cases[i].len, .compact = 1 };
		int at = cases[i].seven_at, rc = ck_chunk_decode_unchecked(ctx, &d, cases[i].pay, NULL, got, &err);

		CHECK(at < 0 ? rc == -EINVAL : rc == 0 && got[at] == 7 && got[at ? 0 : 1] == 0,
		      "runs case %zu: %d (%s)", i, rc, err.msg);
		d.compact = 0;
		CHECK(ck_chunk_decode_unchecked(ctx, &d, cases[i].pay, NULL, got, &err) == -EINVAL,
		      "runs case %zu in a framed payload", i);
	}
}

int main(void)
{
	out = malloc(CK_CHUNK_MAX);
	SETUP(out && ck_chunk_ctx_new(NULL, &ctx) == 0);
	test_roundtrips();
	test_choice();
	test_estimate_sizes();
	test_codec_mask();
	test_planes();
	test_plane_tuning();
	test_other_levels();
	test_sub_carry();
	test_in_place();
	test_damage();
	test_rot();
	test_sparse();
	test_sparse_damage();
	test_runs();
	test_runs_damage();
	{
		static const enum ck_codec xors[] = { CK_CODEC_XOR, CK_CODEC_XOR, CK_CODEC_XOR, CK_CODEC_XOR };
		static const enum ck_codec subs[] = { CK_CODEC_SUB, CK_CODEC_SUB, CK_CODEC_SUB, CK_CODEC_SUB };
		static const enum ck_codec mixed[] = { CK_CODEC_SUB, CK_CODEC_XOR, CK_CODEC_SUB, CK_CODEC_XOR };

		for (unsigned es = 1; es <= 8; es *= 2) {
			test_one_pass(es, xors);
			test_one_pass(es, subs);
			test_one_pass(es, mixed);
		}
	}
	ck_chunk_ctx_free(ctx);
	free(out);
	return test_result();
}
