/* JSON writers: string literals, documents built from C values (jw_*:
 * the CLI's --json output and the provenance attribute), and writers that
 * reproduce other tools' bytes: serde_json's compact form (safetensors
 * headers) and Python's json.dumps (index files, trainer state).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "utf8.h"

/* The two-character escapes both serde_json and Python use, else 0. */
static char short_escape(uint8_t c)
{
	switch (c) {
	case '"': return '"';
	case '\\': return '\\';
	case '\b': return 'b';
	case '\f': return 'f';
	case '\n': return 'n';
	case '\r': return 'r';
	case '\t': return 't';
	default: return 0;
	}
}

static int put_u_escape(struct ck_buf *b, uint32_t unit)
{
	return ck_buf_printf(b, "\\u%04x", unit);
}

int js_put_string(struct ck_buf *b, const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t run = 0;        /* bytes copied verbatim, flushed in one put */
	int rc = ck_buf_putc(b, '"');

	for (size_t i = 0; !rc && i < len;) {
		char e = short_escape(p[i]);
		uint32_t cp;
		size_t n = 1;

		if (!e && p[i] >= 0x20 && (p[i] < 0x80 || (n = utf8_decode(p + i, len - i, &cp)) != 0)) {
			run += n;
			i += n;
			continue;
		}
		rc = ck_buf_put(b, p + i - run, run);
		run = 0;
		if (!rc && e)
			rc = ck_buf_printf(b, "\\%c", e);
		else if (!rc)
			rc = put_u_escape(b, p[i] < 0x20 ? p[i] : 0xdc00u + p[i]);
		i++;
	}
	if (!rc)
		rc = ck_buf_put(b, p + len - run, run);
	if (!rc)
		rc = ck_buf_putc(b, '"');
	return rc;
}

int js_put_string_ascii(struct ck_buf *b, const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s;
	int rc = ck_buf_putc(b, '"');

	for (size_t i = 0; !rc && i < len;) {
		uint32_t cp;
		size_t n = utf8_decode(p + i, len - i, &cp);
		char e;

		if (!n)
			return -EINVAL;
		i += n;
		e = cp < 0x80 ? short_escape((uint8_t)cp) : 0;
		if (e)
			rc = ck_buf_printf(b, "\\%c", e);
		else if (cp >= 0x20 && cp <= 0x7e)
			rc = ck_buf_putc(b, (uint8_t)cp);
		else if (cp < 0x10000)
			rc = put_u_escape(b, cp);
		else if (!(rc = put_u_escape(b, 0xd800 + ((cp - 0x10000) >> 10))))
			rc = put_u_escape(b, 0xdc00 + ((cp - 0x10000) & 0x3ff));
	}
	if (!rc)
		rc = ck_buf_putc(b, '"');
	return rc;
}

static int put_scalar(struct ck_buf *b, const struct js_value *v, int ascii)
{
	switch (v->kind) {
	case JS_NULL:
		return ck_buf_puts(b, "null");
	case JS_BOOL:
		return ck_buf_puts(b, v->b ? "true" : "false");
	case JS_NUMBER:
		return ck_buf_put(b, v->str, v->len);
	case JS_STRING:
		return ascii ? js_put_string_ascii(b, v->str, v->len) : js_put_string(b, v->str, v->len);
	default:
		return -EINVAL;
	}
}

int js_write_compact(struct ck_buf *b, const struct js_value *v)
{
	int obj, rc;

	if (v->kind != JS_ARRAY && v->kind != JS_OBJECT)
		return put_scalar(b, v, 0);
	obj = v->kind == JS_OBJECT;
	rc = ck_buf_putc(b, obj ? '{' : '[');
	for (size_t i = 0; !rc && i < v->n; i++) {
		if (i)
			rc = ck_buf_putc(b, ',');
		if (!rc && obj) {
			rc = js_put_string(b, v->keys[i], strlen(v->keys[i]));
			if (!rc)
				rc = ck_buf_putc(b, ':');
		}
		if (!rc)
			rc = js_write_compact(b, v->vals[i]);
	}
	return rc ? rc : ck_buf_putc(b, obj ? '}' : ']');
}

static int newline_indent(struct ck_buf *b, int spaces)
{
	int rc = ck_buf_putc(b, '\n');

	while (!rc && spaces-- > 0)
		rc = ck_buf_putc(b, ' ');
	return rc;
}

struct member_ref {
	const char *key;
	size_t index;
};

/* Keys by code point (== UTF-8 byte order); equal keys keep document order,
 * as Python's stable sorted() does. */
