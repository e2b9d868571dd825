/* DCP .metadata (include/ckptfs/dcp.h): files written by torch 1.13's real
 * DCP (one rank, and two with row-split ShardedTensors) and by the tests'
 * writer of the 2.0-2.3, 2.4 and 2.8 layouts (tests/unit/data/dcp, made by
 * tests/py/dcp_series.py fixtures) parse with every FQN, chunk and storage
 * where torch put it; series merge by FQN (newest wins, older items under
 * their prefix, newest's protocol and class paths) and the result loads
 * in torch's reader as the union; saves of two families, or disagreeing
 * on a dtype, are not mixed; and every kind of bad metadata, built here
 * one defect at a time, is refused with its reason. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/dcp.h"
#include "testutil.h"

static const char *srcdir;

static struct ck_dcp_meta *parse_file(const char *name)
{
	struct ck_dcp_meta *m = NULL;
	struct ck_error err = { "" };
	char path[1024];
	uint8_t *data;
	size_t len;
	int rc;

	data = read_file(pathf(path, sizeof(path), "%s/tests/unit/data/dcp/%s", srcdir, name), &len);
	SETUP(data);
	rc = ck_dcp_parse(data, len, &m, &err);
	CHECK(rc == 0, "%s: %s", name, err.msg);
	free(data);
	return m;
}

static const struct ck_dcp_chunk *chunk(const struct ck_dcp_meta *m, const struct ck_dcp_entry *e, size_t i)
{
	return &m->chunks[e->chunks[i]];
}

/* ---- files written by torch and by the layout writer ---------------------------- */

struct fixture {
	const char *name;
	enum ck_dcp_family family;
	size_t nentries, nchunks;
	int ranks, planner;
};

static const struct fixture fixtures[] = {
	{ "torch113-1rank-step10.metadata", CK_DCP_PROTOTYPE, 49, 49, 1, 0 },
	{ "torch113-1rank-step20.metadata", CK_DCP_PROTOTYPE, 25, 25, 1, 0 },
	{ "torch113-2rank-step10.metadata", CK_DCP_PROTOTYPE, 49, 67, 2, 0 },
	{ "torch113-2rank-step20.metadata", CK_DCP_PROTOTYPE, 25, 31, 2, 0 },
	{ "layout20-2rank-step10.metadata", CK_DCP_V20, 41, 59, 2, 1 },
	{ "layout20-2rank-step20.metadata", CK_DCP_V20, 17, 23, 2, 1 },
	{ "layout24-2rank-step10.metadata", CK_DCP_V24, 49, 67, 2, 1 },
	{ "layout24-2rank-step20.metadata", CK_DCP_V24, 25, 31, 2, 1 },
	{ "layout28-2rank-step10.metadata", CK_DCP_V24, 49, 67, 2, 1 },
	{ "layout28-2rank-step20.metadata", CK_DCP_V24, 25, 31, 2, 1 },
};

