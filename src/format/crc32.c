/* CRC-32 with the zlib polynomial (reflected 0xEDB88320), as zip stores it.
 *
 * Import verifies the central-directory CRC of every record, so this runs
 * over every byte of every imported checkpoint.  Two implementations:
 *  - slicing-by-16, portable: 16 independent table lookups per 16 bytes;
 *  - carry-less multiplication folding (PCLMULQDQ, x86-64), several times
 *    faster (docs/bench.md), chosen at run time when the CPU has it: four
 *    128-bit lanes folded 64 bytes at a time, then a Barrett reduction.
 *    The constants are powers of x modulo the polynomial, bit-reflected,
 *    as in Intel's white paper "Fast CRC Computation for Generic
 *    Polynomials Using PCLMULQDQ Instruction".
 * The tables and the CPU check are set up once, under pthread_once, so
 * concurrent first callers are safe.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ckptfs/torchzip.h"
#include "crc32_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CLMUL_PATH 1
#include <immintrin.h>
#endif

#define CRC32_POLY 0xEDB88320u
#define SLICES 16
#define CLMUL_MIN 64    /* the folding loop starts with four 16-byte lanes */

/* table[k][b]: CRC contribution of byte b followed by k zero bytes. */
static uint32_t table[SLICES][256];
static int have_clmul;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void crc32_init(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;

		for (int i = 0; i < 8; i++)
			c = (c >> 1) ^ (CRC32_POLY & (0u - (c & 1)));
		table[0][b] = c;
	}
	for (uint32_t b = 0; b < 256; b++)
		for (int k = 1; k < SLICES; k++)
			table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xff];
#ifdef HAVE_CLMUL_PATH
	__builtin_cpu_init();
	have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

/* Little-endian 32-bit load from any alignment (memcpy compiles to one load). */
static inline uint32_t load_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

/* Works on the inverted register c (zlib's pre/post conditioning is done by callers). */
static uint32_t crc32_slice16(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= SLICES) {
		uint32_t a = load_le32(p) ^ c;
		uint32_t b = load_le32(p + 4);
		uint32_t d = load_le32(p + 8);
		uint32_t e = load_le32(p + 12);

		c = table[15][a & 0xff] ^ table[14][(a >> 8) & 0xff] ^
		    table[13][(a >> 16) & 0xff] ^ table[12][a >> 24] ^
		    table[11][b & 0xff] ^ table[10][(b >> 8) & 0xff] ^
		    table[9][(b >> 16) & 0xff] ^ table[8][b >> 24] ^
		    table[7][d & 0xff] ^ table[6][(d >> 8) & 0xff] ^
		    table[5][(d >> 16) & 0xff] ^ table[4][d >> 24] ^
		    table[3][e & 0xff] ^ table[2][(e >> 8) & 0xff] ^
		    table[1][(e >> 16) & 0xff] ^ table[0][e >> 24];
		p += SLICES;
		n -= SLICES;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

#ifdef HAVE_CLMUL_PATH
#define LOAD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

/* acc = acc.lo * k.lo ^ acc.hi * k.hi ^ next: folds one lane 128 bits forward. */
__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i acc, __m128i k, __m128i next)
{
	__m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
	__m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);

	return _mm_xor_si128(_mm_xor_si128(hi, lo), next);
}

/* Folds n bytes (n >= 64, n % 16 == 0) into the inverted register c. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc32_fold(uint32_t c, const uint8_t *p, size_t n)
{
	/* x^(4*128+64), x^(4*128) | x^(128+64), x^128 | x^96 | mu, P (reflected) */
	const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
	const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
	const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
	const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
	const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
	__m128i x1, x2, x3, x4, t;

	x1 = _mm_xor_si128(LOAD(p), _mm_cvtsi32_si128((int)c));
	x2 = LOAD(p + 16);
	x3 = LOAD(p + 32);
	x4 = LOAD(p + 48);
	p += 64;
	n -= 64;
	while (n >= 64) {
		x1 = fold(x1, k1k2, LOAD(p));
		x2 = fold(x2, k1k2, LOAD(p + 16));
		x3 = fold(x3, k1k2, LOAD(p + 32));
		x4 = fold(x4, k1k2, LOAD(p + 48));
		p += 64;
		n -= 64;
	}
	/* Four lanes into one, then the remaining 16-byte blocks. */
	x1 = fold(x1, k3k4, x2);
	x1 = fold(x1, k3k4, x3);
	x1 = fold(x1, k3k4, x4);
	for (; n >= 16; p += 16, n -= 16)
		x1 = fold(x1, k3k4, LOAD(p));

	/* 128 -> 64 bits. */
	t = _mm_clmulepi64_si128(x1, k3k4, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
	t = _mm_srli_si128(x1, 4);
	x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00);
	x1 = _mm_xor_si128(x1, t);

	/* Barrett reduction to 32 bits. */
	t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
	t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
	x1 = _mm_xor_si128(x1, t);
	return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

size_t ck_crc32_clmul(uint32_t *crc, const void *p, size_t n)
{
	pthread_once(&init_once, crc32_init);
#ifdef HAVE_CLMUL_PATH
	if (have_clmul && n >= CLMUL_MIN) {
		size_t done = n & ~(size_t)15;

		*crc = ~crc32_fold(~*crc, p, done);
		return done;
	}
#endif
	(void)crc;
	(void)p;
	return 0;
}

uint32_t ck_crc32_tables(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&init_once, crc32_init);
	return ~crc32_slice16(~crc, p, n);
}

uint32_t ck_crc32(uint32_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	size_t done = ck_crc32_clmul(&crc, p, n);

	return ck_crc32_tables(crc, p + done, n - done);
}
