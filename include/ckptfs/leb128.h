/* LEB128 counts of at most 3 bytes (values under 2^21): the lengths in
 * pack version 3 record headers and the counts of run-coded planes
 * (docs/format.md, "Pack files").  7 bits a byte, low bits first, the top
 * bit set on every byte but the last. */
#ifndef CKPTFS_LEB128_H
#define CKPTFS_LEB128_H

#include <stddef.h>
#include <stdint.h>

#define CK_LEB128_MAX 3   /* bytes */

/* Writes v (< 2^21) at p in its shortest form; returns the bytes written. */
static inline size_t ck_leb128_put(uint8_t *p, uint32_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Reads a count from p[*pos..len), advancing *pos: 1 read, 0 the bytes
 * end first, -1 malformed (longer than CK_LEB128_MAX bytes, or not in its
 * shortest form, so that every value has one encoding). */
static inline int ck_leb128_get(const uint8_t *p, size_t len, size_t *pos, uint32_t *v)
{
	*v = 0;
	for (unsigned i = 0; i < CK_LEB128_MAX; i++) {
		uint8_t b;

		if (*pos >= len)
			return 0;
		b = p[(*pos)++];
		*v |= (uint32_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			return b || i == 0 ? 1 : -1;
	}
	return -1;
}

#endif
