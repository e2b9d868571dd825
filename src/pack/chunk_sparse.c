/* Sparse byte planes: a bitmap of the nonzero bytes and those bytes.
 *
 * The top plane of a delta between two versions of fp32 or bf16 state is
 * mostly zeros with nonzero bytes scattered among them.  zstd codes such a
 * plane as literals (its zero runs are too short for matches), and its
 * Huffman stage spends at least one bit on every zero; a bitmap spends one
 * bit on every byte before zstd, and compresses where zeros cluster.  The
 * encoder keeps whichever form is smaller (chunk_encode.c).
 *
 * Expanding runs on every byte served from such a plane, so it goes eight
 * bytes (one bitmap byte) at a time, with no branch per byte.
 */
#include "config.h"
#include "chunk_int.h"

#include <string.h>

/* Eight bytes at a time: the top bit of each byte of t is set when that
 * byte of w is nonzero ((w & 0x7f..) + 0x7f.. carries into it, or w has
 * it), and one multiply gathers those eight bits into a bitmap byte (byte
 * k to bit k).  Eight zero bytes cost one test, one nonzero byte one
 * copy; otherwise each byte is stored at vals[m] and m advances past the
 * nonzero ones, with no branch per byte: a loop over the set bits
 * mispredicts on the planes the sparse form is tried on, 2 to 50 %
 * nonzero bytes, and runs at half the speed (docs/bench.md).  vals takes
 * up to 7 bytes of slack past the last value. */
#define LOW7 0x7f7f7f7f7f7f7f7full
#define HIGH 0x8080808080808080ull
#define GATHER 0x0102040810204080ull

size_t ck_sparse_split(const uint8_t *plane, size_t n, uint8_t *bitmap, uint8_t *vals)
{
	size_t m = 0, i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w = ck_le_load8(plane + i), t;
		unsigned bits;

		if (!w) {
			bitmap[i / 8] = 0;
			continue;
		}
		t = (((w & LOW7) + LOW7) | w) & HIGH;
		bits = (unsigned)(((t >> 7) * GATHER) >> 56);
		bitmap[i / 8] = (uint8_t)bits;
		if ((bits & (bits - 1)) == 0) {
			vals[m++] = plane[i + (unsigned)__builtin_ctz(bits)];   /* one nonzero byte */
			continue;
		}
#pragma GCC unroll 8
		for (unsigned k = 0; k < 8; k++) {
			vals[m] = plane[i + k];
			m += (bits >> k) & 1;
		}
	}
	if (i < n) {
		unsigned bits = 0;

		for (size_t k = 0; i + k < n; k++) {
			unsigned nz = plane[i + k] != 0;

			vals[m] = plane[i + k];
			m += nz;
			bits |= nz << k;
		}
		bitmap[i / 8] = (uint8_t)bits;
	}
	return m;
}

/* Set bits of x, inline: without -mpopcnt (not in the x86-64 baseline)
 * __builtin_popcountll is a call into libgcc, a few percent of a lossy
 * chain's decode. */
static inline unsigned popcount64(uint64_t x)
{
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

size_t ck_sparse_count(const uint8_t *bitmap, size_t n)
{
	size_t bytes = (n + 7) / 8, m = 0, i = 0;

	for (; i + 8 <= bytes; i += 8) {
		uint64_t w;

		memcpy(&w, bitmap + i, 8);
		m += popcount64(w);
	}
	for (; i < bytes; i++)
		m += popcount64(bitmap[i]);
	return m;
}

void ck_sparse_expand(const uint8_t *bitmap, const uint8_t *vals, size_t n, uint8_t *out)
{
	size_t i = 0, j = 0;

	for (; i + 8 <= n; i += 8) {
		unsigned bits = bitmap[i / 8];

		if (bits == 0) {
			memset(out + i, 0, 8);
			continue;
		}
		if (bits == 0xff) {
			memcpy(out + i, vals + j, 8);
			j += 8;
			continue;
		}
		for (unsigned k = 0; k < 8; k++) {
			unsigned nz = (bits >> k) & 1;

			/* vals[j] is the next nonzero byte, or slack past the last */
			out[i + k] = (uint8_t)(vals[j] & (0u - nz));
			j += nz;
		}
	}
	for (unsigned k = 0; i < n; i++, k++) {
		unsigned nz = (bitmap[i / 8] >> k) & 1;

		out[i] = (uint8_t)(vals[j] & (0u - nz));
		j += nz;
	}
}
