/* JSON reader: accepted and refused documents (RFC 8259 strictness,
 * escapes, surrogates, UTF-8, depth), duplicate keys, integer access; the
 * writers against serde_json's and Python's exact output; names of any
 * bytes through the document writer (jw_*), read back by Python. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/json.h"
#include "testutil.h"

static struct js_doc *parse_ok(const char *text, size_t len)
{
	struct ck_error err = { "" };
	struct js_doc *doc = NULL;
	int rc = js_parse(text, len, &doc, &err);

	CHECK(rc == 0, "should parse: '%.*s': %s", (int)len, text, err.msg);
	return doc;
}

static void refused(const char *text, size_t len, int want_rc, const char *want_msg)
{
	struct ck_error err = { "" };
	struct js_doc *doc = NULL;
	int rc = js_parse(text, len, &doc, &err);

	CHECK(rc == want_rc, "'%.*s': rc %d, want %d (%s)", (int)len, text, rc, want_rc, err.msg);
	CHECK(doc == NULL, "'%.*s': document returned on failure", (int)len, text);
	if (want_msg)
		CHECK(strstr(err.msg, want_msg) != NULL, "'%.*s': message '%s' lacks '%s'", (int)len, text,
		      err.msg, want_msg);
	js_free(doc);
}

static void structure(void)
{
	const char *text = " {\"a\": 1, \"b\": [true, false, null], \"c\": \"x\", \"a\": -2.5e3}\r\n\t";
	struct js_doc *doc = parse_ok(text, strlen(text));
	const struct js_value *root, *b;

	if (!doc)
		return;
	root = js_root(doc);
	CHECK(root->kind == JS_OBJECT && root->n == 4, "root: kind %d, %zu members", root->kind, root->n);
	/* duplicates are kept, in order; js_get finds the first */
	CHECK(!strcmp(root->keys[0], "a") && !strcmp(root->keys[3], "a"), "duplicate keys not kept in order");
	CHECK(js_get(root, "a") == root->vals[0], "js_get did not return the first 'a'");
	CHECK(root->vals[3]->kind == JS_NUMBER && !strcmp(root->vals[3]->str, "-2.5e3"),
	      "number text not kept: '%s'", root->vals[3]->str);
	b = js_get(root, "b");
	CHECK(b && b->kind == JS_ARRAY && b->n == 3 && b->vals[0]->kind == JS_BOOL && b->vals[0]->b == 1 &&
	      b->vals[1]->b == 0 && b->vals[2]->kind == JS_NULL, "array members wrong");
	CHECK(js_get(root, "zz") == NULL && js_get(b, "a") == NULL, "js_get of absent key or non-object");
	js_free(doc);

	doc = parse_ok("[]", 2);
	if (doc)
		CHECK(js_root(doc)->kind == JS_ARRAY && js_root(doc)->n == 0, "empty array");
	js_free(doc);
	doc = parse_ok("\"\"", 2);
	if (doc)
		CHECK(js_root(doc)->kind == JS_STRING && js_root(doc)->len == 0 && !js_root(doc)->str[0],
		      "empty string");
	js_free(doc);
}

static void numbers(void)
{
	static const char *good[] = { "0", "-0", "7", "-12", "1.5", "1e5", "1E+5", "-12.34e-05", "0.0", "123456789012345678901234567890" };
	static const char *bad[] = { "01", "-01", "1.", ".5", "+1", "1e", "1e+", "--1", "0x10", "NaN", "Infinity", "-", "1.e3", "- 1" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct js_doc *doc = parse_ok(good[i], strlen(good[i]));

		if (doc)
			CHECK(js_root(doc)->kind == JS_NUMBER && !strcmp(js_root(doc)->str, good[i]),
			      "number '%s' kept as '%s'", good[i], js_root(doc)->str);
		js_free(doc);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i], strlen(bad[i]), -EINVAL, NULL);
}

