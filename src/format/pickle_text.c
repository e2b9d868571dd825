/* Arguments of the text (protocol 0) opcodes: decimal integers of any size,
 * floats, quoted Python 2 strings and raw-unicode-escape text. */
#include "config.h"

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "pickle_int.h"

/* CPython refuses to convert longer digit strings (sys.int_info.default_max_str_digits). */
#define MAX_DIGITS 4300

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static void trim(const char **s, size_t *len)
{
	while (*len && is_blank(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && is_blank((*s)[*len - 1]))
		(*len)--;
}

int pk_text_integer(const char *s, size_t len, struct ck_buf *out, const char **why)
{
	uint32_t limbs[MAX_DIGITS / 9 + 2];
	size_t nlimbs = 0, i = 0;
	int neg = 0;

	out->len = 0;
	trim(&s, &len);
	if (len && (s[0] == '-' || s[0] == '+')) {
		neg = s[0] == '-';
		i = 1;
	}
	if (i == len) {
		*why = "invalid literal for int(): no digits";
		return -1;
	}
	if (len - i > MAX_DIGITS) {
		*why = "integer text has more than 4300 digits";
		return -1;
	}
	/* magnitude = magnitude * 10^k + chunk, nine digits at a time */
	while (i < len) {
		uint32_t chunk = 0, scale = 1;
		uint64_t carry;

		for (int k = 0; k < 9 && i < len; k++, i++) {
			if (s[i] < '0' || s[i] > '9') {
				*why = "invalid literal for int()";
				return -1;
			}
			chunk = chunk * 10 + (uint32_t)(s[i] - '0');
			scale *= 10;
		}
		carry = chunk;
		for (size_t l = 0; l < nlimbs; l++) {
			uint64_t cur = (uint64_t)limbs[l] * scale + carry;

			limbs[l] = (uint32_t)cur;
			carry = cur >> 32;
		}
		if (carry)
			limbs[nlimbs++] = (uint32_t)carry;
	}
	/* Little-endian magnitude plus one byte of room for the sign bit. */
	if (ck_buf_reserve(out, nlimbs * 4 + 1)) {
		*why = "out of memory";
		return -1;
	}
	for (size_t l = 0; l < nlimbs; l++)
		for (int b = 0; b < 4; b++)
			out->data[out->len++] = (uint8_t)(limbs[l] >> (8 * b));
	out->data[out->len++] = 0;
	if (neg) {
		unsigned carry = 1;

		for (size_t b = 0; b < out->len; b++) {
			unsigned v = (uint8_t)~out->data[b] + carry;

			out->data[b] = (uint8_t)v;
			carry = v >> 8;
		}
	}
	out->len = pk_bytes_minimal_len(out->data, out->len);
	return 0;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

int pk_text_float(const char *s, size_t len, double *out, const char **why)
{
	char buf[128], *copy = buf, *end;
	int rc = 0;

	trim(&s, &len);
	if (!len || memchr(s, 'x', len) || memchr(s, 'X', len) || memchr(s, '\0', len)) {
		*why = "could not convert string to float";
		return -1;
	}
	if (len >= sizeof(buf)) {
		copy = malloc(len + 1);
		if (!copy) {
			*why = "out of memory";
			return -1;
		}
	}
	memcpy(copy, s, len);
	copy[len] = '\0';
	/* Pickles always use '.', whatever locale the process runs in. */
	pthread_once(&c_locale_once, c_locale_init);
	*out = c_locale ? strtod_l(copy, &end, c_locale) : strtod(copy, &end);
	if (end != copy + len) {
		*why = "could not convert string to float";
		rc = -1;
	}
	if (copy != buf)
		free(copy);
	return rc;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int pk_text_string(const char *s, size_t len, struct ck_buf *out, const char **why)
{
	out->len = 0;
	if (len < 2 || s[0] != s[len - 1] || (s[0] != '\'' && s[0] != '"')) {
		*why = "the STRING opcode argument must be quoted";
		return -1;
	}
	s++;
	len -= 2;
	/* The decoded text is never longer than the escaped one. */
	if (ck_buf_reserve(out, len)) {
		*why = "out of memory";
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		int v;

		if (c != '\\') {
			out->data[out->len++] = (uint8_t)c;
			continue;
		}
		if (++i == len) {
			*why = "trailing \\ in string";
			return -1;
		}
		c = s[i];
		switch (c) {
		case '\n': continue;
		case '\\': v = '\\'; break;
		case '\'': v = '\''; break;
		case '"': v = '"'; break;
		case 'a': v = '\a'; break;
		case 'b': v = '\b'; break;
		case 'f': v = '\f'; break;
		case 'n': v = '\n'; break;
		case 'r': v = '\r'; break;
		case 't': v = '\t'; break;
		case 'v': v = '\v'; break;
		case 'x':
			if (len - i < 3 || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0) {
				*why = "invalid \\x escape";
				return -1;
			}
			v = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
			i += 2;
			break;
		default:
			if (c >= '0' && c <= '7') {
				v = c - '0';
				for (int k = 0; k < 2 && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
					v = v * 8 + (s[++i] - '0');
				v &= 0xff;
			} else {
				/* Unknown escapes stay as written. */
				out->data[out->len++] = '\\';
				v = (unsigned char)c;
			}
			break;
		}
		out->data[out->len++] = (uint8_t)v;
	}
	return 0;
}

static size_t utf8_put(uint8_t *p, uint32_t cp)
{
	if (cp < 0x80) {
		p[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		p[0] = (uint8_t)(0xc0 | cp >> 6);
		p[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		p[0] = (uint8_t)(0xe0 | cp >> 12);
		p[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		p[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	p[0] = (uint8_t)(0xf0 | cp >> 18);
	p[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
	p[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	p[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

int pk_text_unicode(const char *s, size_t len, struct ck_buf *out, const char **why)
{
	out->len = 0;
	/* Each input byte makes at most two output bytes (an escape of n
	 * characters makes at most four). */
	if (len > (SIZE_MAX - 4) / 2 || ck_buf_reserve(out, 2 * len + 4)) {
		*why = "out of memory";
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		uint32_t cp = 0;
		int count;

		if (c != '\\' || i + 1 == len || (s[i + 1] != 'u' && s[i + 1] != 'U')) {
			out->len += utf8_put(out->data + out->len, c);
			if (c == '\\' && i + 1 < len) {
				/* A backslash escapes nothing but u/U, and takes the next byte along. */
				out->len += utf8_put(out->data + out->len, (unsigned char)s[++i]);
			}
			continue;
		}
		count = s[i + 1] == 'u' ? 4 : 8;
		if (len - (i + 2) < (size_t)count) {
			*why = count == 4 ? "truncated \\uXXXX escape" : "truncated \\UXXXXXXXX escape";
			return -1;
		}
		for (int k = 0; k < count; k++) {
			int h = hexval(s[i + 2 + k]);

			if (h < 0) {
				*why = count == 4 ? "truncated \\uXXXX escape" : "truncated \\UXXXXXXXX escape";
				return -1;
			}
			cp = cp << 4 | (uint32_t)h;
		}
		if (cp > 0x10ffff) {
			*why = "\\Uxxxxxxxx out of range";
			return -1;
		}
		out->len += utf8_put(out->data + out->len, cp);
		i += 1 + (size_t)count;
	}
	return 0;
}

int pk_utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (len - i <= n)
			return 0;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}
