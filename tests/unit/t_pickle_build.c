/* Trees built through the API (as composites build them): constructors,
 * dict semantics, clones, storage renaming in the emitter, key paths,
 * emitter refusals, the dangerous-global rules, and a 10,000-tensor state
 * dict round trip. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckptfs/pickle.h"
#include "t_pickle_util.h"

static const char *rename_key(void *ctx, const struct pk_storage *st)
{
	static char names[64][16];
	int *calls = ctx;

	(*calls)++;
	if (st->index >= 64)
		return NULL;
	snprintf(names[st->index], sizeof(names[0]), "r%zu", st->index + 10);
	return names[st->index];
}

/* Occurrences of a BINUNICODE of s in buf. */
static int count_str(const struct ck_buf *b, const char *s)
{
	size_t n = strlen(s);
	int count = 0;

	for (size_t i = 0; i + 5 + n <= b->len; i++)
		if (b->data[i] == 'X' && ck_le32(b->data + i + 1) == n && !memcmp(b->data + i + 5, s, n))
			count++;
	return count;
}

static struct pk_node *str(struct pk_doc *doc, const char *s)
{
	return pk_new_str(doc, s, strlen(s));
}

static void test_tensors_and_rename(void)
{
	struct pk_doc *doc = pk_doc_new(), *back = NULL;
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };
	struct pk_emit_opts opts = { rename_key, NULL, 0, 2 };
	struct pk_node *root, *s0, *s0b, *s1, *s2, *ta, *tb, *tc, *td;
	const struct pk_tensor *t;
	uint64_t shape2[2] = { 2, 3 }, shape1[1] = { 3 };
	int64_t stride2[2] = { 3, 1 }, stride1[1] = { 1 };
	int calls = 0;

	CHECK(doc != NULL);
	if (!doc)
		return;
	opts.ctx = &calls;
	root = pk_new(doc, PK_DICT);
	s0 = pk_new_storage(doc, CK_DT_F32, "0", "cpu", 6);
	s0b = pk_new_storage(doc, CK_DT_F32, "0", "cpu", 6);
	s1 = pk_new_storage(doc, CK_DT_BF16, "1", "cuda:0", 4);
	s2 = pk_new_storage(doc, CK_DT_UNTYPED, "2", "cpu", 8);
	CHECK(root && s0 && s0b && s1 && s2);
	CHECK(!pk_new_storage(doc, CK_DT_F16, "0", "cpu", 6));      /* key taken */
	CHECK(!pk_new_storage(doc, CK_DT_F32, "../x", "cpu", 6));   /* not a record name */
	CHECK(pk_doc_nstorages(doc) == 3);
	ta = pk_new_tensor(doc, s0, CK_DT_F32, 0, 2, shape2, stride2, 0);
	tb = pk_new_tensor(doc, s0b, CK_DT_F32, 3, 1, shape1, stride1, 1);
	tc = pk_new_tensor(doc, s1, CK_DT_BF16, 0, 1, shape1, stride1, 0);
	td = pk_new_tensor(doc, s2, CK_DT_F8_E4M3, 5, 1, shape1, stride1, 0);
	CHECK(ta && tb && tc && td);
	CHECK(!pk_new_tensor(doc, s0, CK_DT_F32, 4, 1, shape1, stride1, 0));   /* past the end */
	CHECK(!pk_new_tensor(doc, s0, CK_DT_F16, 0, 1, shape1, stride1, 0));   /* wrong dtype */
	if (!root || !ta || !tb || !tc || !td)
		goto done;
	CHECK(!pk_dict_set(doc, root, str(doc, "a"), ta));
	CHECK(!pk_dict_set(doc, root, str(doc, "b"), tb));
	CHECK(!pk_dict_set(doc, root, str(doc, "c"), tc));
	CHECK(!pk_dict_set(doc, root, str(doc, "d"), td));
	t = pk_as_tensor(td);
	CHECK(t && t->version == 3 && t->dtype == CK_DT_F8_E4M3 && t->storage->dtype == CK_DT_UNTYPED);

	CHECK_MSG(pk_emit(root, &opts, &out, &err) == 0, "%s", err.msg);
	CHECK(calls >= 4);
	/* One string per renamed key: the view of storage 0 BINGETs it. */
	CHECK(count_str(&out, "r10") == 1 && count_str(&out, "r11") == 1 && count_str(&out, "r12") == 1);
	CHECK(count_str(&out, "0") == 0);
	CHECK(pk_parse(out.data, out.len, NULL, &back, &err) == 0);
	if (back) {
		const struct pk_node *r = pk_doc_root(back);
		const struct pk_tensor *a = pk_as_tensor(pk_dict_get_str(r, "a"));
		const struct pk_tensor *b = pk_as_tensor(pk_dict_get_str(r, "b"));
		const struct pk_tensor *d = pk_as_tensor(pk_dict_get_str(r, "d"));

		CHECK(pk_doc_nstorages(back) == 3);
		CHECK(a && b && a->storage == b->storage && !strcmp(a->storage->key, "r10"));
		CHECK(b && b->offset == 3 && b->requires_grad && b->ndim == 1 && b->shape[0] == 3);
		CHECK(a && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->stride[0] == 3);
		CHECK(d && d->version == 3 && d->offset == 5 && d->dtype == CK_DT_F8_E4M3);
		CHECK(pk_doc_storage(back, 1) && !strcmp(pk_doc_storage(back, 1)->location, "cuda:0"));
	}
	pk_doc_free(back);
	back = NULL;

	/* Without a callback the keys stay; emission is a fixpoint. */
	out.len = 0;
	CHECK(pk_emit(root, NULL, &out, &err) == 0);
	CHECK(count_str(&out, "0") == 1);
	CHECK(pk_parse(out.data, out.len, NULL, &back, &err) == 0);
	if (back) {
		struct ck_buf again = CK_BUF_INIT;

		CHECK(pk_emit(pk_doc_root(back), NULL, &again, &err) == 0);
		CHECK(again.len == out.len && !memcmp(again.data, out.data, out.len));
		ck_buf_free(&again);
	}
