/* Choosing a codec without compressing with each: the order-0 entropy of
 * every byte plane of each candidate, from sampled elements.  Byte planes
 * of float data compress to about their order-0 entropy (zstd's Huffman
 * stage does the work; matches are rare), so the candidate with the
 * smallest estimate is nearly always the one zstd makes smallest, and only
 * that one is compressed.  docs/bench.md measures what this costs in size.
 */
#include "config.h"
#include "chunk_int.h"

#include <pthread.h>
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

/* log2_q16 of the counts a histogram usually holds, computed once: an
 * estimate takes the log of up to 256 counts per plane and candidate,
 * which took as long as the sampling itself.  A plane of n elements gives
 * n / (n / SAMPLES) samples, under 2 * SAMPLES; larger counts are computed. */
#define LOG2_TABLE (2 * SAMPLES)
static uint32_t log2_table[LOG2_TABLE];
static pthread_once_t log2_once = PTHREAD_ONCE_INIT;

static void log2_table_fill(void)
{
	for (uint32_t x = 1; x < LOG2_TABLE; x++)
		log2_table[x] = (uint32_t)log2_q16(x);
}

static uint64_t log2_of(uint32_t x)
{
	return x < LOG2_TABLE ? log2_table[x] : log2_q16(x);
}

/* Bits of the order-0 entropy of m samples with these counts, times n / m:
 * the estimated size in bits of a plane of n bytes. */
static uint64_t plane_bits(const uint32_t *count, uint32_t m, size_t n)
{
	uint64_t sum = 0;      /* sum of c * log2(c), Q16 */

	for (int b = 0; b < 256; b++)
		if (count[b] > 1)
			sum += (uint64_t)count[b] * log2_of(count[b]);
	/* H * m = m log2 m - sum c log2 c */
	return ((uint64_t)m * log2_of(m) - sum) / m * n >> 16;
}

/* The candidates estimated, as histogram slots. */
enum { EST_PLANES, EST_ROT, EST_XOR, EST_SUB, EST_N };

/* Histograms of the byte planes of each candidate's elements. */
typedef uint32_t est_hist[EST_N][8][256];

/* One pass over the sampled elements (every step-th of n) for every
 * candidate in want (EST_ bits): the elements are loaded once, and each
 * width has a loop of its own with the element in one register, and the
 * transforms are the encoder's own (chunk_int.h).  Returns the number of
 * samples. */
#define SAMPLE(W, T)                                                           \
static inline void count##W(uint32_t (*c)[256], T x)                           \
{                                                                              \
	_Pragma("GCC unroll 8")                                                \
	for (unsigned k = 0; k < W; k++)                                       \
		c[k][(x >> (8 * k)) & 0xff]++;                                 \
}                                                                              \
static uint32_t sample##W(const uint8_t *raw, const uint8_t *ref, size_t n,    \
			  size_t step, unsigned want, est_hist c)              \
{                                                                              \
	uint32_t m = 0;                                                        \
                                                                               \
	for (size_t i = 0; i < n; i += step, m++) {                            \
		T x = ck_le_load##W(raw + i * W);                              \
                                                                               \
		if (want & (1u << EST_PLANES))                                 \
			count##W(c[EST_PLANES], x);                            \
		if (want & (1u << EST_ROT))                                    \
			count##W(c[EST_ROT], ck_rotl##W(x));                   \
		if (want & ((1u << EST_XOR) | (1u << EST_SUB))) {              \
			T r = ck_le_load##W(ref + i * W);                      \
                                                                               \
			if (want & (1u << EST_XOR))                            \
				count##W(c[EST_XOR], (T)(x ^ r));              \
			if (want & (1u << EST_SUB))                            \
				count##W(c[EST_SUB], ck_zigzag_sub##W(x, r));  \
		}                                                              \
	}                                                                      \
	return m;                                                              \
}

SAMPLE(1, uint8_t) SAMPLE(2, uint16_t) SAMPLE(4, uint32_t) SAMPLE(8, uint64_t)

void ck_chunk_estimate(unsigned codecs, const uint8_t *raw, const uint8_t *ref, size_t len, unsigned es,
		       size_t est[CK_CODEC__COUNT])
{
	static const enum ck_codec codec_of[EST_N] = { CK_CODEC_PLANES, CK_CODEC_ROT, CK_CODEC_XOR, CK_CODEC_SUB };
	est_hist c;
	size_t n = len / es, step = n > SAMPLES ? n / SAMPLES : 1;
	unsigned want = 0;
	uint32_t m = 0;

	for (int e = 0; e < EST_N; e++) {
		est[codec_of[e]] = len;
		if ((codecs & CK_CODEC_BIT(codec_of[e])) && (ref || !ck_codec_needs_ref(codec_of[e]))) {
			want |= 1u << e;
			memset(c[e], 0, sizeof(c[e][0]) * es);
		}
	}
	switch (es) {
	case 1: m = sample1(raw, ref, n, step, want, c); break;
	case 2: m = sample2(raw, ref, n, step, want, c); break;
	case 4: m = sample4(raw, ref, n, step, want, c); break;
	case 8: m = sample8(raw, ref, n, step, want, c); break;
	default: break;
	}
	if (!m)
		return;
	pthread_once(&log2_once, log2_table_fill);
	for (int e = 0; e < EST_N; e++) {
		uint64_t bits = 0;

		if (!(want & (1u << e)))
			continue;
		for (unsigned k = 0; k < es; k++)
			bits += plane_bits(c[e][k], m, n);
		est[codec_of[e]] = (size_t)(bits / 8) + es * ck_dirent_width(len / es) + len % es;
	}
}
