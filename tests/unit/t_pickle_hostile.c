/* Hostile pickles, written byte by byte: each must be refused with a
 * precise error (opcode, offset, reason) or, where Python would accept it,
 * kept symbolically without executing anything; none may crash, hang or
 * exhaust the C stack. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/pickle.h"
#include "t_pickle_util.h"

/* Parses len bytes; on failure checks that the error mentions every
 * non-NULL fragment given. */
static int parse_expect(const void *p, size_t len, const struct pk_limits *lim, struct pk_doc **doc,
			const char *frag1, const char *frag2)
{
	struct ck_error err = { "" };
	int rc = pk_parse(p, len, lim, doc, &err);

	if (rc) {
		CHECK_MSG(*doc == NULL, "document left on failure");
		if (frag1)
			CHECK_MSG(strstr(err.msg, frag1) != NULL, "'%s' lacks '%s'", err.msg, frag1);
		if (frag2)
			CHECK_MSG(strstr(err.msg, frag2) != NULL, "'%s' lacks '%s'", err.msg, frag2);
	}
	return rc;
}

#define S(lit) lit, sizeof(lit) - 1

static void expect_error(const char *what, const void *p, size_t len, const char *f1, const char *f2)
{
	struct pk_doc *doc = NULL;

	CHECK_MSG(parse_expect(p, len, NULL, &doc, f1, f2) == -EINVAL, "%s: accepted", what);
	pk_doc_free(doc);
}