done:
	pk_doc_free(back);
	pk_doc_free(doc);
	ck_buf_free(&out);
}

static void test_dicts_and_clones(void)
{
	struct pk_doc *doc = pk_doc_new();
	struct pk_node *d, *c, *k1, *k2, *v;
	char key[16];

	if (!doc)
		return;
	d = pk_new(doc, PK_DICT);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "key%d", i);
		CHECK(!pk_dict_set(doc, d, str(doc, key), pk_new_int(doc, i)));
	}
	CHECK(d->n == 80);
	CHECK(!pk_dict_set(doc, d, str(doc, "key7"), pk_new_int(doc, 700)));
	CHECK(d->n == 80);
	v = pk_dict_get_str(d, "key7");
	CHECK(v && v->v.i == 700);
	v = pk_dict_get(d, str(doc, "key39"));
	CHECK(v && v->v.i == 39);
	CHECK(!pk_dict_get_str(d, "key40"));

	/* Tuple keys compare by value; 1 == 1.0 == True as in Python. */
	k1 = pk_new(doc, PK_TUPLE);
	k2 = pk_new(doc, PK_TUPLE);
	CHECK(!pk_append(doc, k1, str(doc, "layer")) && !pk_append(doc, k1, pk_new_int(doc, 1)));
	v = pk_new(doc, PK_FLOAT);
	v->v.f = 1.0;
	CHECK(!pk_append(doc, k2, str(doc, "layer")) && !pk_append(doc, k2, v));
	CHECK(pk_key_equal(k1, k2));
	CHECK(!pk_dict_set(doc, d, k1, str(doc, "first")));
	CHECK(!pk_dict_set(doc, d, k2, str(doc, "second")));
	CHECK(d->n == 82);
	v = pk_dict_get(d, k1);
	CHECK(v && !strcmp(v->v.str.s, "second"));
	v = pk_new(doc, PK_BOOL);
	v->v.b = 1;
	CHECK(pk_key_equal(v, pk_new_int(doc, 1)) && !pk_key_equal(v, pk_new_int(doc, 2)));
	CHECK(!pk_key_equal(str(doc, "a"), pk_new(doc, PK_NONE)));

	/* A clone is independent of its source. */
	c = pk_clone(doc, d);
	CHECK(c && c->n == d->n && c->items != d->items);
	CHECK(!pk_dict_set(doc, c, str(doc, "extra"), pk_new(doc, PK_NONE)));
	CHECK(c->n == 84 && d->n == 82 && !pk_dict_get_str(d, "extra"));
	CHECK(pk_dict_get_str(c, "key7") == pk_dict_get_str(d, "key7"));
	pk_doc_free(doc);
}

