/* Fuzz target: js_parse, and st_index_parse on the same bytes.  Whatever
 * parses must serialize (compact and Python style), and the serialization
 * must parse back to the same bytes (compact) or the same index.  The bytes
 * as a name through js_put_string: always valid UTF-8 without control
 * characters, and it parses back to the same bytes unless they are not
 * UTF-8 (then it holds a \udcXX escape, which the parser refuses). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "ckptfs/safetensors.h"
#include "format/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void json_roundtrip(const char *text, size_t len)
{
	struct js_doc *doc, *again;
	struct ck_buf a = CK_BUF_INIT, b = CK_BUF_INIT, py = CK_BUF_INIT;
	struct ck_error err;

	if (js_parse(text, len, &doc, &err)) {
		if (!err.msg[0])
			abort();
		return;
	}
	if (js_write_compact(&a, js_root(doc)) || js_write_python(&py, js_root(doc), 2, 0, 1))
		abort();
	if (js_parse((const char *)a.data, a.len, &again, NULL))
		abort();
	if (js_write_compact(&b, js_root(again)) || a.len != b.len || memcmp(a.data, b.data, a.len))
		abort();
	js_free(again);
	/* Python style is valid JSON too. */
	if (js_parse((const char *)py.data, py.len, &again, NULL))
		abort();
	js_free(again);
	js_free(doc);
	ck_buf_free(&a);
	ck_buf_free(&b);
	ck_buf_free(&py);
}

static void index_roundtrip(const char *text, size_t len)
{
	struct st_index idx, again;
	struct ck_buf a = CK_BUF_INIT, b = CK_BUF_INIT;

	if (st_index_parse(text, len, &idx, NULL))
		return;
	if (st_index_write(&idx, &a))
		abort();
	if (st_index_parse((const char *)a.data, a.len, &again, NULL) || again.n != idx.n ||
	    again.has_total_size != idx.has_total_size || again.total_size != idx.total_size)
		abort();
	if (st_index_write(&again, &b) || a.len != b.len || memcmp(a.data, b.data, a.len))
		abort();
	st_index_free(&again);
	st_index_free(&idx);
	ck_buf_free(&a);
	ck_buf_free(&b);
}

static void string_roundtrip(const char *s, size_t len)
{
	struct ck_buf b = CK_BUF_INIT;
	struct js_doc *doc;
	uint32_t cp;

	if (js_put_string(&b, s, len))
		abort();
	for (size_t i = 0, n; i < b.len; i += n) {
		n = utf8_decode(b.data + i, b.len - i, &cp);
		if (!n || cp < 0x20)
			abort();
	}
	if (js_parse((const char *)b.data, b.len, &doc, NULL) == 0) {
		const struct js_value *v = js_root(doc);

		if (v->kind != JS_STRING || v->len != len || memcmp(v->str, s, len))
			abort();
		js_free(doc);
	} else if (!memmem(b.data, b.len, "\\udc", 4)) {
		abort();
	}
	ck_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_roundtrip((const char *)data, size);
	string_roundtrip((const char *)data, size);
	index_roundtrip((const char *)data, size);
	return 0;
}