static void test_refusals(void)
{
	struct ck_buf p = CK_BUF_INIT;

	/* burn_reader_broken.pt is "abc": APPEND on an empty stack, as torch says */
	expect_error("abc", S("abc"), "APPEND at offset 0", "unpickling stack underflow");
	expect_error("STOP on empty", S("\x80\x02."), "STOP at offset 2", "stack underflow");
	expect_error("STOP inside a MARK", S("\x80\x02N(."), "STOP at offset 4", "stack underflow");
	expect_error("TUPLE without MARK", S("\x80\x02Nt."), "TUPLE at offset 3", "could not find MARK");
	expect_error("TUPLE2 short", S("\x80\x02N(N\x86."), "TUPLE2 at offset 5", "underflow");
	expect_error("APPENDS without a list", S("\x80\x02(Ne."), "APPENDS at offset 4", "underflow");
	expect_error("SETITEM on a list", S("\x80\x02]NNs."), "SETITEM at offset 5", "cannot set items");
	expect_error("APPEND to a tuple", S("\x80\x02)Na."), "APPEND at offset 4", "cannot append");
	expect_error("odd SETITEMS", S("\x80\x02}(Nu."), "SETITEMS at offset 5", "odd number");
	expect_error("odd DICT", S("(Nd."), "DICT at offset 2", "odd number of items for DICT");
	expect_error("bad memo", S("\x80\x02h\x05."), "BINGET at offset 2", "memo value not found at index 5");
	expect_error("long bad memo", S("\x80\x02j\x00\x01\x00\x00."), "LONG_BINGET", "index 256");
	expect_error("PUT on empty", S("\x80\x02q\x00."), "BINPUT at offset 2", "underflow");
	expect_error("memo over the limit", S("\x80\x02Nr\xff\xff\xff\xff."), "LONG_BINPUT at offset 3",
		     "exceeds the limit");
	expect_error("huge BINUNICODE", S("\x80\x02X\xff\xff\xff\x7f" "abc"), "BINUNICODE at offset 2",
		     "exceeds the 3 bytes left");
	expect_error("huge BINUNICODE8", S("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\xff" "abc"),
		     "BINUNICODE8", "declared length 18446744073709551615");
	expect_error("huge BINBYTES8", S("\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80."), "BINBYTES8",
		     "exceeds");
	expect_error("negative BINSTRING", S("T\xff\xff\xff\xff."), "BINSTRING at offset 0", "negative");
	expect_error("negative LONG4", S("\x8b\xfe\xff\xff\xff."), "LONG4 at offset 0", "negative");
	expect_error("huge FRAME", S("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7fN."), "FRAME at offset 2",
		     "exceeds");
	expect_error("truncated BININT", S("\x80\x02J\x01\x02"), "BININT at offset 2", "truncated");
	expect_error("no STOP", S("\x80\x02N"), "no STOP", "offset 3");
	expect_error("empty", "", 0, "no STOP", NULL);
	expect_error("unknown opcode", S("\x80\x02\xff."), "opcode 0xff at offset 2", "invalid load key");
	expect_error("protocol 6", S("\x80\x06N."), "PROTO at offset 0", "unsupported pickle protocol: 6");
	expect_error("out-of-band", S("\x80\x05\x97."), "NEXT_BUFFER at offset 2", "out-of-band");
	expect_error("extension code", S("\x80\x02\x82\x01."), "EXT1", "extension");
	expect_error("NUL in GLOBAL", S("cos\0x\nsystem\n."), "GLOBAL at offset 0", "NUL");
	expect_error("GLOBAL without newline", S("cos\nsystem"), "GLOBAL at offset 0", "truncated");
	expect_error("STACK_GLOBAL of ints", S("\x80\x04K\x01K\x02\x93."), "STACK_GLOBAL", "requires str");
	expect_error("REDUCE of a list", S("\x80\x02" "cx\ny\n]R."), "REDUCE at offset 8", "must be a tuple");
	expect_error("NEWOBJ of a list", S("\x80\x02" "cx\ny\n]\x81."), "NEWOBJ at offset 8", "arg tuple");
	expect_error("BUILD a list", S("\x80\x02]}b."), "BUILD at offset 4", "cannot BUILD");
	expect_error("second BUILD", S("\x80\x02" "cx\ny\n)R}b}b."), "BUILD at offset 12", "second BUILD");
	expect_error("bad INT text", S("I12x\n."), "INT at offset 0", "invalid literal");
	expect_error("bad FLOAT text", S("F1.5.5\n."), "FLOAT at offset 0", "float");
	expect_error("unquoted STRING", S("Sabc\n."), "STRING at offset 0", "must be quoted");
	expect_error("bad \\x escape", S("S'\\x4'\n."), "STRING at offset 0", "\\x escape");
	expect_error("bad \\u escape", S("Vab\\u12\n."), "UNICODE at offset 0", "\\uXXXX");
	expect_error("non-ASCII PERSID", S("P\xc3\xa9\n."), "PERSID at offset 0", "ASCII");
	expect_error("OBJ without class", S("(o."), "OBJ at offset 1", "underflow");

	/* CPython refuses integer text of more than 4300 digits too. */
	ck_buf_putc(&p, 'I');
	for (int i = 0; i < 5000; i++)
		ck_buf_putc(&p, '7');
	ck_buf_put(&p, "\n.", 2);
	expect_error("INT text too long", p.data, p.len, "INT at offset 0", "4300 digits");
	ck_buf_free(&p);
}