static void test_key_paths(void)
{
	struct pk_doc *doc = pk_doc_new();
	struct pk_node *t, *f, *l;
	char buf[64];
	static const uint8_t big[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0x40 };   /* 2**70 */
	static const uint8_t neg[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbf }; /* -(2**70)-1 */

	if (!doc)
		return;
	CHECK(!pk_key_to_path(str(doc, "model.w"), buf, sizeof(buf)) && !strcmp(buf, "model.w"));
	CHECK(!pk_key_to_path(pk_new_int(doc, -17), buf, sizeof(buf)) && !strcmp(buf, "-17"));
	CHECK(!pk_key_to_path(pk_new(doc, PK_NONE), buf, sizeof(buf)) && !strcmp(buf, "None"));
	f = pk_new(doc, PK_FLOAT);
	f->v.f = 0.1;
	CHECK(!pk_key_to_path(f, buf, sizeof(buf)) && !strcmp(buf, "0.1"));
	f->v.f = 3;
	CHECK(!pk_key_to_path(f, buf, sizeof(buf)) && !strcmp(buf, "3.0"));
	l = pk_new(doc, PK_LONG);
	l->v.str.s = (char *)big;
	l->v.str.len = sizeof(big);
	CHECK(!pk_key_to_path(l, buf, sizeof(buf)) && !strcmp(buf, "1180591620717411303424"));
	l->v.str.s = (char *)neg;
	CHECK(!pk_key_to_path(l, buf, sizeof(buf)) && !strcmp(buf, "-1180591620717411303425"));
	t = pk_new(doc, PK_TUPLE);
	pk_append(doc, t, str(doc, "a"));
	CHECK(!pk_key_to_path(t, buf, sizeof(buf)) && !strcmp(buf, "(a,)"));
	pk_append(doc, t, pk_new_int(doc, 2));
	CHECK(!pk_key_to_path(t, buf, sizeof(buf)) && !strcmp(buf, "(a, 2)"));
	CHECK(pk_key_to_path(str(doc, "0123456789"), buf, 10) == -ENOSPC);
	CHECK(!pk_key_to_path(str(doc, "012345678"), buf, 10));
	pk_doc_free(doc);
}

static void test_emit_refusals(void)
{
	struct pk_doc *doc = pk_doc_new();
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };
	struct pk_node *call, *g, *l;

	if (!doc)
		return;
	ck_buf_put(&out, "xyz", 3);
	call = pk_new(doc, PK_CALL);
	CHECK(pk_emit(call, NULL, &out, &err) == -EINVAL && out.len == 3);
	CHECK_MSG(strstr(err.msg, "incomplete"), "'%s'", err.msg);
	g = pk_new(doc, PK_GLOBAL);
	g->v.global.module = "os";
	g->v.global.name = "sys\ntem";
	CHECK(pk_emit(g, NULL, &out, &err) == -EINVAL && out.len == 3);
	CHECK_MSG(strstr(err.msg, "newline"), "'%s'", err.msg);
	/* A tuple that contains itself is no Python object. */
	l = pk_new(doc, PK_TUPLE);
	pk_append(doc, l, l);
	CHECK(pk_emit(l, NULL, &out, &err) == -EINVAL && out.len == 3);
	CHECK_MSG(strstr(err.msg, "recursive"), "'%s'", err.msg);
	pk_doc_free(doc);
	ck_buf_free(&out);
}