static void test_fixture(const struct fixture *fx)
{
	struct ck_dcp_meta *m = parse_file(fx->name);
	const struct ck_dcp_entry *w, *b, *lr, *step;
	const char *layer = strstr(fx->name, "step10") ? "model.layers.0.weight" : "model.layers.1.weight";

	if (!m)
		return;
	CHECK(m->family == fx->family && m->protocol == 4, "%s: family %d protocol %d", fx->name, m->family,
	      m->protocol);
	CHECK(m->nentries == fx->nentries && m->nchunks == fx->nchunks, "%s: %zu entries, %zu chunks", fx->name,
	      m->nentries, m->nchunks);
	CHECK(!m->planner_data == !fx->planner, "%s: planner_data %p", fx->name, (const void *)m->planner_data);
	w = ck_dcp_find(m, layer);
	b = ck_dcp_find(m, "model.embed_tokens.weight");
	step = ck_dcp_find(m, "optim.state.layers.1.weight.step");
	lr = ck_dcp_find(m, fx->family == CK_DCP_V20 ? "optim.param_groups" : "optim.param_groups.0.lr");
	CHECK(w && !w->is_bytes && w->dtype == CK_DT_F32 && w->ndim == 2 && w->size[0] == 16 && w->size[1] == 16,
	      "%s: %s", fx->name, layer);
	CHECK(w && w->nchunks == (size_t)fx->ranks, "%s: %s has %zu chunks", fx->name, layer, w ? w->nchunks : 0);
	if (w && fx->ranks == 2 && w->nchunks == 2) {
		const struct ck_dcp_chunk *c0 = chunk(m, w, 0), *c1 = chunk(m, w, 1);

		CHECK(c0->offsets[0] == 0 && c0->sizes[0] == 8 && c1->offsets[0] == 8 && c1->sizes[0] == 8 &&
			      c1->sizes[1] == 16,
		      "%s: row chunks", fx->name);
		CHECK(strcmp(c0->relpath, c1->relpath) != 0, "%s: both chunks in %s", fx->name, c0->relpath);
		CHECK(c0->length > 8 * 16 * 4 && c1->length > 8 * 16 * 4, "%s: chunk lengths", fx->name);
	}
	CHECK(!strstr(fx->name, "step10") || (b && b->size[0] == 32 && b->size[1] == 16), "%s: embed", fx->name);
	CHECK(step && !step->is_bytes && step->ndim == 0 && step->nchunks == 1, "%s: step", fx->name);
	CHECK(lr && lr->is_bytes && lr->nchunks == 1 && !chunk(m, lr, 0)->transformed, "%s: param_groups bytes",
	      fx->name);
	for (size_t i = 0; i < m->nchunks; i++)
		CHECK(!strncmp(m->chunks[i].relpath, "__", 2) && strstr(m->chunks[i].relpath, ".distcp"), "%s: %s",
		      fx->name, m->chunks[i].relpath);
	ck_dcp_free(m);
}

/* ---- merging -------------------------------------------------------------------- */

static int64_t any_size(void *ctx, const char *relpath)
{
	(void)ctx;
	(void)relpath;
	return INT64_MAX;
}

/* The merged metadata as torch's reader sees it (Python): its FQNs and
 * where each item is, one line per storage entry. */
static char *torch_view(const struct ck_buf *b)
{
	static const char script[] =
		"import os, sys, tempfile, shutil\n"
		"sys.path.insert(0, os.environ[\"CKPT_SRCDIR\"] + \"/tests/py\")\n"
		"import dcp_series\n"
		"d = tempfile.mkdtemp()\n"
		"shutil.copy(sys.argv[1], d + \"/.metadata\")\n"
		"m = dcp_series.read_metadata(d)\n"
		"shutil.rmtree(d)\n"
		"print(len(m.state_dict_metadata))\n"
		"for k, v in m.storage_data.items():\n"
		"    print(k.fqn, v.relative_path, v.offset, v.length)\n";

	return python_on(script, b->data, b->len);
}

static int torch_available(void)
{
	char *out = run_output("cd / && \"${TORCH_PYTHON:-/usr/bin/python3}\" -c \"import torch; print(1)\" 2>/dev/null");
	int ok = out != NULL;

	free(out);
	if (!ok && getenv("CKPT_REQUIRE_ALL") && !strcmp(getenv("CKPT_REQUIRE_ALL"), "1"))
		CHECK(0, "torch is needed where everything must run (CKPT_REQUIRE_ALL=1)");
	return ok;
}

