/* The control directory's pure parts: naming index-keyed optimizer state
 * by order and shape (optim_match), a DCP tensor's bytes from its chunks
 * (ctl_dcp_runs), renumbering blocks in names, and the recipe parser's
 * results and lines. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/catalog.h"
#include "ckptfs/ctldir.h"
#include "ckptfs/recipe.h"
#include "ckptfs/store.h"
#include "ctl/ctl_int.h"
#include "testutil.h"

static struct optim_shape shp(int ndim, uint64_t a, uint64_t b)
{
	struct optim_shape s = { ndim, { a, b } };

	return s;
}

static void test_optim_match(void)
{
	/* A tiny model in state-dict order: embed, [norm, q, k, norm2, mlp] x 2,
	 * a buffer, final norm, head.  Two groups as the HF Trainer makes them:
	 * matrices (decayed) and vectors. */
	struct optim_shape model[] = {
		shp(2, 64, 32),
		shp(1, 32, 0), shp(2, 32, 32), shp(2, 32, 32), shp(1, 32, 0), shp(2, 64, 32),
		shp(1, 32, 0), shp(2, 32, 32), shp(2, 32, 32), shp(1, 32, 0), shp(2, 64, 32),
		shp(1, 16, 0),   /* a buffer: in the state dict, not the optimizer */
		shp(1, 32, 0), shp(2, 64, 32),
	};
	struct optim_shape g0[] = { shp(2, 64, 32), shp(2, 32, 32), shp(2, 32, 32), shp(2, 64, 32),
				    shp(2, 32, 32), shp(2, 32, 32), shp(2, 64, 32), shp(2, 64, 32) };
	struct optim_shape g1[] = { shp(1, 32, 0), shp(1, 32, 0), shp(1, 32, 0), shp(1, 32, 0), shp(1, 32, 0) };
	const struct optim_shape *groups[] = { g0, g1 };
	size_t len[] = { 8, 5 }, match[13];
	const size_t want[13] = { 0, 2, 3, 5, 7, 8, 10, 13, 1, 4, 6, 9, 12 };
	size_t one = 1;

	CHECK(optim_match(model, 14, groups, len, 2, match) == 0, "two groups match");
	CHECK(!memcmp(match, want, sizeof(want)), "matched to the right tensors");
	/* A parameter whose shape is unknown (no state) between two of one
	 * shape is not forced: no names rather than wrong ones. */
	g0[1].ndim = -1;
	CHECK(optim_match(model, 14, groups, len, 2, match) == -ENOENT, "unknown shape: not forced");
	g0[1] = shp(2, 32, 32);
	/* More parameters than the model has tensors (a partial first save). */
	CHECK(optim_match(model, 3, groups, len, 2, match) == -ENOENT, "too few tensors");
	/* Two groups that claim one tensor. */
	groups[1] = g0;
	len[1] = 1;
	CHECK(optim_match(model, 14, groups, len, 2, match) == -ENOENT, "a tensor claimed twice");
	/* One group of vectors among buffers of the same shape: not forced. */
	{
		struct optim_shape m2[] = { shp(1, 8, 0), shp(1, 8, 0) }, p[] = { shp(1, 8, 0) };
		const struct optim_shape *gp[] = { p };

		CHECK(optim_match(m2, 2, gp, &one, 1, match) == -ENOENT, "ambiguous by shape");
	}
}

static void test_rename(void)
{
	char out[256];

	CHECK(ck_block_rename("model.layers.3.mlp.up_proj.weight", 3, 1, out, sizeof(out)) == 0 &&
	      !strcmp(out, "model.layers.1.mlp.up_proj.weight"), "layers.3 -> layers.1: %s", out);
	CHECK(ck_block_rename("transformer.h.12.attn.c_attn.weight", 12, 0, out, sizeof(out)) == 0 &&
	      !strcmp(out, "transformer.h.0.attn.c_attn.weight"), "h.12 -> h.0: %s", out);
	CHECK(ck_block_rename("model.layers.31", 31, 4, out, sizeof(out)) == 0 && !strcmp(out, "model.layers.4"),
	      "at the end: %s", out);
	CHECK(ck_block_rename("model.layers.3.weight", 2, 1, out, sizeof(out)) == -ENOENT, "another block");
	CHECK(ck_block_rename("model.mylayers.3.weight", 3, 1, out, sizeof(out)) == -ENOENT, "not a segment");
	CHECK(ck_block_rename("model.layers.3x.weight", 3, 1, out, sizeof(out)) == -ENOENT, "not a number");
	CHECK(ck_block_rename("model.layers.3.weight", 3, 100, out, 10) == -ENOSPC, "too long");
	CHECK(ck_layer_block("layers.17") == 17 && ck_layer_block("embed") == -1 && ck_layer_block("layers.x") == -1,
	      "ck_layer_block");
}