static void test_dangerous(void)
{
	static const char *const bad[][2] = {
		{ "os", "system" }, { "posix", "system" }, { "nt", "system" }, { "os.path", "join" },
		{ "subprocess", "Popen" }, { "subprocess", "check_output" }, { "builtins", "eval" },
		{ "builtins", "exec" }, { "__builtin__", "getattr" }, { "builtins", "__import__" },
		{ "builtins", "open" }, { "builtins", "compile" }, { "sys", "exit" },
		{ "shutil", "rmtree" }, { "socket", "socket" }, { "pty", "spawn" },
		{ "importlib", "import_module" }, { "runpy", "run_path" }, { "code", "interact" },
		{ "ctypes", "CDLL" }, { "pickle", "loads" }, { "_pickle", "loads" },
		{ "marshal", "loads" }, { "webbrowser", "open" }, { "operator", "attrgetter" },
		{ "types", "CodeType" }, { "torch", "load" }, { "torch.serialization", "load" },
		{ "torch.storage", "_load_from_bytes" }, { "numpy", "load" }, { "yaml", "load" },
		{ "builtins", "object.__subclasses__" }, { "torch", "os.system" },
		{ "collections", "OrderedDict.__init__.__globals__" }, { "torch", "__builtins__" },
		{ "", "x" }, { "x", "" }, { "timeit", "timeit" }, { "torch.hub", "load_state_dict_from_url" },
	};
	static const char *const good[][2] = {
		{ "collections", "OrderedDict" }, { "torch._utils", "_rebuild_tensor_v2" },
		{ "torch._utils", "_rebuild_tensor_v3" }, { "torch._utils", "_rebuild_parameter" },
		{ "torch", "FloatStorage" }, { "torch", "BFloat16Storage" }, { "torch", "float8_e4m3fn" },
		{ "torch", "Size" }, { "torch", "device" }, { "torch.serialization", "_get_layout" },
		{ "__builtin__", "set" }, { "builtins", "frozenset" }, { "_codecs", "encode" },
		{ "copyreg", "_reconstructor" }, { "copy_reg", "_reconstructor" },
		{ "copyreg", "__newobj__" }, { "numpy.core.multiarray", "_reconstruct" },
		{ "numpy", "dtype" }, { "argparse", "Namespace" },
		{ "torch.distributed.checkpoint.metadata", "Metadata" },
		{ "torch._tensor", "_rebuild_from_type_v2" }, { "pathlib", "PosixPath" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_MSG(pk_global_is_dangerous(bad[i][0], bad[i][1]), "%s.%s not flagged", bad[i][0],
			  bad[i][1]);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK_MSG(!pk_global_is_dangerous(good[i][0], good[i][1]), "%s.%s flagged", good[i][0],
			  good[i][1]);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* An LLM-sized state dict: 10,000 tensors (with a view per storage every
 * tenth one), emitted, parsed and emitted again byte for byte.  Timings are
 * printed for people, never checked. */
static void test_big_state_dict(void)
{
	enum { N = 10000 };
	struct pk_doc *doc = pk_doc_new(), *back = NULL;
	struct ck_buf out = CK_BUF_INIT, again = CK_BUF_INIT;
	struct ck_error err = { "" };
	struct pk_node *root;
	char name[64], key[16];
	uint64_t shape[2] = { 64, 64 };
	int64_t stride[2] = { 64, 1 };
	double t0, t1;

	if (!doc)
		return;
	root = pk_new(doc, PK_DICT);
	root->cls = pk_new(doc, PK_GLOBAL);
	root->cls->v.global.module = "collections";
	root->cls->v.global.name = "OrderedDict";
	root->args = pk_new(doc, PK_TUPLE);
	for (int i = 0; i < N; i++) {
		struct pk_node *st, *t;

		int view = i % 10 == 9, k = i - view;   /* views share the previous storage */

		snprintf(key, sizeof(key), "%d", k);
		snprintf(name, sizeof(name), "model.layers.%d.mlp.up_proj.weight", i);
		st = pk_new_storage(doc, k % 2 ? CK_DT_BF16 : CK_DT_F32, key, "cpu", 8192);
		t = st ? pk_new_tensor(doc, st, st->v.storage->dtype, (uint64_t)view * 4096, 2,
				       shape, stride, 0) : NULL;
		CHECK(t && !pk_dict_set(doc, root, str(doc, name), t));
		if (!t)
			break;
	}
	CHECK(pk_emit(root, NULL, &out, &err) == 0);
	t0 = now();
	CHECK_MSG(pk_parse(out.data, out.len, NULL, &back, &err) == 0, "%s", err.msg);
	t1 = now();
	if (back) {
		CHECK(pk_doc_root(back)->n == 2 * N);
		CHECK(pk_doc_nstorages(back) == pk_doc_nstorages(doc));
		CHECK(pk_emit(pk_doc_root(back), NULL, &again, &err) == 0);
		CHECK(again.len == out.len && !memcmp(again.data, out.data, out.len));
		printf("10000-tensor state dict: %zu bytes, parsed in %.2f ms, emitted in %.2f ms\n",
		       out.len, (t1 - t0) * 1e3, (now() - t1) * 1e3);
	}
	pk_doc_free(back);
	pk_doc_free(doc);
	ck_buf_free(&out);
	ck_buf_free(&again);
}

int main(void)
{
	test_tensors_and_rename();
	test_dicts_and_clones();
	test_key_paths();
	test_emit_refusals();
	test_dangerous();
	test_big_state_dict();
	return t_failures ? 1 : 0;
}