static void test_merge_series(const char *newest_name, const char *older_name, size_t want_fqns)
{
	struct ck_dcp_meta *newest = parse_file(newest_name), *older = parse_file(older_name), *back = NULL;
	struct ck_dcp_source src[2] = { { newest, "", "step-20" }, { older, ".ckptfs-from/step-10/", "step-10" } };
	struct ck_dcp_merged out;
	struct ck_error err = { "" };
	size_t from_older = 0;
	int rc;

	if (!newest || !older)
		goto done;
	rc = ck_dcp_merge(src, 2, CK_DCP_MERGE_ALWAYS_EMIT, &out, &err);
	CHECK(rc == 0, "merge %s + %s: %s", newest_name, older_name, err.msg);
	if (rc)
		goto done;
	CHECK(out.nmerged == 2 && !out.why[0], "%s: merged %zu (%s)", newest_name, out.nmerged, out.why);
	CHECK(out.npicks == want_fqns, "%s: %zu FQNs, want %zu", newest_name, out.npicks, want_fqns);
	CHECK(out.bytes.len > 2 && out.bytes.data[0] == 0x80 && out.bytes.data[1] == 4, "protocol");
	rc = ck_dcp_parse(out.bytes.data, out.bytes.len, &back, &err);
	CHECK(rc == 0, "the merge of %s does not parse: %s", newest_name, err.msg);
	if (back) {
		CHECK(back->family == newest->family && back->nentries == want_fqns, "%s: merged family %d, %zu FQNs",
		      newest_name, back->family, back->nentries);
		CHECK(!strcmp(back->root->cls->v.global.module, newest->root->cls->v.global.module), "class path");
		CHECK(!back->planner_data == !newest->planner_data, "planner_data");
		if (back->planner_data)
			CHECK(back->planner_data->n / 2 == want_fqns, "%zu planner_data entries", back->planner_data->n / 2);
		for (size_t i = 0; i < out.npicks; i++) {
			const struct ck_dcp_pick *p = &out.picks[i];
			const struct ck_dcp_entry *e = &src[p->source].meta->entries[p->entry];
			const struct ck_dcp_entry *f = ck_dcp_find(back, e->fqn);

			from_older += p->source == 1;
			CHECK(p->source == 0 || !ck_dcp_find(newest, e->fqn), "%s picked from the older save", e->fqn);
			CHECK(f && f->nchunks == e->nchunks && f->is_bytes == e->is_bytes, "%s", e->fqn);
			for (size_t k = 0; f && k < f->nchunks && k < e->nchunks; k++) {
				const struct ck_dcp_chunk *a = chunk(back, f, k), *c = chunk(src[p->source].meta, e, k);
				char want[256];

				snprintf(want, sizeof(want), "%s%s", src[p->source].prefix, c->relpath);
				CHECK(!strcmp(a->relpath, want) && a->offset == c->offset && a->length == c->length,
				      "%s chunk %zu: %s %llu+%llu", e->fqn, k, a->relpath, (unsigned long long)a->offset,
				      (unsigned long long)a->length);
			}
		}
		CHECK(from_older == want_fqns - newest->nentries, "%zu FQNs from the older save", from_older);
		CHECK(ck_dcp_check_files(back, any_size, NULL, &err) == 0, "%s", err.msg);
	}
	if (!torch_available()) {
		test_skip("%s cannot import torch: its DCP reader is not asked", test_python());
	} else {
		char *view = torch_view(&out.bytes), *line;
		size_t lines = 0, prefixed = 0;

		CHECK(view != NULL, "torch's reader cannot read the merge of %s", newest_name);
		if (view) {
			CHECK((size_t)strtoul(view, NULL, 10) == want_fqns, "torch sees %s FQNs", view);
			for (line = strtok(strchr(view, '\n'), "\n"); line; line = strtok(NULL, "\n")) {
				lines++;
				prefixed += strstr(line, " .ckptfs-from/step-10/__") != NULL;
			}
			CHECK(back && lines == back->nchunks, "torch sees %zu storage entries", lines);
			CHECK(prefixed && prefixed < lines, "%zu of %zu items under the older save's prefix", prefixed, lines);
		}
		free(view);
	}
done:
	ck_dcp_merged_free(&out);
	ck_dcp_free(back);
	ck_dcp_free(newest);
	ck_dcp_free(older);
}

static void test_not_mixed(const char *newest_name, const char *older_name, const char *why)
{
	struct ck_dcp_meta *newest = parse_file(newest_name), *older = parse_file(older_name), *back = NULL;
	struct ck_dcp_source src[2] = { { newest, "", "step-20" }, { older, "x/", "step-10" } };
	struct ck_dcp_merged out;
	struct ck_error err = { "" };

	if (!newest || !older)
		goto done;
	CHECK(ck_dcp_merge(src, 2, CK_DCP_MERGE_ALWAYS_EMIT, &out, &err) == 0, "%s", err.msg);
	CHECK(out.nmerged == 1 && strstr(out.why, why), "%s + %s: merged %zu, why '%s'", newest_name, older_name,
	      out.nmerged, out.why);
	CHECK(out.npicks == newest->nentries, "%zu FQNs", out.npicks);
	CHECK(ck_dcp_parse(out.bytes.data, out.bytes.len, &back, &err) == 0 && back->nchunks == newest->nchunks,
	      "%s", err.msg);
	ck_dcp_merged_free(&out);
done:
	ck_dcp_free(back);
	ck_dcp_free(newest);
	ck_dcp_free(older);
}