static int parse(const char *text, struct ck_recipe **r, unsigned *line, struct ck_error *err)
{
	return ck_recipe_parse(text, strlen(text), r, line, err);
}

static void test_parse(void)
{
	static const char good[] =
		"slices:\n"
		"  - sources:\n"
		"      - model: a/c-1\n"
		"        layer_range: [0, 2]\n"
		"  - sources:\n"
		"      - {model: b/c-2, layer_range: [2, 4]}\n"
		"merge_method: passthrough\n"
		"pre_weights:\n"
		"  - name: embed.weight\n"
		"    model: a/c-1\n"
		"post_weights:\n"
		"  - {name: head.weight, model: b/c-3}\n";
	struct ck_error err = { "" };
	struct ck_recipe *r = NULL;
	unsigned line = 99;

	CHECK(ck_recipe_parse(good, strlen(good), &r, &line, &err) == 0, "good recipe: %s", err.msg);
	if (r) {
		CHECK(r->nslices == 2 && r->slices[1].start == 2 && r->slices[1].end == 4 &&
		      !strcmp(r->slices[1].model.series, "b") && !strcmp(r->slices[1].model.ckpt, "c-2"), "slices");
		CHECK(r->slices[0].line == 4 && r->slices[1].line == 6, "slice lines %u %u", r->slices[0].line,
		      r->slices[1].line);
		CHECK(r->nweights == 2 && !strcmp(r->weights[0].name, "embed.weight") && r->weights[1].line == 12,
		      "weights");
		CHECK(!r->has_base && !strcmp(r->base.series, "b") && !strcmp(r->base.ckpt, "c-2"),
		      "base: the last slice's model");
		ck_recipe_free(r);
	}
	CHECK(parse("slices: [{sources: [{model: a/b, layer_range: [0, 1]}]}]\nmerge_method: ties\n", &r, &line, &err) == -EINVAL && line == 2 && strstr(err.msg, "out of scope"),
	      "ties refused at line 2: %u %s", line, err.msg);
	CHECK(parse("merge_method: passthrough\nslices:\n  - sources:\n    - model: a\n", &r, &line, &err) == -EINVAL && line == 4 && strstr(err.msg, "SERIES/CHECKPOINT"),
	      "model without a series: %u %s", line, err.msg);
	CHECK(parse("merge_method: passthrough\nmerge_method: passthrough\n", &r, &line, &err) == -EINVAL && line == 2 &&
	      strstr(err.msg, "twice"), "a key twice: %u %s", line, err.msg);
	CHECK(parse("x: &a [*a]\n", &r, &line, &err) == -EINVAL, "an alias of itself: %s", err.msg);
	CHECK(ck_recipe_parse("", 0, &r, &line, &err) == -EINVAL, "empty");
	CHECK(parse("a: 1\n---\nb: 2\n", &r, &line, &err) == -EINVAL && line == 3,
	      "two documents: %u %s", line, err.msg);
	CHECK(ck_recipe_name_ok("mix-2.v1") && !ck_recipe_name_ok(".x") && !ck_recipe_name_ok("a/b") &&
	      !ck_recipe_name_ok(""), "names");
}

/* A registered entry: a report that changes at every open, and is gone
 * after the third. */
static int opens;

static int health(void *ctx, struct ck_view *v, struct ck_vfile **out)
{
	char text[64];
	int n = snprintf(text, sizeof(text), "{\"opens\": %d, \"ctx\": \"%s\"}\n", ++opens, (const char *)ctx);

	return opens > 3 ? -ENOENT : ck_vfile_from_bytes(v, "json", text, (size_t)n, out);
}

/* A series file: there for series "up" only. */
static int flag(void *ctx, const char *series, struct ck_view *v, struct ck_vfile **out)
{
	(void)ctx;
	return strcmp(series, "up") ? -ENOENT : ck_vfile_from_bytes(v, "json", "{\"up\": 1}\n", 10, out);
}

static void read_whole(struct ck_vfile *f, char *buf, size_t size)
{
	struct ck_extent e[4];
	int n = ck_vfile_map(f, 0, size - 1, e, 4);
	size_t at = 0;

	for (int i = 0; i < n; i++) {
		CHECK(ck_extent_read(&e[i], buf + at) == 0, "read");
		at += e[i].len;
	}
	buf[at] = 0;
}