/* Deep nesting: refused at the limit, accepted (without recursion) above it. */
static void test_depth(void)
{
	const size_t n = 100000;
	struct pk_limits big = { n + 10, 0, 0 };
	struct ck_buf p = CK_BUF_INIT, out = CK_BUF_INIT;
	struct ck_error err = { "" };
	struct pk_emit_opts opts = { 0 };
	struct pk_doc *doc = NULL, *again = NULL;

	/* 100000 MARKs, then 100000 TUPLEs: tuples nested 100000 deep */
	ck_buf_put(&p, "\x80\x02", 2);
	for (size_t i = 0; i < n; i++)
		ck_buf_putc(&p, '(');
	for (size_t i = 0; i < n; i++)
		ck_buf_putc(&p, 't');
	ck_buf_putc(&p, '.');
	CHECK(parse_expect(p.data, p.len, NULL, &doc, "TUPLE at offset", "nesting deeper than 1000") ==
	      -EINVAL);
	CHECK(parse_expect(p.data, p.len, &big, &doc, NULL, NULL) == 0);
	if (doc) {
		opts.max_depth = n + 10;
		CHECK_MSG(pk_emit(pk_doc_root(doc), &opts, &out, &err) == 0, "%s", err.msg);
		CHECK(parse_expect(out.data, out.len, &big, &again, NULL, NULL) == 0);
		out.len = 0;
		CHECK(pk_emit(pk_doc_root(doc), NULL, &out, &err) == -EINVAL && out.len == 0);
		CHECK_MSG(strstr(err.msg, "nesting deeper than 1000"), "'%s'", err.msg);
	}
	pk_doc_free(doc);
	pk_doc_free(again);
	doc = again = NULL;

	/* 100000 lists appended into each other */
	p.len = 0;
	ck_buf_put(&p, "\x80\x02", 2);
	for (size_t i = 0; i < n; i++)
		ck_buf_putc(&p, ']');
	for (size_t i = 1; i < n; i++)
		ck_buf_putc(&p, 'a');
	ck_buf_putc(&p, '.');
	CHECK(parse_expect(p.data, p.len, NULL, &doc, "APPEND at offset", "nesting deeper") == -EINVAL);
	pk_doc_free(doc);
	doc = NULL;

	/* A list filled after it was nested: L2 = [L1], then L1 gets a chain
	 * of 1000 more levels.  Only the final measure can see L2's height. */
	p.len = 0;
	ck_buf_put(&p, "\x80\x02]q\x00]h\x00" "a", 9);         /* L2 = [L1] on the stack */
	ck_buf_put(&p, "h\x00", 2);
	for (size_t i = 0; i < 1000; i++)
		ck_buf_putc(&p, ']');
	for (size_t i = 1; i < 1000; i++)
		ck_buf_putc(&p, 'a');
	ck_buf_put(&p, "a0.", 3);                              /* L1.append(chain); pop L1 */
	CHECK(parse_expect(p.data, p.len, NULL, &doc, "STOP at offset", "nesting deeper than 1000") ==
	      -EINVAL);
	pk_doc_free(doc);
	ck_buf_free(&p);
	ck_buf_free(&out);
}

/* Recursive objects: kept, emitted as CPython does, and parsed back alike. */
static void test_cycles(void)
{
	struct ck_error err = { "" };
	struct ck_buf out = CK_BUF_INIT;
	struct pk_doc *doc = NULL, *again = NULL;
	const struct pk_node *r;

	/* l = []; l.append(l) */
	CHECK(parse_expect(S("\x80\x02]q\x00h\x00" "a."), NULL, &doc, NULL, NULL) == 0);
	if (doc) {
		r = pk_doc_root(doc);
		CHECK(r->kind == PK_LIST && r->n == 1 && r->items[0] == r);
		CHECK(pk_emit(r, NULL, &out, &err) == 0);
		CHECK(out.len == 9 && !memcmp(out.data, "\x80\x02]q\x00h\x00" "a.", 9));
	}
	pk_doc_free(doc);
	doc = NULL;

	/* d = {}; d['self'] = d */
	CHECK(parse_expect(S("\x80\x02}q\x00X\x04\x00\x00\x00selfq\x01h\x00s."), NULL, &doc, NULL, NULL) == 0);
	if (doc) {
		r = pk_doc_root(doc);
		CHECK(r->kind == PK_DICT && r->n == 2 && r->items[1] == r);
		CHECK(pk_dict_get_str(r, "self") == r);
		out.len = 0;
		CHECK(pk_emit(r, NULL, &out, &err) == 0);
	}
	pk_doc_free(doc);
	doc = NULL;

	/* t = (l,) with l = [t]: the inner t is built first, the outer one is
	 * POPped and fetched back from the memo (CPython's save_tuple). */
	CHECK(parse_expect(S("\x80\x02]q\x00h\x00\x85q\x01" "ah\x01."), NULL, &doc, NULL, NULL) == 0);
	if (doc) {
		r = pk_doc_root(doc);
		CHECK(r->kind == PK_TUPLE && r->n == 1 && r->items[0]->kind == PK_LIST &&
		      r->items[0]->items[0] == r);
		out.len = 0;
		CHECK_MSG(pk_emit(r, NULL, &out, &err) == 0, "%s", err.msg);
		CHECK(parse_expect(out.data, out.len, NULL, &again, NULL, NULL) == 0);
		if (again) {
			r = pk_doc_root(again);
			CHECK(r->kind == PK_TUPLE && r->n == 1 && r->items[0]->kind == PK_LIST &&
			      r->items[0]->n == 1 && r->items[0]->items[0] == r);
		}
	}
	pk_doc_free(doc);
	pk_doc_free(again);
	ck_buf_free(&out);
}