/* A full save over a partial one takes nothing from it: no .metadata to
 * write unless asked. */
static void test_nothing_older(void)
{
	struct ck_dcp_meta *newest = parse_file("torch113-1rank-step10.metadata");
	struct ck_dcp_meta *older = parse_file("torch113-1rank-step20.metadata");
	struct ck_dcp_source src[2] = { { newest, NULL, "step-30" }, { older, "x/", "step-20" } };
	struct ck_dcp_merged out;
	struct ck_error err = { "" };

	if (newest && older) {
		CHECK(ck_dcp_merge(src, 2, 0, &out, &err) == 0 && out.nmerged == 2 && out.npicks == 49 &&
			      out.bytes.len == 0,
		      "%s: %zu bytes written", err.msg, out.bytes.len);
		ck_dcp_merged_free(&out);
		CHECK(ck_dcp_merge(src, 2, CK_DCP_MERGE_ALWAYS_EMIT, &out, &err) == 0 && out.bytes.len > 1000, "%s",
		      err.msg);
		ck_dcp_merged_free(&out);
	}
	ck_dcp_free(newest);
	ck_dcp_free(older);
}

/* ---- metadata built here, one defect at a time ---------------------------------- */

struct sc {
	uint64_t off[2], sz[2];
	const char *path;
	uint64_t offset, length;
};

struct se {
	const char *fqn;
	int bytes;
	const char *dtype;
	int ndim;
	uint64_t size[2];
	int nchunks;
	struct sc c[3];
};

struct spec {
	const char *module;          /* of Metadata & co. */
	const char *props_module;    /* of TensorProperties */
	int nentries;
	struct se e[4];
	int hostile;                 /* planner_data calls os.system */
	int skip_storage;            /* leave the storage entry of e[0].c[0] out */
	int twice;                   /* store e[0].c[0] twice */
	int bytes_offset;            /* the bytes item's key has chunk offsets */
	const char *root_class;
	int protocol;
};

static const struct spec good = {
	"torch.distributed.checkpoint.metadata",
	"torch.distributed.checkpoint.metadata",
	3,
	{
		{ "model.w", 0, "float32", 2, { 4, 4 }, 2,
		  { { { 0, 0 }, { 2, 4 }, "__0_0.distcp", 0, 100 }, { { 2, 0 }, { 2, 4 }, "__1_0.distcp", 0, 100 } } },
		{ "model.b", 0, "bfloat16", 1, { 4 }, 1, { { { 0 }, { 4 }, "__0_0.distcp", 100, 80 } } },
		{ "optim.lr", 1, NULL, 0, { 0 }, 1, { { { 0 }, { 0 }, "__0_0.distcp", 180, 60 } } },
	},
	0, 0, 0, 0, "Metadata", 4,
};

static struct pk_node *obj(struct pk_doc *d, const char *mod, const char *cls, struct pk_node *state)
{
	struct pk_node *n = pk_new(d, PK_NEWOBJ);

	SETUP(n);
	n->cls = pk_new_global(d, mod, cls);
	n->args = pk_new(d, PK_TUPLE);
	n->state = state;
	SETUP(n->cls && n->args);
	return n;
}

static void put(struct pk_doc *d, struct pk_node *dict, const char *k, struct pk_node *v)
{
	SETUP(v && !pk_dict_set(d, dict, pk_new_str(d, k, strlen(k)), v));
}

static struct pk_node *size_node(struct pk_doc *d, int ndim, const uint64_t *v)
{
	struct pk_node *call = pk_new(d, PK_CALL), *args = pk_new(d, PK_TUPLE), *t = pk_new(d, PK_TUPLE);