static void test_registry(void)
{
	char store[] = "/tmp/t_ctl_units.XXXXXX", a[128], b[128];
	struct ck_error err = { "" };
	struct ck_ctl_dirent *d = NULL;
	struct ck_view *v = NULL;
	struct ck_ctl *c = NULL;
	struct ck_vfile *f;
	struct ck_vattr attr;
	uint64_t ino;
	size_t n = 0;
	int found = 0;

	SETUP(mkdtemp(store));
	SETUP(ck_store_init(store, &err) == 0);
	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	SETUP(ck_ctl_open(v, store, NULL, &c) == 0);
	CHECK(ck_ctl_register_file(c, "health.json", health, "gpu0") == 0, "register");
	CHECK(ck_ctl_register_file(c, "health.json", health, "gpu0") == -EEXIST, "a name once");
	CHECK(ck_ctl_register_file(c, "a/b", health, NULL) == -EINVAL, "no slash");
	CHECK(ck_ctl_readdir(c, CK_CTL_ROOT_INO, &d, &n) == 0, "readdir");
	for (size_t i = 0; i < n; i++)
		found += !strcmp(d[i].name, "health.json") && !d[i].is_dir;
	ck_ctl_dirents_free(d, n);
	CHECK(found == 1 && n == 5, "listed with the four views: %zu entries", n);
	CHECK(ck_ctl_resolve(c, "health.json", &ino) == 0, "resolve");
	CHECK(ck_ctl_volatile(c, ino) && ck_ctl_renamable(c, ino), "built at every open, not cached");
	CHECK(ck_ctl_getattr(c, ino, &attr) == 0 && attr.size > 10, "stat");
	CHECK(attr.mode == (S_IFREG | 0444) && attr.uid == getuid(), "mode %o, owner %u", (unsigned)attr.mode,
	      (unsigned)attr.uid);
	CHECK(ck_ctl_getattr(c, CK_CTL_ROOT_INO, &attr) == 0 && attr.mode == (S_IFDIR | 0555), "the directory");
	CHECK(ck_ctl_open_file(c, ino, &f) == 0, "open");
	read_whole(f, a, sizeof(a));
	ck_vfile_put(f);
	CHECK(ck_ctl_open_file(c, ino, &f) == 0, "open again");
	read_whole(f, b, sizeof(b));
	ck_vfile_put(f);
	CHECK(strstr(a, "\"gpu0\"") && strcmp(a, b), "fresh bytes at each open: %s / %s", a, b);
	CHECK(ck_ctl_getattr(c, ino, &attr) == -ENOENT && ck_ctl_open_file(c, ino, &f) == -ENOENT,
	      "gone when its generator says so");
	CHECK(ck_ctl_resolve(c, "weights", &ino) == 0 && !ck_ctl_volatile(c, ino) && !ck_ctl_renamable(c, ino),
	      "weights/ stays");

	/* A file in every series directory, there while its generator says so. */
	CHECK(ck_ctl_register_series_file(c, "flag", flag, NULL) == 0, "register a series file");
	CHECK(ck_ctl_register_series_file(c, "flag", flag, NULL) == -EEXIST, "a series file's name once");
	CHECK(ck_ctl_register_series_file(c, "a/b", flag, NULL) == -EINVAL, "a series file: no slash");
	CHECK(ck_ctl_is_series_file(c, "flag") && !ck_ctl_is_series_file(c, "health.json"), "series file names");
	CHECK(ck_ctl_lookup_series_file(c, "down", "flag", &attr) == -ENOENT, "absent where its generator says");
	CHECK(ck_ctl_lookup_series_file(c, "up", "nope", &attr) == -ENOENT, "not registered");
	CHECK(ck_ctl_lookup_series_file(c, "up", "flag", &attr) == 0 && attr.size == 10 &&
	      attr.mode == (S_IFREG | 0444) && ck_ctl_owns(attr.ino), "there: %o %llu", (unsigned)attr.mode,
	      (unsigned long long)attr.size);
	ino = attr.ino;
	CHECK(ck_ctl_lookup_series_file(c, "up", "flag", &attr) == 0 && attr.ino == ino, "one inode per series");
	CHECK(ck_ctl_volatile(c, ino) && ck_ctl_renamable(c, ino), "a series file is built at every open");
	CHECK(ck_ctl_open_file(c, ino, &f) == 0, "open a series file");
	read_whole(f, a, sizeof(a));
	ck_vfile_put(f);
	CHECK(!strcmp(a, "{\"up\": 1}\n"), "a series file's bytes: %s", a);
	CHECK(ck_ctl_lookup_series_file(c, "down", "flag", &attr) == -ENOENT, "still absent elsewhere");
	CHECK(ck_ctl_readdir(c, CK_CTL_ROOT_INO, &d, &n) == 0 && n == 5, "series files are not in .ckptfs");
	ck_ctl_dirents_free(d, n);
	ck_ctl_close(c);
	ck_view_close(v);
	run_command(pathf(a, sizeof(a), "rm -rf '%s'", store), NULL);
}