/* GLOBAL os system + REDUCE: a symbolic call, flagged, never run. */
static void test_no_execution(void)
{
	char marker[64], pkl[256];
	struct pk_doc *doc = NULL;
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };
	const struct pk_node *r;
	int n;

	snprintf(marker, sizeof(marker), "/tmp/t_pickle_hostile.%d", (int)getpid());
	unlink(marker);
	n = snprintf(pkl, sizeof(pkl), "\x80\x02" "cos\nsystem\nX%c%c%c%ctouch %s\x85R.",
		     (int)(6 + strlen(marker)), 0, 0, 0, marker);
	CHECK(parse_expect(pkl, (size_t)n, NULL, &doc, NULL, NULL) == 0);
	if (!doc)
		return;
	r = pk_doc_root(doc);
	CHECK(r->kind == PK_CALL && r->cls->kind == PK_GLOBAL && r->args->kind == PK_TUPLE);
	CHECK(!strcmp(r->cls->v.global.module, "os") && !strcmp(r->cls->v.global.name, "system"));
	CHECK(pk_doc_nglobals(doc) == 1 && pk_doc_global(doc, 0) == r->cls);
	CHECK(pk_global_is_dangerous("os", "system"));
	CHECK(pk_emit(r, NULL, &out, &err) == 0);
	pk_doc_free(doc);
	doc = NULL;
	CHECK(parse_expect(out.data, out.len, NULL, &doc, NULL, NULL) == 0);
	if (doc) {
		r = pk_doc_root(doc);
		CHECK(r->kind == PK_CALL && !strcmp(r->cls->v.global.name, "system"));
	}
	CHECK_MSG(access(marker, F_OK) != 0, "%s exists: something ran", marker);
	unlink(marker);
	pk_doc_free(doc);
	ck_buf_free(&out);
}

static void test_limits(void)
{
	struct pk_limits few = { 0, 100, 10 };
	struct ck_buf p = CK_BUF_INIT;
	struct pk_doc *doc = NULL;

	ck_buf_put(&p, "\x80\x02(", 3);
	for (int i = 0; i < 200; i++)
		ck_buf_putc(&p, ']');
	ck_buf_put(&p, "l.", 2);
	CHECK(parse_expect(p.data, p.len, &few, &doc, "EMPTY_LIST at offset 103", "more than 100 nodes") ==
	      -EINVAL);
	CHECK(parse_expect(p.data, p.len, NULL, &doc, NULL, NULL) == 0 && doc && pk_doc_root(doc)->n == 200);
	pk_doc_free(doc);
	doc = NULL;
	CHECK(parse_expect(S("\x80\x02Nr\x0b\x00\x00\x00."), &few, &doc, "exceeds the limit 10", NULL) ==
	      -EINVAL);
	/* Sparse memo indices far apart cost nothing up front. */
	CHECK(parse_expect(S("\x80\x02Nr\xff\xe0\xf5\x05" "0j\xff\xe0\xf5\x05."), NULL, &doc, NULL, NULL) == 0);
	CHECK(doc && pk_doc_root(doc)->kind == PK_NONE);
	pk_doc_free(doc);
	ck_buf_free(&p);
}

