/* Strict JSON reader (RFC 8259) for untrusted headers and config files.
 *
 * The whole tree lives in an arena owned by the document: one free() per
 * block instead of one per value, and a hard cap (JS_MAX_TREE) on what a
 * hostile document can make us allocate.  Members of an array or object are
 * collected on a scratch stack while they are parsed and copied into the
 * arena once their count is known.  Strings are scanned twice: once to find
 * the closing quote (which bounds the decoded length), once to decode and
 * validate straight into their final place.
 */
#include "config.h"

#include <errno.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "utf8.h"

/* ---- arena ---------------------------------------------------------------- */

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

struct js_doc {
	struct js_value *root;
	struct arena_block *blocks;
	size_t total;            /* bytes of all blocks, held under JS_MAX_TREE */
	int over_limit;          /* the last failed allocation hit JS_MAX_TREE */
};

#define ARENA_MIN_BLOCK 4096
#define ARENA_MAX_BLOCK (1u << 20)

static void *arena_alloc(struct js_doc *doc, size_t n)
{
	struct arena_block *b = doc->blocks;
	const size_t align = alignof(max_align_t);
	size_t cap;
	void *p;

	n = (n + align - 1) & ~(align - 1);
	if (!n)
		n = align;
	if (b && b->cap - b->used >= n) {
		p = b->data + b->used;
		b->used += n;
		return p;
	}
	/* Blocks grow with the document; a large request gets a block of its own. */
	cap = b ? b->cap * 2 : ARENA_MIN_BLOCK;
	if (cap > ARENA_MAX_BLOCK)
		cap = ARENA_MAX_BLOCK;
	if (cap < n)
		cap = n;
	if (cap > JS_MAX_TREE - doc->total) {
		doc->over_limit = 1;
		return NULL;
	}
	b = malloc(sizeof(*b) + cap);
	if (!b)
		return NULL;
	b->cap = cap;
	b->used = n;
	doc->total += cap;
	if (doc->blocks && cap == n && doc->blocks->cap - doc->blocks->used > 0) {
		/* Keep filling the current block; slot the dedicated one behind it. */
		b->next = doc->blocks->next;
		doc->blocks->next = b;
	} else {
		b->next = doc->blocks;
		doc->blocks = b;
	}
	return b->data;
}

/* ---- parser --------------------------------------------------------------- */

struct parser {
	const uint8_t *text;
	size_t len, pos;
	struct js_doc *doc;
	struct ck_error *err;
	int depth;
	/* members of the open arrays/objects, innermost last */
	struct js_value **vals;
	char **keys;
	size_t top, cap;
};

static int fail_at(struct parser *ps, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *ps, size_t at, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ck_fail(ps->err, EINVAL, "JSON at offset %zu: %s", at, what);
}

static int fail_alloc(struct parser *ps)
{
	if (ps->doc->over_limit)
		return ck_fail(ps->err, E2BIG, "JSON at offset %zu: document needs more than %zu bytes of memory",
			       ps->pos, JS_MAX_TREE);
	return ck_fail(ps->err, ENOMEM, "JSON at offset %zu: out of memory", ps->pos);
}

/* Describes the byte at pos for an error message. */
static int fail_unexpected(struct parser *ps, const char *expected)
{
	uint8_t c;

	if (ps->pos >= ps->len)
		return fail_at(ps, ps->pos, "unexpected end of input, expected %s", expected);
	c = ps->text[ps->pos];
	if (c >= 0x21 && c <= 0x7e)
		return fail_at(ps, ps->pos, "unexpected '%c', expected %s", c, expected);
	return fail_at(ps, ps->pos, "unexpected byte 0x%02x, expected %s", c, expected);
}

