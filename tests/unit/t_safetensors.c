/* safetensors: the real Rust-writer fixtures parse and re-layout to the same
 * header bytes; the reference loader's rules accept and refuse what they
 * should; the writer's order, escaping and padding match serde_json and the
 * Rust writer's own test vectors. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/safetensors.h"
#include "testutil.h"

/* Parses a whole file image. */
static int parse_file(const uint8_t *file, size_t size, struct st_file *f, struct ck_error *err)
{
	uint64_t n;
	int rc = st_header_len(file, size, &n, err);

	if (rc) {
		memset(f, 0, sizeof(*f));
		return rc;
	}
	return st_parse((const char *)file + 8, (size_t)n, size, f, err);
}

/* Re-lays out a parsed file's tensors (given in reverse, to show the order
 * comes from the writer rules) and compares with the original prefix. */
static int relayout_matches(const struct st_file *f, const uint8_t *file, const char *what)
{
	struct st_tensor *t = calloc(f->n ? f->n : 1, sizeof(*t));
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };
	int same = 0;

	if (!t)
		return 0;
	for (size_t i = 0; i < f->n; i++) {
		t[i] = f->tensors[f->n - 1 - i];
		t[i].begin = t[i].end = 0;
	}
	if (st_layout(t, f->n, f->meta, f->nmeta, &out, &err)) {
		CHECK(0, "%s: st_layout: %s", what, err.msg);
	} else {
		same = out.len == 8 + f->header_len && !memcmp(out.data, file, out.len);
		for (size_t i = 0; i < f->n; i++)
			CHECK(!strcmp(t[i].name, f->tensors[i].name) && t[i].begin == f->tensors[i].begin &&
			      t[i].end == f->tensors[i].end, "%s: tensor %zu placed differently", what, i);
	}
	ck_buf_free(&out);
	free(t);
	return same;
}

static void fixtures(void)
{
	static const char *names[] = { "burn_mnist", "burn_multi_layer", "candle_jfk_codes" };
	const char *fixtures = test_fixtures();
	char path[4096];

	if (!fixtures) {
		test_skip("CKPT_FIXTURES unset: no fixtures");
		return;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct st_file f;
		struct ck_error err = { "" };
		size_t size = 0;
		uint8_t *file;
		int same;

		snprintf(path, sizeof(path), "%s/safetensors/%s.safetensors", fixtures, names[i]);
		file = read_file(path, &size);
		CHECK(file != NULL, "cannot read %s", path);
		if (!file)
			continue;
		if (parse_file(file, size, &f, &err)) {
			CHECK(0, "%s: %s", names[i], err.msg);
		} else {
			CHECK(f.n > 0 && f.data_start == 8 + f.header_len, "%s: %zu tensors", names[i], f.n);
			same = relayout_matches(&f, file, names[i]);
			printf("%s: %zu tensors, header %llu bytes, re-layout %s\n", names[i], f.n,
			       (unsigned long long)f.header_len, same ? "byte-identical" : "DIFFERS");
			CHECK(same, "%s: re-laid-out header differs from the Rust writer's", names[i]);
		}
		st_file_free(&f);
		free(file);
	}
}