/* Dict keys behave as in Python: 1, True and 1.0 are one key. */
static void test_dict_semantics(void)
{
	struct pk_doc *doc = NULL;
	const struct pk_node *r, *v;
	struct ck_buf p = CK_BUF_INIT;

	CHECK(parse_expect(S("\x80\x02}(K\x01X\x01\x00\x00\x00" "a\x88X\x01\x00\x00\x00" "bG?\xf0\x00\x00\x00\x00\x00\x00"
			     "X\x01\x00\x00\x00" "cu."), NULL, &doc, NULL, NULL) == 0);
	if (doc) {
		r = pk_doc_root(doc);
		CHECK(r->kind == PK_DICT && r->n == 2 && r->items[0]->kind == PK_INT);
		CHECK(r->items[1]->kind == PK_STR && !strcmp(r->items[1]->v.str.s, "c"));
	}
	pk_doc_free(doc);
	doc = NULL;

	/* 3000 keys, each written twice: the index keeps the first position
	 * and the last value. */
	ck_buf_put(&p, "\x80\x02}(", 4);
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < 3000; k++) {
			char key[16];
			int n = snprintf(key, sizeof(key), "k%d", k);

			ck_buf_putc(&p, 'X');
			ck_buf_put_le32(&p, (uint32_t)n);
			ck_buf_put(&p, key, (size_t)n);
			ck_buf_putc(&p, 'J');
			ck_buf_put_le32(&p, (uint32_t)(k + round * 100000));
		}
	}
	ck_buf_put(&p, "u.", 2);
	CHECK(parse_expect(p.data, p.len, NULL, &doc, NULL, NULL) == 0);
	if (doc) {
		r = pk_doc_root(doc);
		CHECK(r->n == 6000);
		v = pk_dict_get_str(r, "k2999");
		CHECK(v && v->kind == PK_INT && v->v.i == 2999 + 100000);
		CHECK(r->items[0]->kind == PK_STR && !strcmp(r->items[0]->v.str.s, "k0"));
		CHECK(!pk_dict_get_str(r, "k3000"));
	}
	pk_doc_free(doc);
	ck_buf_free(&p);
}

/* Text (protocol 0) spellings decode to the same values. */
static void test_text_opcodes(void)
{
	struct pk_doc *doc = NULL;
	const struct pk_node *r;

	CHECK(parse_expect(S("(I01\nI00\nI-42\nL123456789012345678901234567890L\nF-2.5\n"
			     "S'a\\'b\\x41\\101\\n'\nVsnow \\u2603 \\U0001d11e\xe9\np0\ng0\nl."),
			   NULL, &doc, NULL, NULL) == 0);
	if (!doc)
		return;
	r = pk_doc_root(doc);
	CHECK(r->kind == PK_LIST && r->n == 8);
	if (r->n == 8) {
		CHECK(r->items[0]->kind == PK_BOOL && r->items[0]->v.b == 1);
		CHECK(r->items[1]->kind == PK_BOOL && r->items[1]->v.b == 0);
		CHECK(r->items[2]->kind == PK_INT && r->items[2]->v.i == -42);
		CHECK(r->items[3]->kind == PK_LONG && r->items[3]->v.str.len == 13);
		CHECK(r->items[4]->kind == PK_FLOAT && r->items[4]->v.f == -2.5);
		CHECK(r->items[5]->kind == PK_STR && !strcmp(r->items[5]->v.str.s, "a'bAA\n"));
		CHECK(r->items[6]->kind == PK_STR &&
		      !strcmp(r->items[6]->v.str.s, "snow \xe2\x98\x83 \xf0\x9d\x84\x9e\xc3\xa9"));
		CHECK(r->items[7] == r->items[6]);
	}
	pk_doc_free(doc);
}

int main(void)
{
	test_refusals();
	test_depth();
	test_cycles();
	test_no_execution();
	test_limits();
	test_dict_semantics();
	test_text_opcodes();
	return t_failures ? 1 : 0;
}