	SETUP(call && args && t);
	for (int i = 0; i < ndim; i++)
		SETUP(!pk_append(d, t, pk_new_int(d, (int64_t)v[i])));
	SETUP(!pk_append(d, args, t));
	call->cls = pk_new_global(d, "torch", "Size");
	call->args = args;
	return call;
}

static struct pk_node *dict(struct pk_doc *d)
{
	struct pk_node *n = pk_new(d, PK_DICT);

	SETUP(n);
	return n;
}

static void build(const struct spec *s, struct ck_buf *out)
{
	struct pk_doc *d = pk_doc_new();
	struct pk_node *a, *sdm, *sd, *root;
	struct pk_emit_opts eo = { NULL, NULL, 0, s->protocol };
	struct ck_error err;

	SETUP(d);
	a = dict(d);
	sdm = dict(d);
	sd = dict(d);
	for (int i = 0; i < s->nentries; i++) {
		const struct se *e = &s->e[i];

		if (e->bytes) {
			put(d, sdm, e->fqn, obj(d, s->module, "BytesStorageMetadata", NULL));
		} else {
			struct pk_node *ts = dict(d), *props = pk_new(d, PK_TUPLE), *chunks = pk_new(d, PK_LIST);

			SETUP(props && chunks);
			SETUP(!pk_append(d, props, pk_new_global(d, "torch", e->dtype)));
			SETUP(!pk_append(d, props, pk_new(d, PK_NONE)));
			put(d, ts, "properties", obj(d, s->props_module, "TensorProperties", props));
			put(d, ts, "size", size_node(d, e->ndim, e->size));
			for (int k = 0; k < e->nchunks; k++) {
				struct pk_node *cs = dict(d);

				put(d, cs, "offsets", size_node(d, e->ndim, e->c[k].off));
				put(d, cs, "sizes", size_node(d, e->ndim, e->c[k].sz));
				SETUP(!pk_append(d, chunks, obj(d, s->module, "ChunkStorageMetadata", cs)));
			}
			put(d, ts, "chunks", chunks);
			put(d, sdm, e->fqn, obj(d, s->module, "TensorStorageMetadata", ts));
		}
		for (int k = 0; k < e->nchunks; k++) {
			struct pk_node *ks = dict(d), *vs = dict(d);
			int copies = i == 0 && k == 0 ? (s->skip_storage ? 0 : 1 + s->twice) : 1;

			put(d, ks, "fqn", pk_new_str(d, e->fqn, strlen(e->fqn)));
			put(d, ks, "index", e->bytes ? pk_new(d, PK_NONE) : pk_new_int(d, k));
			if (!e->bytes || s->bytes_offset)
				put(d, ks, "offset", size_node(d, e->bytes ? 1 : e->ndim, e->c[k].off));
			put(d, vs, "relative_path", pk_new_str(d, e->c[k].path, strlen(e->c[k].path)));
			put(d, vs, "offset", pk_new_int(d, (int64_t)e->c[k].offset));
			put(d, vs, "length", pk_new_int(d, (int64_t)e->c[k].length));
			for (int c = 0; c < copies; c++) {
				/* keys are objects: two equal ones are two entries */
				SETUP(!pk_append(d, sd, obj(d, s->module, "MetadataIndex", ks)));
				SETUP(!pk_append(d, sd, obj(d, "torch.distributed.checkpoint.filesystem", "_StorageInfo", vs)));
			}
		}
	}
	put(d, a, "state_dict_metadata", sdm);
	if (s->hostile) {
		struct pk_node *call = pk_new(d, PK_CALL), *args = pk_new(d, PK_TUPLE);

		SETUP(call && args && !pk_append(d, args, pk_new_str(d, "true", 4)));
		call->cls = pk_new_global(d, "os", "system");
		call->args = args;
		put(d, a, "planner_data", call);
	} else {
		put(d, a, "planner_data", pk_new(d, PK_NONE));
	}
	put(d, a, "storage_data", sd);
	root = obj(d, s->module, s->root_class, a);
	out->len = 0;
	SETUP(pk_emit(root, &eo, out, &err) == 0);
	pk_doc_free(d);
}