/* A file image: u64 length, header text, data_len zero bytes. */
static uint8_t *make_file(const char *header, size_t data_len, size_t *size)
{
	size_t n = strlen(header);
	uint8_t *file = calloc(1, 8 + n + data_len + 1);

	if (!file)
		return NULL;
	for (int i = 0; i < 8; i++)
		file[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(file + 8, header, n);
	*size = 8 + n + data_len;
	return file;
}

static void loader_rules(void)
{
	static const struct { const char *header; size_t data; int ok; const char *why; } cases[] = {
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 1, NULL },
		{ "  {\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ", 8, 1, NULL },
		{ "{}", 0, 1, NULL },
		{ "{\"__metadata__\":{\"format\":\"pt\"}}", 0, 1, NULL },
		{ "{\"__metadata__\":null,\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1, 1, NULL },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":[1]}}", 8, 1, NULL },
		{ "{\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]},"
		  "\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, 1, NULL },
		{ "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[0,0]},"
		  "\"f\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0, 1, NULL },
		{ "{\"c\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, 1, NULL },

		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, 0, "does not end" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, 0, "previous end" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, 0, "previous end" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, 0, "needs 12" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 6, 0, "previous end" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, 0, "previous end" },
		{ "{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, 0, "dtype" },
		{ "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "dtype" },
		{ "{\"a\":{\"dtype\":\"F32\\u0000\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "dtype" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0, "shape[0]" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, 0, "shape[0]" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, 0, "shape" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808,4],\"data_offsets\":[0,0]}}", 0, 0, "overflow" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0, 0, "overflow" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8, 0, "data_offsets" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, 0, "data_offsets" },
		{ "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "lacks dtype" },
		{ "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "duplicate field" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
		  "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, 0, "duplicate tensor" },
		{ "{\"a\":[1]}", 0, 0, "not an object" },
		{ "[]", 0, 0, "not a JSON object" },
		{ "{\"__metadata__\":{\"k\":1}}", 0, 0, "not a string" },
		{ "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, 0, "duplicate __metadata__ key" },
		{ "{\"__metadata__\":[]}", 0, 0, "__metadata__" },
		{ "{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 0, "UTF-8" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, 0, "dimensions" },
		{ "{} x", 0, 0, "JSON" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ck_error err = { "" };
		struct st_file f;
		size_t size = 0;
		uint8_t *file = make_file(cases[i].header, cases[i].data, &size);
		int rc;

		if (!file)
			continue;
		rc = parse_file(file, size, &f, &err);
		if (cases[i].ok) {
			CHECK(rc == 0, "case %zu should parse: %s", i, err.msg);
			for (size_t k = 1; !rc && k < f.n; k++)
				CHECK(f.tensors[k - 1].end == f.tensors[k].begin, "case %zu: not sorted by offset", i);
		} else {
			CHECK(rc == -EINVAL, "case %zu should fail (rc %d)", i, rc);
			CHECK(!cases[i].why || strstr(err.msg, cases[i].why), "case %zu: message '%s' lacks '%s'", i,
			      err.msg, cases[i].why);
			CHECK(f.n == 0 && f.tensors == NULL && f.meta == NULL, "case %zu: output not cleared", i);
		}
		st_file_free(&f);
		free(file);
	}
}

static void header_len_bounds(void)
{
	uint8_t p[8] = { 0 };
	struct ck_error err = { "" };
	uint64_t n = 0;

	CHECK(st_header_len(p, 7, &n, &err) == -EINVAL, "file shorter than 8 bytes accepted");
	p[0] = 16;
	CHECK(st_header_len(p, 24, &n, &err) == 0 && n == 16, "N=16 in 24 bytes refused: %s", err.msg);
	CHECK(st_header_len(p, 23, &n, &err) == -EINVAL, "N past end accepted");
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(ST_MAX_HEADER >> (8 * i));
	CHECK(st_header_len(p, 8 + ST_MAX_HEADER, &n, &err) == 0, "N == limit refused");
	p[0]++;
	CHECK(st_header_len(p, UINT64_MAX, &n, &err) == -EINVAL && strstr(err.msg, "exceeds"),
	      "N over the limit accepted");
	memset(p, 0xff, 8);
	CHECK(st_header_len(p, UINT64_MAX, &n, &err) == -EINVAL, "N = 2^64-1 accepted");
}

static int layout(struct st_tensor *t, size_t n, const struct st_meta *meta, size_t nmeta,
		  struct ck_buf *out)
{
	struct ck_error err = { "" };
	int rc = st_layout(t, n, meta, nmeta, out, &err);

	if (rc)
		fprintf(stderr, "st_layout: %s\n", err.msg);
	return rc;
}

static void writer_vectors(void)
{
	/* The Rust writer's own unit tests (safetensors tensor.rs test_serialization,
	 * test_empty) give these exact bytes. */
	static const char attn[] = "@\0\0\0\0\0\0\0{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
	static const char empty[] = "\x08\0\0\0\0\0\0\0{}      ";
	static const char framework[] = "(\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ";
	struct st_tensor t = { .name = "attn.0", .dtype = CK_DT_F32, .ndim = 3, .shape = { 1, 2, 3 } };
	struct st_meta m = { "framework", "pt" };
	struct ck_buf out = CK_BUF_INIT;

	CHECK(!layout(&t, 1, NULL, 0, &out) && out.len == sizeof(attn) - 1 && !memcmp(out.data, attn, out.len),
	      "attn.0 vector differs");
	CHECK(t.begin == 0 && t.end == 24, "attn.0 offsets");
	out.len = 0;
	CHECK(!layout(NULL, 0, NULL, 0, &out) && out.len == 16 && !memcmp(out.data, empty, 16), "empty vector differs");
	out.len = 0;
	CHECK(!layout(NULL, 0, &m, 1, &out) && out.len == sizeof(framework) - 1 &&
	      !memcmp(out.data, framework, out.len), "metadata vector differs");
	out.len = 0;
	CHECK(!layout(NULL, 0, &m, 0, &out) && out.len == 32 && !memcmp(out.data + 8, "{\"__metadata__\":{}}     ", 24),
	      "empty metadata object not written");
	ck_buf_free(&out);
}

static void writer_order(void)
{
	struct st_tensor t[] = {
		{ .name = "z", .dtype = CK_DT_BOOL, .ndim = 1, .shape = { 3 } },
		{ .name = "b", .dtype = CK_DT_F32, .ndim = 2, .shape = { 2, 2 } },
		{ .name = "B", .dtype = CK_DT_F32, .ndim = 0 },
		{ .name = "a", .dtype = CK_DT_I64, .ndim = 1, .shape = { 1 } },
		{ .name = "\xc3\xa9", .dtype = CK_DT_F32, .ndim = 1, .shape = { 1 } },
		{ .name = "m", .dtype = CK_DT_BF16, .ndim = 1, .shape = { 5 } },
		{ .name = "u", .dtype = CK_DT_U8, .ndim = 1, .shape = { 0 } },
		{ .name = "e4", .dtype = CK_DT_F8_E4M3, .ndim = 1, .shape = { 2 } },
	};
	static const char *want[] = { "a", "B", "b", "\xc3\xa9", "m", "e4", "u", "z" };
	struct ck_buf out = CK_BUF_INIT;
	uint64_t off = 0;
	struct st_file f;
	struct ck_error err = { "" };

	CHECK(!layout(t, 8, NULL, 0, &out), "layout failed");
	for (size_t i = 0; i < 8; i++) {
		CHECK(!strcmp(t[i].name, want[i]), "position %zu: '%s', want '%s'", i, t[i].name, want[i]);
		CHECK(t[i].begin == off, "'%s' begins at %llu", t[i].name, (unsigned long long)t[i].begin);
		off = t[i].end;
	}
	CHECK(off == 8 + 4 + 16 + 4 + 10 + 2 + 0 + 3, "data size %llu", (unsigned long long)off);
	CHECK((out.len - 8) % 8 == 0, "header not padded to 8");
	/* What we write, we read back. */
	if (!ck_buf_reserve(&out, off)) {
		memset(out.data + out.len, 0, off);
		CHECK(!st_parse((char *)out.data + 8, out.len - 8, out.len + off, &f, &err), "own header: %s", err.msg);
		st_file_free(&f);
	}
	ck_buf_free(&out);
}

static void writer_errors(void)
{
	struct st_tensor dup[] = {
		{ .name = "x", .dtype = CK_DT_F32, .ndim = 0 },
		{ .name = "x", .dtype = CK_DT_I64, .ndim = 0 },
	};
	struct st_tensor c128 = { .name = "c", .dtype = CK_DT_C128, .ndim = 0 };
	struct st_tensor huge = { .name = "h", .dtype = CK_DT_F64, .ndim = 2, .shape = { 1ULL << 32, 1ULL << 30 } };
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };

	ck_buf_puts(&out, "keep");
	CHECK(st_layout(dup, 2, NULL, 0, &out, &err) == -EINVAL && strstr(err.msg, "duplicate"), "duplicate names");
	CHECK(st_layout(&c128, 1, NULL, 0, &out, &err) == -EINVAL, "complex128 has no safetensors dtype");
	CHECK(st_layout(&huge, 1, NULL, 0, &out, &err) == -EOVERFLOW, "size overflow");
	CHECK(out.len == 4 && !memcmp(out.data, "keep", 4), "output changed on failure");
	ck_buf_free(&out);
}

/* Names that need escaping: our header must equal what serde_json writes,
 * which for strings is what Python's json.dumps(ensure_ascii=False) writes. */
static void writer_escapes_like_serde(void)
{
	struct st_tensor t[] = {
		{ .name = "q\"uote", .dtype = CK_DT_F32, .ndim = 1, .shape = { 1 } },
		{ .name = "back\\slash", .dtype = CK_DT_F32, .ndim = 1, .shape = { 2 } },
		{ .name = "new\nline\ttab\x01\x1f\x7f", .dtype = CK_DT_F32, .ndim = 0 },
		{ .name = "caf\xc3\xa9 \xf0\x9f\x98\x80", .dtype = CK_DT_I8, .ndim = 2, .shape = { 3, 0 } },
	};
	struct st_meta m = { "k\"\n", "v\xc3\xa9\\" };
	const char *script =
		"import json, sys\n"
		"t = json.load(open(sys.argv[1], encoding=\"utf-8\"))\n"
		"h = json.dumps(t, separators=(\",\", \":\"), ensure_ascii=False)\n"
		"sys.stdout.write(h + \" \" * (-len(h.encode()) % 8))";
	struct ck_buf out = CK_BUF_INIT, doc = CK_BUF_INIT;
	char *want;

	if (layout(t, 4, &m, 1, &out))
		{
		CHECK(0, "layout failed");
		return;
	}
	/* Python re-serializes our own header: a JSON object keeps its order. */
	ck_buf_put(&doc, out.data + 8, out.len - 8);
	want = python_on(script, (const char *)doc.data, doc.len);
	if (want) {
		CHECK(strlen(want) == out.len - 8 && !memcmp(want, out.data + 8, out.len - 8),
		      "header differs from json.dumps:\n%s\n%.*s", want, (int)(out.len - 8), (const char *)out.data + 8);
		free(want);
	}
	ck_buf_free(&doc);
	ck_buf_free(&out);
}

static void index_roundtrip(void)
{
	const char *text =
		"{\"weight_map\": {\"model.layers.10.mlp.w\": \"model-00002-of-00002.safetensors\","
		" \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
		" \"lm_head.weight\": \"model-00002-of-00002.safetensors\","
		" \"model.layers.2.\xc3\xa9\": \"model-00001-of-00002.safetensors\","
		" \"Z\": \"model-00001-of-00002.safetensors\"},"
		" \"metadata\": {\"total_size\": 123456789012, \"total_parameters\": 61728394506,"
		" \"format\": \"pt\", \"list\": [1, {\"b\": 2, \"a\": []}]}}";
	const char *script =
		"import json, sys; sys.stdout.write(json.dumps(json.load(open(sys.argv[1], encoding=\"utf-8\")), indent=2, sort_keys=True) + \"\\n\")";
	struct st_index idx;
	struct ck_error err = { "" };
	struct ck_buf out = CK_BUF_INIT;
	char *want;

	if (st_index_parse(text, strlen(text), &idx, &err))
		{
		CHECK(0, "index parse: %s", err.msg);
		return;
	}
	CHECK(idx.has_total_size && idx.total_size == 123456789012ULL, "total_size");
	CHECK(idx.n == 5 && !strcmp(idx.weights[0].name, "model.layers.10.mlp.w") &&
	      !strcmp(idx.weights[1].file, "model-00001-of-00002.safetensors"), "weight_map not in document order");
	CHECK(idx.nmeta == 3 && !strcmp(idx.meta[0].key, "total_parameters") && !strcmp(idx.meta[0].json, "61728394506") &&
	      !strcmp(idx.meta[2].json, "[1,{\"b\":2,\"a\":[]}]"), "other metadata");
	CHECK(!st_index_write(&idx, &out), "index write");
	want = python_on(script, text, strlen(text));
	if (want) {
		CHECK(strlen(want) == out.len && !memcmp(want, out.data, out.len),
		      "index differs from Python:\n%s\n--- ours\n%.*s", want, (int)out.len, (const char *)out.data);
		free(want);
	}
	ck_buf_free(&out);
	st_index_free(&idx);

	/* Built by hand, as a writer of shards would. */
	{
		struct st_index_weight w[] = { { "b", "s2" }, { "a", "s1" } };
		struct st_index mine = { .has_total_size = 1, .total_size = 16, .n = 2, .weights = w };
		const char *expect = "{\n  \"metadata\": {\n    \"total_size\": 16\n  },\n  \"weight_map\": {\n"
				     "    \"a\": \"s1\",\n    \"b\": \"s2\"\n  }\n}\n";

		CHECK(!st_index_write(&mine, &out) && out.len == strlen(expect) && !memcmp(out.data, expect, out.len),
		      "hand-built index: %.*s", (int)out.len, (const char *)out.data);
		ck_buf_free(&out);
	}
}

static void index_errors(void)
{
	static const struct { const char *text; const char *why; } bad[] = {
		{ "{\"metadata\": {}}", "no weight_map" },
		{ "[]", "not a JSON object" },
		{ "{\"weight_map\": []}", "not an object" },
		{ "{\"weight_map\": {\"a\": 1}}", "not a file name" },
		{ "{\"weight_map\": {\"a\": \"\"}}", "not a file name" },
		{ "{\"weight_map\": {\"a\": \"x\\u0000y\"}}", "not a file name" },
		{ "{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}", "duplicate key 'a'" },
		{ "{\"weight_map\": {}, \"weight_map\": {}}", "duplicate 'weight_map'" },
		{ "{\"weight_map\": {}, \"metadata\": 5}", "metadata is not an object" },
		{ "{\"weight_map\": {}, \"metadata\": {\"total_size\": 1, \"total_size\": 2}}", "duplicate key" },
		{ "{\"weight_map\": {", "JSON" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct st_index idx;
		struct ck_error err = { "" };
		int rc = st_index_parse(bad[i].text, strlen(bad[i].text), &idx, &err);

		CHECK(rc == -EINVAL && strstr(err.msg, bad[i].why), "index case %zu: rc %d, '%s'", i, rc, err.msg);
		CHECK(idx.n == 0 && !idx.weights && !idx.meta, "index case %zu: output not cleared", i);
	}
}

int main(void)
{
	fixtures();
	loader_rules();
	header_len_bounds();
	writer_vectors();
	writer_order();
	writer_errors();
	writer_escapes_like_serde();
	index_roundtrip();
	index_errors();
	return test_result();
}