static void check_string(const char *json, const char *want, size_t want_len)
{
	struct js_doc *doc = parse_ok(json, strlen(json));
	const struct js_value *v;

	if (!doc)
		return;
	v = js_root(doc);
	CHECK(v->kind == JS_STRING && v->len == want_len && !memcmp(v->str, want, want_len) && !v->str[want_len],
	      "%s decoded wrongly (%zu bytes)", json, v->len);
	js_free(doc);
}

static void strings(void)
{
	check_string("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8);
	check_string("\"\\u00e9\\u20AC\"", "\xc3\xa9\xe2\x82\xac", 5);
	check_string("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4);              /* surrogate pair */
	check_string("\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf", 4);              /* U+10FFFF */
	check_string("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
	check_string("\"a\\u0000b\"", "a\0b", 3);                               /* NUL kept, len says so */
	check_string("\"\x7f\"", "\x7f", 1);

	refused("\"\\ud83d\"", 8, -EINVAL, "high surrogate");
	refused("\"\\ud83d\\u0041\"", 14, -EINVAL, "high surrogate");
	refused("\"\\ude00\"", 8, -EINVAL, "lone low surrogate");
	refused("\"\\u12\"", 6, -EINVAL, "four hex digits");
	refused("\"\\u12G4\"", 8, -EINVAL, "four hex digits");
	refused("\"\\x\"", 4, -EINVAL, "invalid escape");
	refused("\"a\x01\"", 4, -EINVAL, "control character");
	refused("\"a\nb\"", 5, -EINVAL, "control character");
	refused("\"abc", 4, -EINVAL, "unterminated");
	refused("\"abc\\\"", 6, -EINVAL, "unterminated");
	refused("\"\xc0\x80\"", 4, -EINVAL, "UTF-8");          /* overlong NUL */
	refused("\"\xe0\x80\xaf\"", 5, -EINVAL, "UTF-8");      /* overlong '/' */
	refused("\"\xed\xa0\x80\"", 5, -EINVAL, "UTF-8");      /* encoded surrogate */
	refused("\"\xf4\x90\x80\x80\"", 6, -EINVAL, "UTF-8");  /* above U+10FFFF */
	refused("\"\xff\"", 3, -EINVAL, "UTF-8");
	refused("\"\xe2\x82\"", 4, -EINVAL, "UTF-8");          /* truncated */
	refused("\"\x80\"", 3, -EINVAL, "UTF-8");              /* lone continuation */
	refused("{\"a\\u0000\":1}", 13, -EINVAL, "key contains");
}

static void syntax(void)
{
	static const char *bad[] = {
		"", " ", "{", "[", "]", "{]", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{'a':1}",
		"[1 2]", "{} x", "{},", "tru", "nul", "True", "/* c */ 1", "[1]//", "{\"a\":}",
		"[,1]", "{,}", "\xef\xbb\xbf{}",   /* a BOM is not whitespace */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i], strlen(bad[i]), -EINVAL, NULL);
	/* A NUL byte inside the given length is not the end of the text. */
	refused("{}\0", 3, -EINVAL, NULL);
	refused("[1,\n  2,\n  x]", 13, -EINVAL, "JSON at offset 11");
}

static void depth(void)
{
	char text[2 * (JS_MAX_DEPTH + 1) + 1];
	struct js_doc *doc;
	int d;

	for (d = 0; d < JS_MAX_DEPTH; d++) {
		text[d] = '[';
		text[2 * JS_MAX_DEPTH - 1 - d] = ']';
	}
	doc = parse_ok(text, 2 * JS_MAX_DEPTH);
	js_free(doc);

	for (d = 0; d <= JS_MAX_DEPTH; d++) {
		text[d] = '[';
		text[2 * JS_MAX_DEPTH + 1 - d] = ']';
	}
	refused(text, 2 * (JS_MAX_DEPTH + 1), -E2BIG, "deeper");
}

static void as_u64(void)
{
	static const struct { const char *text; int rc; uint64_t v; } cases[] = {
		{ "0", 0, 0 }, { "42", 0, 42 }, { "18446744073709551615", 0, UINT64_MAX },
		{ "18446744073709551616", -ERANGE, 0 }, { "99999999999999999999", -ERANGE, 0 },
		{ "-1", -EINVAL, 0 }, { "-0", -EINVAL, 0 }, { "1.0", -EINVAL, 0 }, { "1e3", -EINVAL, 0 },
		{ "\"5\"", -EINVAL, 0 }, { "true", -EINVAL, 0 }, { "null", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct js_doc *doc = parse_ok(cases[i].text, strlen(cases[i].text));
		uint64_t v = 12345;
		int rc;

		if (!doc)
			continue;
		rc = js_as_u64(js_root(doc), &v);
		CHECK(rc == cases[i].rc && (rc || v == cases[i].v), "js_as_u64(%s): rc %d v %llu",
		      cases[i].text, rc, (unsigned long long)v);
		js_free(doc);
	}
	CHECK(js_as_u64(NULL, &(uint64_t){ 0 }) == -EINVAL, "js_as_u64(NULL)");
}

static void expect_buf(struct ck_buf *b, const char *want, const char *what)
{
	CHECK(b->len == strlen(want) && !memcmp(b->data, want, b->len), "%s: got '%.*s', want '%s'", what,
	      (int)b->len, (const char *)b->data, want);
	ck_buf_free(b);
}

static void writers(void)
{
	struct ck_buf b = CK_BUF_INIT;
	const char *text = "{ \"a\" : [ 1 , 2.50, {} , [] ], \"b\\u00e9\":{\"c\":null,\"d\":\"x\\ty\"}, \"e\": true }";
	struct js_doc *doc;

	CHECK(!js_put_string(&b, "q\"b\\n\n\x01\x1f\x7f\xc3\xa9/", 12), "js_put_string failed");
	expect_buf(&b, "\"q\\\"b\\\\n\\n\\u0001\\u001f\x7f\xc3\xa9/\"", "serde-style string");

	CHECK(!js_put_string_ascii(&b, "\xc3\xa9\xf0\x9f\x98\x80\x7f\t\"", 9), "js_put_string_ascii failed");
	expect_buf(&b, "\"\\u00e9\\ud83d\\ude00\\u007f\\t\\\"\"", "Python-style string");
	CHECK(js_put_string_ascii(&b, "\xff", 1) == -EINVAL, "invalid UTF-8 accepted by js_put_string_ascii");
	ck_buf_free(&b);

	doc = parse_ok(text, strlen(text));
	if (!doc)
		return;
	CHECK(!js_write_compact(&b, js_root(doc)), "js_write_compact failed");
	expect_buf(&b, "{\"a\":[1,2.50,{},[]],\"b\xc3\xa9\":{\"c\":null,\"d\":\"x\\ty\"},\"e\":true}", "compact");
	js_free(doc);
}

/* Names are bytes: what each becomes in a string literal. */
static void name_escapes(void)
{
	static const struct { const char *name, *want; } cases[] = {
		{ "run\"1", "\"run\\\"1\"" },
		{ "a\\b", "\"a\\\\b\"" },
		{ "line\nnext\r\t\b\f", "\"line\\nnext\\r\\t\\b\\f\"" },
		{ "\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		/* not UTF-8: each such byte is the lone surrogate U+DC00+byte */
		{ "\xff", "\"\\udcff\"" },
		{ "caf\xe9", "\"caf\\udce9\"" },                       /* Latin-1: not the same as "café" */
		{ "a\xc3", "\"a\\udcc3\"" },                           /* truncated at the end */
		{ "\xe2\x82x", "\"\\udce2\\udc82x\"" },                /* truncated in the middle */
		{ "\x80\xbf", "\"\\udc80\\udcbf\"" },                  /* lone continuation bytes */
		{ "\xc0\x80", "\"\\udcc0\\udc80\"" },                  /* overlong NUL */
		{ "\xed\xa0\x80", "\"\\udced\\udca0\\udc80\"" },       /* an encoded surrogate */
		{ "\xf4\x90\x80\x80", "\"\\udcf4\\udc90\\udc80\\udc80\"" },  /* above U+10FFFF */
		{ "\\udce9", "\"\\\\udce9\"" },                        /* the text of an escape stays text */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ck_buf b = CK_BUF_INIT;

		CHECK(!js_put_string(&b, cases[i].name, strlen(cases[i].name)), "js_put_string failed");
		expect_buf(&b, cases[i].want, "name");
	}
}

static void doc_writer(void)
{
	struct jw w = { .b = CK_BUF_INIT }, s = { .b = CK_BUF_INIT, .spaced = 1 };
	struct js_doc *doc;

	jw_begin_obj(&w);
	jw_key(&w, "a");
	jw_begin_arr(&w);
	jw_int(&w, -3);
	jw_uint(&w, UINT64_MAX);
	jw_double(&w, 0.5);
	jw_double(&w, NAN);
	jw_begin_obj(&w);
	jw_end_obj(&w);
	jw_begin_arr(&w);
	jw_end_arr(&w);
	jw_end_arr(&w);
	jw_key(&w, "b\"");
	jw_bool(&w, 1);
	jw_key(&w, "c");
	jw_null(&w);
	jw_end_obj(&w);
	CHECK(jw_error(&w) == 0, "jw error %d", jw_error(&w));
	expect_buf(&w.b, "{\"a\":[-3,18446744073709551615,0.5,null,{},[]],\"b\\\"\":true,\"c\":null}", "jw compact");
	jw_free(&w);

	jw_begin_obj(&s);
	jw_key(&s, "x");
	jw_begin_arr(&s);
	jw_str(&s, "p");
	jw_str(&s, "q");
	jw_end_arr(&s);
	jw_key(&s, "y");
	jw_bool(&s, 0);
	jw_end_obj(&s);
	doc = parse_ok((const char *)s.b.data, s.b.len);
	js_free(doc);
	expect_buf(&s.b, "{\"x\": [\"p\", \"q\"], \"y\": false}", "jw spaced");
	jw_free(&s);

	/* Fixed width: a document laid out before its numbers keeps its length. */
	jw_begin_arr(&s);
	jw_fixed(&s, 0, 0, 13);
	jw_fixed(&s, 1, 1.5e-3, 13);
	jw_fixed(&s, 1, NAN, 13);
	jw_fixed(&s, 1, -1.234567e+300, 14);
	jw_end_arr(&s);
	doc = parse_ok((const char *)s.b.data, s.b.len);
	js_free(doc);
	expect_buf(&s.b, "[null         , 1.500000e-03 , null         , -1.234567e+300]", "jw_fixed");
	jw_free(&s);
	jw_fixed(&s, 1, 1, 12);
	CHECK(jw_error(&s) == -EINVAL, "jw_fixed narrower than 13");
	jw_free(&s);

	/* Too deep: the error sticks and nothing more is written. */
	for (int d = 0; d <= JW_MAX_DEPTH; d++)
		jw_begin_arr(&w);
	CHECK(jw_error(&w) == -E2BIG, "nesting past JW_MAX_DEPTH: error %d", jw_error(&w));
	jw_str(&w, "after");
	CHECK(w.b.len == JW_MAX_DEPTH && !memchr(w.b.data, 'a', w.b.len), "written after the error");
	jw_free(&w);
	CHECK(jw_error(&w) == 0 && w.b.len == 0, "jw_free does not reset the writer");
}

/* Series, checkpoint and file names of every kind of byte in a document:
 * Python reads it as JSON and gets each name back, byte for byte, with
 * the "surrogateescape" error handler (os.fsencode). */
static void names_python(void)
{
	static const char *const script =
		"import json, sys; d = json.load(open(sys.argv[1], encoding=\"utf-8\")); "
		"sys.stdout.write(\" \".join(k.encode(\"utf-8\", \"surrogateescape\").hex() + \"=\" + "
		"v.encode(\"utf-8\", \"surrogateescape\").hex() for k, v in d[\"names\"].items()))";
	char names[8][300], *got;
	struct jw w = { .b = CK_BUF_INIT };
	struct ck_buf want = CK_BUF_INIT;
	size_t n = 0;

	strcpy(names[n++], "run\"1");
	strcpy(names[n++], "back\\slash\nnew\tline");
	strcpy(names[n++], "caf\xe9-\xff\xfe-\xc3\xa9-\xed\xa0\x80-\xf0\x9f\x98\x80");
	for (int i = 0; i < 31; i++)
		names[n][i] = (char)(i + 1);   /* every control character */
	names[n++][31] = '\0';
	for (int i = 0; i < 128; i++)
		names[n][i] = (char)(128 + i); /* every byte with the high bit */
	names[n++][128] = '\0';
	memset(names[n], 'x', 255);        /* NAME_MAX bytes */
	memcpy(names[n], "\"\\\n\x80", 4);
	names[n++][255] = '\0';

	jw_begin_obj(&w);
	jw_key(&w, "names");
	jw_begin_obj(&w);
	for (size_t i = 0; i < n; i++) {
		jw_key(&w, names[i]);
		jw_str(&w, names[(i + 1) % n]);
		for (size_t j = 0; j < strlen(names[i]); j++)
			SETUP(!ck_buf_printf(&want, "%02x", (uint8_t)names[i][j]));
		SETUP(!ck_buf_putc(&want, '='));
		for (size_t j = 0; j < strlen(names[(i + 1) % n]); j++)
			SETUP(!ck_buf_printf(&want, "%02x", (uint8_t)names[(i + 1) % n][j]));
		SETUP(!ck_buf_puts(&want, i + 1 < n ? " " : ""));
	}
	jw_end_obj(&w);
	jw_end_obj(&w);
	SETUP(jw_error(&w) == 0 && !ck_buf_putc(&want, '\0'));
	got = python_on(script, w.b.data, w.b.len);
	if (got) {
		CHECK(!strcmp(got, (const char *)want.data), "names read back by Python:\n%s\nwant\n%s", got,
		      (const char *)want.data);
	}
	free(got);
	ck_buf_free(&want);
	jw_free(&w);
}

static void python_dumps(void)
{
	/* Numbers in the form Python's repr writes them, as they would be in a file Python wrote. */
	const char *text =
		"{\"zeta\": [1, 2.5, -3, 1e-05, 1e+100, [], {}, [[]], {\"k\": []}],"
		" \"alpha\": {\"nested\": {\"deep\": [true, false, null]}, \"B\": \"caf\xc3\xa9 \xf0\x9f\x98\x80\"},"
		" \"\xc3\xa9t\xc3\xa9\": \"tab\\there \\\"q\\\" \\\\ \\u0001 \\u007f\","
		" \"Alpha\": 0, \"_\": 1.5, \"a\": -0.0, \"model.layers.10.w\": \"m-00002-of-00002.safetensors\"}";
	static const struct { int indent, sort; const char *args; } runs[] = {
		{ 2, 1, "indent=2, sort_keys=True" }, { 2, 0, "indent=2" }, { 4, 1, "indent=4, sort_keys=True" },
	};
	struct js_doc *doc = parse_ok(text, strlen(text));

	if (!doc)
		return;
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char script[256], *want;
		struct ck_buf b = CK_BUF_INIT;

		snprintf(script, sizeof(script),
			 "import json, sys; sys.stdout.write(json.dumps(json.load(open(sys.argv[1], encoding=\"utf-8\")), %s))",
			 runs[i].args);
		want = python_on(script, text, strlen(text));
		if (!want)
			break;
		CHECK(!js_write_python(&b, js_root(doc), runs[i].indent, 0, runs[i].sort), "js_write_python failed");
		CHECK(b.len == strlen(want) && !memcmp(b.data, want, b.len),
		      "json.dumps(%s) differs:\n--- python\n%s\n--- ours\n%.*s", runs[i].args, want, (int)b.len,
		      (const char *)b.data);
		ck_buf_free(&b);
		free(want);
	}
	js_free(doc);
}

int main(void)
{
	structure();
	numbers();
	strings();
	syntax();
	depth();
	as_u64();
	writers();
	name_escapes();
	doc_writer();
	names_python();
	python_dumps();
	return test_result();
}
