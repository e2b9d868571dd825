/* Choosing a codec without compressing with each: the order-0 entropy of
 * every byte plane of each candidate, from sampled elements.  Byte planes
 * of float data compress to about their order-0 entropy (zstd's Huffman
 * stage does the work; matches are rare), so the candidate with the
 * smallest estimate is nearly always the one zstd makes smallest, and only
 * that one is compressed.  docs/bench.md measures what this costs in size.
 */
#include "config.h"
#include "chunk_int.h"

#include <string.h>

#define SAMPLES 16384

/* log2(x) in 16.16 fixed point for x >= 1, by repeated squaring. */
static uint64_t log2_q16(uint32_t x)
{
	int e = 31 - __builtin_clz(x);
	uint64_t z = ((uint64_t)x << 16) >> e;     /* x / 2^e in [1, 2), Q16 */
	uint64_t y = (uint64_t)e << 16;

	for (int bit = 15; bit >= 0; bit--) {
		z = (z * z) >> 16;
		if (z >= 2u << 16) {
			z >>= 1;
			y |= 1u << bit;
		}
	}
	return y;
}

/* Bits of the order-0 entropy of m samples with these counts, times n / m:
 * the estimated size in bits of a plane of n bytes. */
static uint64_t plane_bits(const uint32_t *count, uint32_t m, size_t n)
{
	uint64_t sum = 0;      /* sum of c * log2(c), Q16 */

	for (int b = 0; b < 256; b++)
		if (count[b] > 1)
			sum += count[b] * log2_q16(count[b]);
	/* H * m = m log2 m - sum c log2 c */
	return ((uint64_t)m * log2_q16(m) - sum) / m * n >> 16;
}

static uint64_t load_le(const uint8_t *p, unsigned es)
{
	uint64_t v = 0;

	for (unsigned b = 0; b < es; b++)
		v |= (uint64_t)p[b] << (8 * b);
	return v;
}

size_t ck_chunk_estimate(enum ck_codec codec, const uint8_t *raw, const uint8_t *ref, size_t len,
			 unsigned es)
{
	uint32_t c[8][256];
	size_t n = len / es, step = n > SAMPLES ? n / SAMPLES : 1;
	uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1, bits = 0;
	uint32_t m = 0;

	memset(c, 0, sizeof(c[0]) * es);
	for (size_t i = 0; i < n; i += step, m++) {
		uint64_t x = load_le(raw + i * es, es);

		if (codec == CK_CODEC_XOR) {
			x ^= load_le(ref + i * es, es);
		} else if (codec == CK_CODEC_SUB) {
			uint64_t d = (x - load_le(ref + i * es, es)) & mask;

			x = ((d << 1) ^ (0 - (d >> (8 * es - 1)))) & mask;
		} else if (codec == CK_CODEC_ROT) {
			x = ((x << 1) | (x >> (8 * es - 1))) & mask;
		}
		for (unsigned k = 0; k < es; k++)
			c[k][(x >> (8 * k)) & 0xff]++;
	}
	if (!m)
		return len;
	for (unsigned k = 0; k < es; k++)
		bits += plane_bits(c[k], m, n);
	return (size_t)(bits / 8) + es * CK_PLANE_DIRENT + len % es;
}