static int cmp_member(const void *a, const void *b)
{
	const struct member_ref *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Member order: document order, or sorted keys. */
static int member_order(const struct js_value *v, int sort_keys, struct member_ref **out)
{
	struct member_ref *order = malloc((v->n ? v->n : 1) * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		order[i].key = v->kind == JS_OBJECT ? v->keys[i] : NULL;
		order[i].index = i;
	}
	if (sort_keys && v->kind == JS_OBJECT)
		qsort(order, v->n, sizeof(*order), cmp_member);
	*out = order;
	return 0;
}

int js_write_python(struct ck_buf *b, const struct js_value *v, int indent, int level,
		    int sort_keys)
{
	struct member_ref *order;
	int obj, rc;

	if (v->kind != JS_ARRAY && v->kind != JS_OBJECT)
		return put_scalar(b, v, 1);
	obj = v->kind == JS_OBJECT;
	if (!v->n)
		return ck_buf_puts(b, obj ? "{}" : "[]");
	rc = member_order(v, sort_keys, &order);
	if (rc)
		return rc;
	rc = ck_buf_putc(b, obj ? '{' : '[');
	for (size_t i = 0; !rc && i < v->n; i++) {
		size_t m = order[i].index;

		if (i)
			rc = ck_buf_putc(b, ',');
		if (!rc)
			rc = newline_indent(b, indent * (level + 1));
		if (!rc && obj) {
			rc = js_put_string_ascii(b, v->keys[m], strlen(v->keys[m]));
			if (!rc)
				rc = ck_buf_puts(b, ": ");
		}
		if (!rc)
			rc = js_write_python(b, v->vals[m], indent, level + 1, sort_keys);
	}
	if (!rc)
		rc = newline_indent(b, indent * level);
	if (!rc)
		rc = ck_buf_putc(b, obj ? '}' : ']');
	free(order);
	return rc;
}

/* ---- documents built from C values ---- */

/* The comma before a value or key that is not the first of its container. */
static void jw_sep(struct jw *w)
{
	if (w->err)
		return;
	if (w->after_key) {
		w->after_key = 0;
		return;
	}
	if (w->depth > 0) {
		if (!w->first[w->depth - 1] && ck_buf_puts(&w->b, w->spaced ? ", " : ",") < 0)
			w->err = -ENOMEM;
		w->first[w->depth - 1] = 0;
	}
}

static void jw_open(struct jw *w, char c)
{
	jw_sep(w);
	if (w->err)
		return;
	if (w->depth == JW_MAX_DEPTH) {
		w->err = -E2BIG;
		return;
	}
	if (ck_buf_putc(&w->b, (uint8_t)c) < 0)
		w->err = -ENOMEM;
	w->first[w->depth++] = 1;
}

static void jw_close(struct jw *w, char c)
{
	if (w->err)
		return;
	w->depth--;
	if (ck_buf_putc(&w->b, (uint8_t)c) < 0)
		w->err = -ENOMEM;
}

void jw_begin_obj(struct jw *w) { jw_open(w, '{'); }
void jw_begin_arr(struct jw *w) { jw_open(w, '['); }
void jw_end_obj(struct jw *w) { jw_close(w, '}'); }
void jw_end_arr(struct jw *w) { jw_close(w, ']'); }

void jw_key(struct jw *w, const char *key)
{
	jw_sep(w);
	if (!w->err && (js_put_string(&w->b, key, strlen(key)) < 0 ||
			ck_buf_puts(&w->b, w->spaced ? ": " : ":") < 0))
		w->err = -ENOMEM;
	w->after_key = 1;
}

void jw_str(struct jw *w, const char *s)
{
	jw_sep(w);
	if (!w->err && js_put_string(&w->b, s, strlen(s)) < 0)
		w->err = -ENOMEM;
}

void jw_int(struct jw *w, int64_t v)
{
	jw_sep(w);
	if (!w->err && ck_buf_printf(&w->b, "%" PRId64, v) < 0)
		w->err = -ENOMEM;
}

void jw_uint(struct jw *w, uint64_t v)
{
	jw_sep(w);
	if (!w->err && ck_buf_printf(&w->b, "%" PRIu64, v) < 0)
		w->err = -ENOMEM;
}

void jw_double(struct jw *w, double v)
{
	if (!isfinite(v)) {
		jw_null(w);
		return;
	}
	jw_sep(w);
	if (!w->err && ck_buf_printf(&w->b, "%.17g", v) < 0)
		w->err = -ENOMEM;
}

void jw_bool(struct jw *w, int v)
{
	jw_sep(w);
	if (!w->err && ck_buf_puts(&w->b, v ? "true" : "false") < 0)
		w->err = -ENOMEM;
}

void jw_null(struct jw *w)
{
	jw_sep(w);
	if (!w->err && ck_buf_puts(&w->b, "null") < 0)
		w->err = -ENOMEM;
}

void jw_fixed(struct jw *w, int known, double v, int width)
{
	jw_sep(w);
	if (w->err)
		return;
	/* %.6e of a double takes at most 13 characters (-1.234567e+308) */
	if (width < 13 || width > 64)
		w->err = -EINVAL;
	else if ((known && isfinite(v) ? ck_buf_printf(&w->b, "%-*.6e", width, v)
				       : ck_buf_printf(&w->b, "%-*s", width, "null")) < 0)
		w->err = -ENOMEM;
}

int jw_error(const struct jw *w)
{
	return w->err;
}

void jw_free(struct jw *w)
{
	int spaced = w->spaced;

	ck_buf_free(&w->b);
	memset(w, 0, sizeof(*w));
	w->spaced = spaced;
}
