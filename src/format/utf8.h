/* Strict UTF-8 decoding (RFC 3629), shared by the JSON reader and writers. */
#ifndef CKPTFS_FORMAT_UTF8_H
#define CKPTFS_FORMAT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one code point from p[0..n), n >= 1.  Returns its length (1-4) or
 * 0 when the bytes are not valid UTF-8: overlong forms, surrogates
 * (U+D800..U+DFFF), code points above U+10FFFF and truncated sequences are
 * all refused, as Rust's str::from_utf8 and Python's decoder refuse them. */
static inline size_t utf8_decode(const uint8_t *p, size_t n, uint32_t *cp)
{
	uint8_t c = p[0];
	size_t len;
	uint32_t v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

/* Appends the UTF-8 encoding of cp (a valid scalar value) at out; returns its length. */
static inline size_t utf8_encode(uint32_t cp, uint8_t *out)
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xc0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xe0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

#endif