static void expect(const struct spec *s, const char *why)
{
	struct ck_buf b = CK_BUF_INIT;
	struct ck_dcp_meta *m = NULL;
	struct ck_error err = { "" };
	int rc;

	build(s, &b);
	rc = ck_dcp_parse(b.data, b.len, &m, &err);
	if (!why)
		CHECK(rc == 0 && m && m->nentries == (size_t)s->nentries, "a good spec refused: %s", err.msg);
	else
		CHECK(rc == -EINVAL && strstr(err.msg, why), "want '%s', got %d '%s'", why, rc, err.msg);
	ck_dcp_free(m);
	ck_buf_free(&b);
}

static void test_defects(void)
{
	struct spec s;

	expect(&good, NULL);
	s = good;
	s.protocol = 2;
	expect(&s, NULL);
	s = good;
	s.e[0].c[0].path = "/etc/passwd";
	expect(&s, "'/etc/passwd' is absolute");
	s = good;
	s.e[0].c[0].path = "../checkpoint-10/__0_0.distcp";
	expect(&s, "leaves the checkpoint");
	s = good;
	s.e[1].c[0].path = "sub/../../x.distcp";
	expect(&s, "leaves the checkpoint");
	s = good;
	s.e[1].c[0].path = "a//b";
	expect(&s, "empty or '.' component");
	s = good;
	s.e[1].c[0].path = ".ckptfs-from/step-10/__0_3.distcp";
	expect(&s, NULL);
	s = good;
	s.e[0].c[1].off[0] = 1;    /* rows 1-2 twice, row 3 never */
	expect(&s, "overlap");
	s = good;
	s.e[0].c[1].sz[0] = 1;     /* row 3 missing */
	expect(&s, "chunks cover 12 of its 16 elements");
	s = good;
	s.e[0].c[1].off[0] = 3;    /* past the last row */
	expect(&s, "reaches outside the tensor");
	s = good;
	s.e[0].nchunks = 1;
	expect(&s, "chunks cover 8 of its 16");
	s = good;
	s.skip_storage = 1;
	expect(&s, "nothing stores 'model.w' at [0, 0]");
	s = good;
	s.twice = 1;
	expect(&s, "'model.w' at [0, 0] is stored twice");
	s = good;
	s.bytes_offset = 1;
	expect(&s, "a bytes item with chunk offsets");
	s = good;
	s.hostile = 1;
	expect(&s, "dangerous global os.system");
	s = good;
	s.root_class = "SomethingElse";
	expect(&s, "not a DCP Metadata object");
	s = good;
	s.e[1].dtype = "not_a_dtype";
	expect(&s, "do not name a torch dtype");
	s = good;
	s.e[1].c[0].offset = UINT64_MAX / 2 - 10;
	s.e[1].c[0].length = UINT64_MAX / 2 + 100;
	expect(&s, "not a byte range");
	s = good;
	s.e[0].fqn = "optim.lr";    /* two descriptions of one FQN: the dict keeps the last */
	expect(&s, "");
}

static int64_t sizes_fn(void *ctx, const char *relpath)
{
	const int64_t *sz = ctx;

	if (!strcmp(relpath, "__0_0.distcp"))
		return sz[0];
	if (!strcmp(relpath, "__1_0.distcp"))
		return sz[1];
	return -ENOENT;
}

static void test_files(void)
{
	struct ck_buf b = CK_BUF_INIT;
	struct ck_dcp_meta *m = NULL;
	struct ck_error err = { "" };
	int64_t sz[2] = { 240, 100 };

	build(&good, &b);
	SETUP(ck_dcp_parse(b.data, b.len, &m, &err) == 0);
	CHECK(ck_dcp_check_files(m, sizes_fn, sz, &err) == 0, "%s", err.msg);
	sz[0] = 239;
	CHECK(ck_dcp_check_files(m, sizes_fn, sz, &err) == -EINVAL &&
		      strstr(err.msg, "'optim.lr': bytes 180-240 of __0_0.distcp, which has 239"),
	      "%s", err.msg);
	sz[0] = 240;
	sz[1] = -ENOENT;
	CHECK(ck_dcp_check_files(m, sizes_fn, sz, &err) == -EINVAL && strstr(err.msg, "which is not there"), "%s",
	      err.msg);
	ck_dcp_free(m);
	ck_buf_free(&b);
}