static void skip_ws(struct parser *ps)
{
	while (ps->pos < ps->len) {
		uint8_t c = ps->text[ps->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		ps->pos++;
	}
}

static int peek(const struct parser *ps)
{
	return ps->pos < ps->len ? ps->text[ps->pos] : -1;
}

static struct js_value *new_value(struct parser *ps, enum js_kind kind)
{
	struct js_value *v = arena_alloc(ps->doc, sizeof(*v));

	if (v) {
		memset(v, 0, sizeof(*v));
		v->kind = kind;
	}
	return v;
}

static int push_member(struct parser *ps, char *key, struct js_value *val)
{
	if (ps->top == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct js_value **vals = realloc(ps->vals, cap * sizeof(*vals));
		char **keys;

		if (!vals)
			return -ENOMEM;
		ps->vals = vals;
		keys = realloc(ps->keys, cap * sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		ps->keys = keys;
		ps->cap = cap;
	}
	ps->keys[ps->top] = key;
	ps->vals[ps->top++] = val;
	return 0;
}

static int hex4(const uint8_t *p, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		uint8_t c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* \uXXXX at s[i] (the backslash); a high surrogate must be followed by an
 * escaped low one.  Returns the code point and advances *i past the escape(s). */
static int unicode_escape(struct parser *ps, const uint8_t *s, size_t end, size_t *i, uint32_t *cp)
{
	size_t at = *i;
	uint32_t hi, lo;

	if (end - at < 6 || hex4(s + at + 2, &hi))
		return fail_at(ps, at, "\\u must be followed by four hex digits");
	*i = at + 6;
	if (hi >= 0xdc00 && hi <= 0xdfff)
		return fail_at(ps, at, "lone low surrogate \\u%04x", hi);
	if (hi < 0xd800 || hi > 0xdbff) {
		*cp = hi;
		return 0;
	}
	if (end - *i < 6 || s[*i] != '\\' || s[*i + 1] != 'u' || hex4(s + *i + 2, &lo) ||
	    lo < 0xdc00 || lo > 0xdfff)
		return fail_at(ps, at, "high surrogate \\u%04x not followed by a low surrogate", hi);
	*i += 6;
	*cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
	return 0;
}

/* Decodes the string literal at pos (on its opening quote). */
static int parse_string(struct parser *ps, int is_key, char **out, size_t *outlen)
{
	const uint8_t *s = ps->text;
	size_t start = ps->pos + 1, end = start, o = 0;
	uint8_t *dst;

	/* Pass 1: the closing quote.  Decoding only shrinks, so end - start bounds the result. */
	while (end < ps->len && s[end] != '"')
		end += s[end] == '\\' ? 2 : 1;
	if (end >= ps->len)
		return fail_at(ps, ps->pos, "unterminated string");
	dst = arena_alloc(ps->doc, end - start + 1);
	if (!dst)
		return fail_alloc(ps);

	/* Pass 2: decode and validate. */
	for (size_t i = start; i < end;) {
		uint8_t c = s[i];
		uint32_t cp = 0;
		size_t n;
		int rc;

		if (c < 0x20)
			return fail_at(ps, i, "control character 0x%02x in string", c);
		if (c >= 0x80) {
			n = utf8_decode(s + i, end - i, &cp);
			if (!n)
				return fail_at(ps, i, "invalid UTF-8 in string");
			memcpy(dst + o, s + i, n);
			o += n;
			i += n;
			continue;
		}
		if (c != '\\') {
			dst[o++] = c;
			i++;
			continue;
		}
		switch (s[i + 1]) {
		case '"': dst[o++] = '"'; break;
		case '\\': dst[o++] = '\\'; break;
		case '/': dst[o++] = '/'; break;
		case 'b': dst[o++] = '\b'; break;
		case 'f': dst[o++] = '\f'; break;
		case 'n': dst[o++] = '\n'; break;
		case 'r': dst[o++] = '\r'; break;
		case 't': dst[o++] = '\t'; break;
		case 'u':
			rc = unicode_escape(ps, s, end, &i, &cp);
			if (rc)
				return rc;
			if (cp == 0 && is_key)
				return fail_at(ps, i - 6, "object key contains \\u0000");
			o += utf8_encode(cp, dst + o);
			continue;
		default:
			return fail_at(ps, i, "invalid escape \\%c", s[i + 1] >= 0x21 && s[i + 1] <= 0x7e ? s[i + 1] : '?');
		}
		i += 2;
	}
	dst[o] = 0;
	*out = (char *)dst;
	*outlen = o;
	ps->pos = end + 1;
	return 0;
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int parse_number(struct parser *ps, struct js_value **out)
{
	size_t start = ps->pos;
	struct js_value *v;

	if (peek(ps) == '-')
		ps->pos++;
	if (peek(ps) == '0') {
		ps->pos++;
	} else if (is_digit(peek(ps))) {
		while (is_digit(peek(ps)))
			ps->pos++;
	} else {
		return fail_unexpected(ps, "a digit");
	}
	if (peek(ps) == '.') {
		ps->pos++;
		if (!is_digit(peek(ps)))
			return fail_unexpected(ps, "a digit after '.'");
		while (is_digit(peek(ps)))
			ps->pos++;
	}
	if (peek(ps) == 'e' || peek(ps) == 'E') {
		ps->pos++;
		if (peek(ps) == '+' || peek(ps) == '-')
			ps->pos++;
		if (!is_digit(peek(ps)))
			return fail_unexpected(ps, "a digit in the exponent");
		while (is_digit(peek(ps)))
			ps->pos++;
	}
	v = new_value(ps, JS_NUMBER);
	if (!v || !(v->str = arena_alloc(ps->doc, ps->pos - start + 1)))
		return fail_alloc(ps);
	v->len = ps->pos - start;
	memcpy(v->str, ps->text + start, v->len);
	v->str[v->len] = 0;
	*out = v;
	return 0;
}

static int parse_literal(struct parser *ps, struct js_value **out)
{
	static const struct { const char *word; enum js_kind kind; int b; } words[] = {
		{ "true", JS_BOOL, 1 }, { "false", JS_BOOL, 0 }, { "null", JS_NULL, 0 },
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t n = strlen(words[i].word);

		if (ps->len - ps->pos >= n && !memcmp(ps->text + ps->pos, words[i].word, n)) {
			struct js_value *v = new_value(ps, words[i].kind);

			if (!v)
				return fail_alloc(ps);
			v->b = words[i].b;
			ps->pos += n;
			*out = v;
			return 0;
		}
	}
	return fail_unexpected(ps, "a value");
}

static int parse_value(struct parser *ps, struct js_value **out);

/* Moves the members pushed since base into v (arena copies), popping them. */
static int take_members(struct parser *ps, struct js_value *v, size_t base, int with_keys)
{
	size_t n = ps->top - base;

	v->n = n;
	if (!n)
		return 0;
	v->vals = arena_alloc(ps->doc, n * sizeof(*v->vals));
	if (!v->vals)
		return fail_alloc(ps);
	memcpy(v->vals, ps->vals + base, n * sizeof(*v->vals));
	if (with_keys) {
		v->keys = arena_alloc(ps->doc, n * sizeof(*v->keys));
		if (!v->keys)
			return fail_alloc(ps);
		memcpy(v->keys, ps->keys + base, n * sizeof(*v->keys));
	}
	ps->top = base;
	return 0;
}

/* Array or object at pos (on '[' or '{'). */
static int parse_container(struct parser *ps, struct js_value **out)
{
	int is_object = peek(ps) == '{';
	int close = is_object ? '}' : ']';
	size_t base = ps->top;
	struct js_value *v;
	int rc;

	if (++ps->depth > JS_MAX_DEPTH)
		return ck_fail(ps->err, E2BIG, "JSON at offset %zu: nested deeper than %d levels",
			       ps->pos, JS_MAX_DEPTH);
	v = new_value(ps, is_object ? JS_OBJECT : JS_ARRAY);
	if (!v)
		return fail_alloc(ps);
	ps->pos++;
	skip_ws(ps);
	if (peek(ps) == close) {
		ps->pos++;
	} else {
		for (;;) {
			char *key = NULL;
			size_t klen;
			struct js_value *member;

			if (is_object) {
				if (peek(ps) != '"')
					return fail_unexpected(ps, "a string key");
				rc = parse_string(ps, 1, &key, &klen);
				if (rc)
					return rc;
				skip_ws(ps);
				if (peek(ps) != ':')
					return fail_unexpected(ps, "':'");
				ps->pos++;
				skip_ws(ps);
			}
			rc = parse_value(ps, &member);
			if (rc)
				return rc;
			if (push_member(ps, key, member))
				return fail_alloc(ps);
			skip_ws(ps);
			if (peek(ps) == close) {
				ps->pos++;
				break;
			}
			if (peek(ps) != ',')
				return fail_unexpected(ps, is_object ? "',' or '}'" : "',' or ']'");
			ps->pos++;
			skip_ws(ps);
		}
	}
	rc = take_members(ps, v, base, is_object);
	if (rc)
		return rc;
	ps->depth--;
	*out = v;
	return 0;
}

static int parse_value(struct parser *ps, struct js_value **out)
{
	int c = peek(ps);
	struct js_value *v;
	int rc;

	switch (c) {
	case '{':
	case '[':
		return parse_container(ps, out);
	case '"':
		v = new_value(ps, JS_STRING);
		if (!v)
			return fail_alloc(ps);
		rc = parse_string(ps, 0, &v->str, &v->len);
		if (rc)
			return rc;
		*out = v;
		return 0;
	case '-':
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		return parse_number(ps, out);
	default:
		return parse_literal(ps, out);
	}
}

int js_parse(const char *text, size_t len, struct js_doc **out, struct ck_error *err)
{
	struct parser ps = { .text = (const uint8_t *)text, .len = len, .err = err };
	int rc;

	*out = NULL;
	if (len > JS_MAX_TEXT)
		return ck_fail(err, E2BIG, "JSON text of %zu bytes exceeds the %zu-byte limit", len, JS_MAX_TEXT);
	ps.doc = calloc(1, sizeof(*ps.doc));
	if (!ps.doc)
		return ck_fail(err, ENOMEM, "JSON: out of memory");
	skip_ws(&ps);
	rc = parse_value(&ps, &ps.doc->root);
	if (!rc) {
		skip_ws(&ps);
		if (ps.pos != ps.len)
			rc = fail_unexpected(&ps, "end of input after the value");
	}
	free(ps.vals);
	free(ps.keys);
	if (rc) {
		js_free(ps.doc);
		return rc;
	}
	*out = ps.doc;
	return 0;
}

struct js_value *js_root(const struct js_doc *doc)
{
	return doc ? doc->root : NULL;
}

void js_free(struct js_doc *doc)
{
	struct arena_block *b, *next;

	if (!doc)
		return;
	for (b = doc->blocks; b; b = next) {
		next = b->next;
		free(b);
	}
	free(doc);
}

const struct js_value *js_get(const struct js_value *obj, const char *key)
{
	if (!obj || obj->kind != JS_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return obj->vals[i];
	return NULL;
}

int js_as_u64(const struct js_value *v, uint64_t *out)
{
	uint64_t x = 0;

	if (!v || v->kind != JS_NUMBER || !v->len)
		return -EINVAL;
	for (size_t i = 0; i < v->len; i++) {
		unsigned d;

		if (!is_digit(v->str[i]))
			return -EINVAL;     /* sign, fraction or exponent */
		d = (unsigned)(v->str[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}