/* A 2-D tensor of rows x cols and its chunks {row, col, nrows, ncols}. */
static int runs_of(uint64_t rows, uint64_t cols, const uint64_t (*box)[4], size_t nbox, struct ctl_run **r,
		   size_t *n)
{
	struct ck_dcp_chunk c[8];
	size_t idx[8], order[8];
	struct ck_dcp_meta m;
	struct ck_dcp_entry e;

	memset(&m, 0, sizeof(m));
	memset(&e, 0, sizeof(e));
	memset(c, 0, sizeof(c));
	for (size_t k = 0; k < nbox; k++) {
		c[k].offsets[0] = box[k][0];
		c[k].offsets[1] = box[k][1];
		c[k].sizes[0] = box[k][2];
		c[k].sizes[1] = box[k][3];
		idx[k] = order[k] = k;
	}
	m.chunks = c;
	m.nchunks = nbox;
	e.fqn = "w";
	e.dtype = CK_DT_F32;
	e.ndim = 2;
	e.size[0] = rows;
	e.size[1] = cols;
	e.chunks = idx;
	e.nchunks = nbox;
	return ctl_dcp_runs(&m, &e, order, r, n);
}

static void test_dcp_runs(void)
{
	/* by rows: one run per chunk, in row order whatever the chunks' */
	static const uint64_t rows[][4] = { { 3, 0, 5, 4 }, { 0, 0, 3, 4 } };
	/* by columns: a run per row of each chunk, alternating */
	static const uint64_t cols[][4] = { { 0, 0, 3, 2 }, { 0, 2, 3, 3 } };
	/* 2 x 2 blocks, uneven */
	static const uint64_t grid[][4] = { { 0, 0, 1, 3 }, { 0, 3, 1, 1 }, { 1, 0, 2, 3 }, { 1, 3, 2, 1 } };
	static const uint64_t gap[][4] = { { 0, 0, 2, 4 }, { 3, 0, 1, 4 } };
	static const uint64_t overlap[][4] = { { 0, 0, 2, 3 }, { 0, 2, 2, 2 } };
	static const uint64_t outside[][4] = { { 0, 0, 2, 4 }, { 2, 0, 3, 4 } };
	static const uint64_t empty[][4] = { { 0, 0, 2, 4 }, { 2, 0, 0, 4 } };
	/* as many elements as the tensor, one row twice and one never */
	static const uint64_t shifted[][4] = { { 0, 0, 2, 4 }, { 1, 0, 2, 4 } };
	struct ctl_run *r = NULL;
	size_t n = 0;

	CHECK(runs_of(8, 4, rows, 2, &r, &n) == 0 && n == 2, "a split by rows: %zu runs", n);
	CHECK(r && r[0].k == 1 && r[0].at == 0 && r[0].len == 12 && r[1].k == 0 && r[1].at == 12 && r[1].len == 20,
	      "a split by rows: its chunks in row order");
	free(r);
	r = NULL;
	CHECK(runs_of(3, 5, cols, 2, &r, &n) == 0 && n == 6, "a split by columns: %zu runs", n);
	for (size_t i = 0; r && i < n; i++) {
		size_t row = i / 2, k = i % 2;

		CHECK(r[i].k == k && r[i].at == row * 5 + (k ? 2 : 0) && r[i].len == (k ? 3u : 2u) &&
		      r[i].from == row * (k ? 3 : 2), "a split by columns: run %zu (chunk %zu at %llu from %llu)", i,
		      r[i].k, (unsigned long long)r[i].at, (unsigned long long)r[i].from);
	}
	free(r);
	r = NULL;
	CHECK(runs_of(3, 4, grid, 4, &r, &n) == 0 && n == 6, "blocks: %zu runs", n);
	for (size_t i = 0; r && i < n; i++)
		CHECK(r[i].at == (i / 2) * 4 + (i % 2 ? 3 : 0) && r[i].k == (i < 2 ? 0 : 2) + i % 2 &&
		      r[i].from == (i < 2 ? 0 : ((i - 2) / 2) * (i % 2 ? 1 : 3)), "blocks: run %zu", i);
	free(r);
	r = NULL;
	CHECK(runs_of(4, 4, gap, 2, &r, &n) == -1 && !r, "a row no chunk holds is refused");
	CHECK(runs_of(2, 4, overlap, 2, &r, &n) == -1 && !r, "overlapping chunks are refused");
	CHECK(runs_of(4, 4, outside, 2, &r, &n) == -1 && !r, "a chunk past the tensor's end is refused");
	CHECK(runs_of(4, 4, shifted, 2, &r, &n) == -1 && !r, "an overlap that a gap makes up for is refused");
	CHECK(runs_of(2, 4, empty, 2, &r, &n) == 0 && n == 1 && r && r[0].len == 8, "an empty chunk adds nothing");
	free(r);
}

int main(void)
{
	test_registry();
	test_optim_match();
	test_dcp_runs();
	test_rename();
	test_parse();
	return test_result();
}