/* Truncated and garbled metadata are refused (never a crash). */
static void test_garbled(void)
{
	struct ck_buf b = CK_BUF_INIT;
	struct ck_dcp_meta *m = NULL;
	struct ck_error err = { "" };
	size_t refused = 0;

	build(&good, &b);
	for (size_t cut = 0; cut < b.len; cut++) {
		int rc = ck_dcp_parse(b.data, cut, &m, &err);

		CHECK(rc == -EINVAL, "cut at %zu: %d", cut, rc);
		ck_dcp_free(m);
		m = NULL;
	}
	for (size_t i = 2; i < b.len; i++) {
		uint8_t save = b.data[i];

		b.data[i] ^= 0x5a;
		if (ck_dcp_parse(b.data, b.len, &m, &err) == -EINVAL)
			refused++;
		ck_dcp_free(m);
		m = NULL;
		b.data[i] = save;
	}
	CHECK(refused > b.len / 2, "only %zu of %zu flipped bytes refused", refused, b.len);
	ck_buf_free(&b);
}

/* An older save whose TensorProperties live in another module (2.2 vs 2.3)
 * takes the newest save's class when merged. */
static void test_class_paths(void)
{
	struct spec newer = good, older = good;
	struct ck_buf a = CK_BUF_INIT, b = CK_BUF_INIT;
	struct ck_dcp_meta *ma = NULL, *mb = NULL, *back = NULL;
	struct ck_dcp_merged out;
	struct ck_error err = { "" };

	newer.nentries = 1;
	older.props_module = "torch.distributed._shard.sharded_tensor.metadata";
	older.e[0].fqn = "model.w0";
	build(&newer, &a);
	build(&older, &b);
	SETUP(ck_dcp_parse(a.data, a.len, &ma, &err) == 0 && ck_dcp_parse(b.data, b.len, &mb, &err) == 0);
	{
		struct ck_dcp_source src[2] = { { ma, NULL, NULL }, { mb, "o/", NULL } };

		CHECK(ck_dcp_merge(src, 2, CK_DCP_MERGE_ALWAYS_EMIT, &out, &err) == 0 && out.nmerged == 2 && out.npicks == 4, "%s %s", err.msg,
		      out.why);
		CHECK(!memmem(out.bytes.data, out.bytes.len, "_shard", 6), "the older class path survived");
		CHECK(ck_dcp_parse(out.bytes.data, out.bytes.len, &back, &err) == 0 && back->nentries == 4, "%s",
		      err.msg);
		ck_dcp_merged_free(&out);
	}
	ck_dcp_free(back);
	ck_dcp_free(ma);
	ck_dcp_free(mb);
	ck_buf_free(&a);
	ck_buf_free(&b);
}

int main(void)
{
	srcdir = getenv("CKPT_SRCDIR") ? getenv("CKPT_SRCDIR") : ".";
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++)
		test_fixture(&fixtures[i]);
	test_merge_series("torch113-1rank-step20.metadata", "torch113-1rank-step10.metadata", 49);
	test_merge_series("torch113-2rank-step20.metadata", "torch113-2rank-step10.metadata", 49);
	test_merge_series("layout24-2rank-step20.metadata", "layout24-2rank-step10.metadata", 49);
	test_merge_series("layout28-2rank-step20.metadata", "layout24-2rank-step10.metadata", 49);
	test_merge_series("layout20-2rank-step20.metadata", "layout20-2rank-step10.metadata", 41);
	test_not_mixed("layout24-2rank-step20.metadata", "layout20-2rank-step10.metadata", "flattened differently");
	test_not_mixed("layout24-2rank-step20.metadata", "torch113-2rank-step10.metadata", "torch 1.13");
	test_not_mixed("layout24-2rank-step20-bf16.metadata", "layout24-2rank-step10.metadata",
		       "'model.layers.1.weight' is float32 [16, 16] in step-10 but bfloat16 [16, 16] in step-20");
	test_nothing_older();
	test_defects();
	test_files();
	test_garbled();
	test_class_paths();
	return test_result();
}
