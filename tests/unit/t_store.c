/* The store end to end without torch: a run directory made of real
 * checkpoint files from $CKPT_FIXTURES (written by torch 2.x and the
 * Rust safetensors writer) plus damaged and hostile copies is imported, and
 * the index must hold what the files hold: tensor names, dtypes, shapes,
 * layers, byte ranges whose XXH3-128 the test recomputes from the files,
 * and the refusals with their reasons.  Then re-import, change detection,
 * user step patterns, single-file checkpoints and read-only stores. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/store.h"
#include "ckptfs/torchzip.h"
#include "t_store_pk.h"
#include "testutil.h"

static char tmp[256];
static const char *fixtures;

/* read_file for the files a test is built from: without them it cannot run. */
static uint8_t *read_all(const char *path, size_t *n)
{
	uint8_t *p = read_file(path, n);

	SETUP(p);
	return p;
}

/* Copies a fixture, keeping only its first `keep` bytes when keep > 0. */
static void copy_fixture(const char *name, const char *dst, size_t keep)
{
	char src[512];
	uint8_t *p;
	size_t n;

	p = read_all(pathf(src, sizeof(src), "%s/%s", fixtures, name), &n);
	write_bytes(dst, p, keep && keep < n ? keep : n);
	free(p);
}

/* Makes tmp/sub. */
static void mkdirf(const char *sub)
{
	char p[512];

	SETUP(mkdir(pathf(p, sizeof(p), "%s/%s", tmp, sub), 0755) == 0);
}

static int zip_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	const uint8_t *file = ((const uint8_t *const *)ctx)[0];
	size_t size = (size_t)((const uint8_t *const *)ctx)[1];

	if (off > size || len > size - off)
		return -EIO;
	memcpy(buf, file + off, len);
	return 0;
}

/* A copy of a torch fixture with one byte of record data/0 flipped. */
static void flip_storage_byte(const char *name, const char *dst)
{
	struct ck_error err = { { 0 } };
	struct tz_archive ar = { 0 };
	const struct tz_entry *e;
	const uint8_t *ctx[2];
	char src[512];
	uint8_t *p;
	size_t n;

	p = read_all(pathf(src, sizeof(src), "%s/%s", fixtures, name), &n);
	ctx[0] = p;
	ctx[1] = (const uint8_t *)(uintptr_t)n;
	SETUP(tz_read(zip_pread, ctx, n, &ar, &err) == 0);
	e = tz_find(&ar, "data/0");
	SETUP(e && e->size > 0);
	p[e->data_offset] ^= 0x10;
	write_bytes(dst, p, n);
	tz_archive_free(&ar);
	free(p);
}

struct emit_ctx {
	FILE *f;
	const struct { const void *p; size_t n; } *data;
};

static int emit(void *ctx, long record, const void *bytes, uint64_t len)
{
	struct emit_ctx *ec = ctx;
	const void *p = record < 0 ? bytes : ec->data[record].p;

	return fwrite(p, 1, (size_t)len, ec->f) == len ? 0 : -EIO;
}

/* A torch.save-shaped zip whose pickle calls os.system("echo pwned"). */
static void write_evil(const char *dst)
{
	static const uint8_t pkl[] = "\x80\x02" "cos\nsystem\nq\x00" "X\x0a\x00\x00\x00" "echo pwned"
				     "q\x01\x85q\x02Rq\x03.";
	static const char version[] = "3\n";
	const struct { const void *p; size_t n; } data[] = {
		{ pkl, sizeof(pkl) - 1 }, { version, 2 },
	};
	struct tz_record recs[] = {
		{ "data.pkl", sizeof(pkl) - 1, ck_crc32(0, pkl, sizeof(pkl) - 1) },
		{ "version", 2, ck_crc32(0, version, 2) },
	};
	struct emit_ctx ec = { .data = (const void *)data };

	ec.f = fopen(dst, "wb");
	SETUP(ec.f && tz_write("archive", recs, 2, 64, emit, &ec) == 0 && fclose(ec.f) == 0);
}

/* An optimizer state_dict whose first param group names its parameters
 * (torch >= 2.x optimizers built from named_parameters()):
 *   {'state': {0: {'exp_avg': T(4,2)}, 1: {'exp_avg': T(3)}, 2: {'exp_avg': T(2)}},
 *    'param_groups': [{'lr': 1, 'params': [0, 1], 'param_names': [...]},
 *                     {'lr': 1, 'params': [2]}]} */
static void write_named_optimizer(const char *dst)
{
	static const unsigned rows[] = { 4, 3, 2 }, cols[] = { 2, 0, 0 };
	static uint8_t zeros[32];
	struct pk p = { .b = CK_BUF_INIT };
	struct { const void *p; size_t n; } data[5];
	struct tz_record recs[5];
	struct emit_ctx ec = { .data = (const void *)data };
	unsigned i;

	pka_op(&p, "\x80\x02}", 3);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "state");
	pka_op(&p, "}", 1);
	pka_put(&p);
	pka_op(&p, "(", 1);
	for (i = 0; i < 3; i++) {
		pka_int1(&p, (uint8_t)i);
		pka_op(&p, "}", 1);
		pka_put(&p);
		pka_str(&p, "exp_avg");
		pka_tensor(&p, rows[i], cols[i]);
		pka_op(&p, "s", 1);
	}
	pka_op(&p, "u", 1);
	pka_str(&p, "param_groups");
	pka_op(&p, "]", 1);
	pka_put(&p);
	pka_op(&p, "(}", 2);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "lr");
	pka_int1(&p, 1);
	pka_str(&p, "params");
	pka_op(&p, "]", 1);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_int1(&p, 0);
	pka_int1(&p, 1);
	pka_op(&p, "e", 1);
	pka_str(&p, "param_names");
	pka_op(&p, "]", 1);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "model.layers.5.mlp.up_proj.weight");
	pka_str(&p, "lm_head.weight");
	pka_op(&p, "eu}", 3);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "lr");
	pka_int1(&p, 1);
	pka_str(&p, "params");
	pka_op(&p, "]", 1);
	pka_put(&p);
	pka_int1(&p, 2);
	pka_op(&p, "aueu.", 5);

	data[0].p = p.b.data;
	data[0].n = p.b.len;
	recs[0] = (struct tz_record){ "data.pkl", p.b.len, ck_crc32(0, p.b.data, p.b.len) };
	for (i = 0; i < 3; i++) {
		static const char *const names[] = { "data/0", "data/1", "data/2" };
		size_t n = (size_t)rows[i] * (cols[i] ? cols[i] : 1) * 4;

		data[1 + i].p = zeros;
		data[1 + i].n = n;
		recs[1 + i] = (struct tz_record){ names[i], n, ck_crc32(0, zeros, n) };
	}
	data[4].p = "3\n";
	data[4].n = 2;
	recs[4] = (struct tz_record){ "version", 2, ck_crc32(0, "3\n", 2) };
	ec.f = fopen(dst, "wb");
	SETUP(ec.f && tz_write("optimizer", recs, 5, 64, emit, &ec) == 0 && fclose(ec.f) == 0);
	ck_buf_free(&p.b);
}

static void write_text(const char *dst, const char *text)
{
	write_bytes(dst, text, strlen(text));
}

/* ---- the import report ---- */

struct report {
	char lines[64][600];
	int status[64];
	size_t n;
};

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct report *r = ctx;

	if (r->n < 64) {
		snprintf(r->lines[r->n], sizeof(r->lines[0]), "%s: %s", path, msg);
		r->status[r->n++] = status;
	}
}

/* Status of the report line about a path ending in suffix; 99 if none. */
static int report_status(const struct report *r, const char *suffix, const char *want_msg)
{
	size_t i, ls = strlen(suffix);

	for (i = 0; i < r->n; i++) {
		const char *colon = strstr(r->lines[i], ": ");

		if (!colon || (size_t)(colon - r->lines[i]) < ls || strncmp(colon - ls, suffix, ls) != 0)
			continue;
		if (want_msg && !strstr(colon, want_msg)) {
			printf("  report for %s lacks '%s': %s\n", suffix, want_msg, r->lines[i]);
			return 98;
		}
		return r->status[i];
	}
	return 99;
}

/* ---- checks against the index ---- */

static const struct ck_file_info *find_file(const struct ck_file_info *f, size_t n, const char *relpath)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(f[i].relpath, relpath) == 0)
			return &f[i];
	}
	return NULL;
}

/* Every storage's recorded hash equals XXH3-128 of those bytes of the file. */
static void check_hashes(struct ck_store *st, const struct ck_file_info *f)
{
	struct ck_storage_info *s;
	size_t n, i, size;
	uint8_t *bytes = read_all(f->src_path, &size);

	CHECK(ck_store_list_storages(st, f->id, &s, &n) == 0, "list storages of %s", f->relpath);
	CHECK(n > 0, "%s: no storages", f->relpath);
	for (i = 0; i < n; i++) {
		XXH128_hash_t h;

		if (s[i].offset > size || s[i].length > size - s[i].offset) {
			CHECK(0, "%s: storage %s [%" PRIu64 ", +%" PRIu64 ") outside the file", f->relpath, s[i].key,
			      s[i].offset, s[i].length);
			continue;
		}
		h = XXH3_128bits(bytes + s[i].offset, (size_t)s[i].length);
		CHECK(h.low64 == s[i].hash_lo && h.high64 == s[i].hash_hi, "%s: storage %s hash differs",
		      f->relpath, s[i].key);
	}
	ck_storage_info_free(s, n);
	free(bytes);
}

static const struct ck_tensor_info *find_tensor(const struct ck_tensor_info *t, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(t[i].name, name) == 0)
			return &t[i];
	}
	return NULL;
}

static void expect_tensor(const struct ck_tensor_info *t, size_t n, const char *name, enum ck_dtype dt,
			  int ndim, uint64_t d0, uint64_t d1, const char *layer)
{
	const struct ck_tensor_info *x = find_tensor(t, n, name);

	CHECK(x, "no tensor %s", name);
	if (!x)
		return;
	CHECK(x->dtype == dt, "%s: dtype %s", name, ck_dtype_name(x->dtype));
	CHECK(x->ndim == ndim && (ndim < 1 || x->shape[0] == d0) && (ndim < 2 || x->shape[1] == d1),
	      "%s: shape", name);
	CHECK(strcmp(x->layer, layer) == 0, "%s: layer %s, want %s", name, x->layer, layer);
}

/* checkpoint-10/model.pt is burn_reader_checkpoint.pt: a model and an SGD state. */
static void check_model_pt(struct ck_store *st, const struct ck_file_info *f)
{
	struct ck_tensor_info *t;
	size_t n;

	CHECK(f->kind == CK_FILE_TORCH, "model.pt kind %s", ck_file_kind_name(f->kind));
	CHECK(ck_store_list_tensors(st, f->id, &t, &n) == 0, "list tensors");
	CHECK(n == 5 && f->ntensors == 5, "model.pt: %zu tensors", n);
	expect_tensor(t, n, "model_state_dict.fc1.weight", CK_DT_F32, 2, 10, 5, "other");
	expect_tensor(t, n, "model_state_dict.fc1.bias", CK_DT_F32, 1, 10, 0, "other");
	expect_tensor(t, n, "model_state_dict.fc2.weight", CK_DT_F32, 2, 3, 10, "other");
	expect_tensor(t, n, "optimizer_state_dict.state.0.momentum_buffer", CK_DT_F32, 2, 10, 5, "optimizer");
	ck_tensor_info_free(t, n);
	check_hashes(st, f);
}

static void check_first_import(struct ck_store *st, const struct report *r, int nckpts)
{
	struct ck_ckpt_info *c;
	struct ck_file_info *f;
	char **series;
	size_t n, nf;
	const struct ck_file_info *x;

	CHECK(nckpts == 2, "import returned %d", nckpts);
	CHECK(report_status(r, "checkpoint-10/model.pt", "torch, 5 tensors") == 0, "model.pt not indexed");
	CHECK(report_status(r, "checkpoint-10/legacy.pt", "legacy (pre-1.6)") < 0, "legacy.pt not refused");
	CHECK(report_status(r, "checkpoint-10/torn.pt", NULL) < 0, "torn.pt not refused");
	CHECK(report_status(r, "checkpoint-10/notes.bin", "not a torch.save") < 0, "notes.bin not refused");
	CHECK(report_status(r, "checkpoint-10/trainer_state.json", "other") == 0, "trainer_state.json");
	CHECK(report_status(r, "checkpoint-20/flipped.pt", "data/0: CRC mismatch") < 0, "flipped.pt not refused");
	CHECK(report_status(r, "checkpoint-20/evil.pt", "os.system") < 0, "evil.pt not refused");
	CHECK(report_status(r, "checkpoint-20/broken.safetensors", "safetensors") < 0, "broken.safetensors");
	CHECK(report_status(r, "checkpoint-20/bad.safetensors.index.json", "index") < 0, "bad index");
	CHECK(report_status(r, "checkpoint-20/odd.zip", "other") == 0, "a zip without data.pkl is other");
	CHECK(report_status(r, "run1/logs", "no step") == CK_IMPORT_SKIPPED, "logs/ not skipped");
	CHECK(report_status(r, "run1/README", "no step") == CK_IMPORT_SKIPPED, "README not skipped");

	CHECK(ck_store_list_series(st, &series, &n) == 0 && n == 1 && !strcmp(series[0], "run1"), "series");
	ck_strv_free(series, n);
	CHECK(ck_store_list_checkpoints(st, "run1", &c, &n) == 0 && n == 2, "checkpoints of run1");
	if (n != 2)
		return;
	CHECK(c[0].step == 10 && !strcmp(c[0].name, "checkpoint-10") && !c[0].is_file, "first checkpoint");
	CHECK(c[1].step == 20 && !strcmp(c[1].name, "checkpoint-20"), "second checkpoint");
	CHECK(c[0].src_path[0] == '/' && strstr(c[0].src_path, "/run1/checkpoint-10"), "source %s", c[0].src_path);

	CHECK(ck_store_list_files(st, c[0].id, &f, &nf) == 0 && nf == 8, "files of checkpoint-10: %zu", nf);
	for (n = 1; n < nf; n++)
		CHECK(strcmp(f[n - 1].relpath, f[n].relpath) < 0, "files not in path order");
	x = find_file(f, nf, "model.pt");
	CHECK(x, "no model.pt");
	if (x) {
		struct ck_error err = { { 0 } };

		check_model_pt(st, x);
		CHECK(ck_file_check(x, &err) == 0, "fresh model.pt: %s", err.msg);
	}
	x = find_file(f, nf, "global_step10/mp_rank_00_model_states.pt");
	CHECK(x && x->kind == CK_FILE_TORCH && x->ntensors == 4, "DeepSpeed-style nested file");
	x = find_file(f, nf, "model.safetensors");
	CHECK(x && x->kind == CK_FILE_SAFETENSORS && x->ntensors > 0, "model.safetensors");
	if (x)
		check_hashes(st, x);
	x = find_file(f, nf, "model.safetensors.index.json");
	CHECK(x && x->kind == CK_FILE_SAFETENSORS_INDEX, "index.json");
	x = find_file(f, nf, "legacy.pt");
	CHECK(x && x->kind == CK_FILE_BAD && x->error && strstr(x->error, "legacy"), "legacy.pt recorded bad");
	ck_file_info_free(f, nf);

	/* Optimizer state of named parameters belongs to their layers. */
	CHECK(ck_store_list_files(st, c[1].id, &f, &nf) == 0, "files of checkpoint-20");
	x = find_file(f, nf, "optimizer.pt");
	CHECK(x && x->kind == CK_FILE_TORCH && x->ntensors == 3, "optimizer.pt: %s",
	      x && x->error ? x->error : "");
	if (x && x->kind == CK_FILE_TORCH) {
		struct ck_tensor_info *t;
		size_t nt;

		CHECK(ck_store_list_tensors(st, x->id, &t, &nt) == 0, "optimizer tensors");
		expect_tensor(t, nt, "state.0.exp_avg", CK_DT_F32, 2, 4, 2, "layers.5");
		expect_tensor(t, nt, "state.1.exp_avg", CK_DT_F32, 1, 3, 0, "head");
		expect_tensor(t, nt, "state.2.exp_avg", CK_DT_F32, 1, 2, 0, "optimizer");
		ck_tensor_info_free(t, nt);
		check_hashes(st, x);
	}
	ck_file_info_free(f, nf);
	ck_ckpt_info_free(c, 2);
}

/* ---- the scenario ---- */

static void make_run(void)
{
	char p[512], q[512];

	mkdirf("run1");
	mkdirf("run1/checkpoint-10");
	mkdirf("run1/checkpoint-10/global_step10");
	mkdirf("run1/checkpoint-20");
	mkdirf("run1/logs");
	write_text(pathf(p, sizeof(p), "%s/run1/README", tmp), "a run\n");
	copy_fixture("torch2x/burn_reader_checkpoint.pt", pathf(p, sizeof(p), "%s/run1/checkpoint-10/model.pt", tmp), 0);
	copy_fixture("safetensors/burn_multi_layer.safetensors",
		     pathf(p, sizeof(p), "%s/run1/checkpoint-10/model.safetensors", tmp), 0);
	write_text(pathf(p, sizeof(p), "%s/run1/checkpoint-10/model.safetensors.index.json", tmp),
		   "{\"metadata\": {\"total_size\": 4}, \"weight_map\": {\"w\": \"model.safetensors\"}}\n");
	write_text(pathf(p, sizeof(p), "%s/run1/checkpoint-10/trainer_state.json", tmp), "{\"global_step\": 10}\n");
	copy_fixture("torch2x/burn_reader_simple_legacy.pt",
		     pathf(p, sizeof(p), "%s/run1/checkpoint-10/legacy.pt", tmp), 0);
	copy_fixture("torch2x/burn_reader_state_dict.pt", pathf(p, sizeof(p), "%s/run1/checkpoint-10/torn.pt", tmp),
		     1000);
	copy_fixture("torch2x/burn_reader_state_dict.pt",
		     pathf(p, sizeof(p), "%s/run1/checkpoint-10/global_step10/mp_rank_00_model_states.pt", tmp), 0);
	write_text(pathf(p, sizeof(p), "%s/run1/checkpoint-10/notes.bin", tmp), "not a checkpoint\n");

	copy_fixture("torch2x/burn_reader_checkpoint.pt", pathf(p, sizeof(p), "%s/run1/checkpoint-20/model.pt", tmp), 0);
	flip_storage_byte("torch2x/burn_reader_tensor_2d.pt", pathf(p, sizeof(p), "%s/run1/checkpoint-20/flipped.pt", tmp));
	write_evil(pathf(p, sizeof(p), "%s/run1/checkpoint-20/evil.pt", tmp));
	write_named_optimizer(pathf(p, sizeof(p), "%s/run1/checkpoint-20/optimizer.pt", tmp));
	write_text(pathf(p, sizeof(p), "%s/run1/checkpoint-20/bad.safetensors.index.json", tmp), "{\"weight_map\": ");
	write_bytes(pathf(p, sizeof(p), "%s/run1/checkpoint-20/broken.safetensors", tmp), "\x10\0\0\0\0\0\0\0{}", 10);
	/* A zip that is not a torch.save: no data.pkl, served as it is. */
	{
		static const char text[] = "hello";
		const struct { const void *p; size_t n; } data[] = { { text, 5 } };
		struct tz_record rec = { "readme.txt", 5, ck_crc32(0, text, 5) };
		struct emit_ctx ec = { .data = (const void *)data };

		ec.f = fopen(pathf(q, sizeof(q), "%s/run1/checkpoint-20/odd.zip", tmp), "wb");
		SETUP(ec.f && tz_write("odd", &rec, 1, 64, emit, &ec) == 0 && fclose(ec.f) == 0);
	}
}

static uint64_t file_id(struct ck_store *st, const char *series, const char *ckpt, const char *relpath,
			struct ck_file_info *copy)
{
	struct ck_ckpt_info *c;
	struct ck_file_info *f;
	const struct ck_file_info *x;
	uint64_t id = 0;
	size_t n;

	if (ck_store_find_checkpoint(st, series, ckpt, &c) != 0)
		return 0;
	if (ck_store_list_files(st, c->id, &f, &n) == 0) {
		x = find_file(f, n, relpath);
		if (x) {
			id = x->id;
			if (copy) {
				*copy = *x;
				copy->relpath = strdup(x->relpath);
				copy->src_path = strdup(x->src_path);
				copy->error = x->error ? strdup(x->error) : NULL;
			}
		}
		ck_file_info_free(f, n);
	}
	ck_ckpt_info_free(c, 1);
	return id;
}

static void reimport_and_changes(struct ck_store *st, const char *store)
{
	struct ck_ckpt_info *before, *after;
	struct ck_file_info old = { 0 };
	struct ck_error err = { { 0 } };
	struct report r = { .n = 0 };
	uint64_t model_id, st_id;
	char p[512];
	int rc;
	FILE *f;

	SETUP(ck_store_find_checkpoint(st, "run1", "checkpoint-10", &before) == 0);
	model_id = file_id(st, "run1", "checkpoint-10", "model.pt", NULL);
	st_id = file_id(st, "run1", "checkpoint-10", "model.safetensors", &old);
	/* The checkpoint itself: series from its parent, same records as before. */
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/run1/checkpoint-10", tmp), NULL, on_report, &r, &err);
	CHECK(rc == 1, "re-import returned %d (%s)", rc, err.msg);
	SETUP(ck_store_find_checkpoint(st, "run1", "checkpoint-10", &after) == 0);
	CHECK(after->id == before->id, "checkpoint id changed on re-import");
	CHECK(file_id(st, "run1", "checkpoint-10", "model.pt", NULL) == model_id, "unchanged file got a new id");
	{
		struct ck_file_info again = { 0 };

		/* The hashes an unchanged file kept still describe its bytes. */
		again.id = file_id(st, "run1", "checkpoint-10", "model.pt", &again);
		check_hashes(st, &again);
		free(again.relpath);
		free(again.src_path);
		free(again.error);
	}
	ck_ckpt_info_free(before, 1);
	ck_ckpt_info_free(after, 1);

	/* Appending to a file is noticed, and it is not served as imported. */
	f = fopen(pathf(p, sizeof(p), "%s/run1/checkpoint-10/model.safetensors", tmp), "ab");
	SETUP(f && fputc('x', f) == 'x' && fclose(f) == 0);
	rc = ck_file_check(&old, &err);
	CHECK(rc == -ESTALE && strstr(err.msg, "model.safetensors") && strstr(err.msg, "17624 → 17625"),
	      "changed file: rc %d %s", rc, err.msg);
	r.n = 0;
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/run1", tmp), NULL, on_report, &r, &err);
	CHECK(rc == 2, "re-import of the run returned %d", rc);
	CHECK(report_status(&r, "checkpoint-10/model.safetensors", NULL) < 0, "grown safetensors not refused");
	CHECK(file_id(st, "run1", "checkpoint-10", "model.safetensors", NULL) != st_id, "changed file kept its id");
	CHECK(file_id(st, "run1", "checkpoint-10", "model.pt", NULL) == model_id, "unchanged file got a new id");
	free(old.relpath);
	free(old.src_path);
	free(old.error);
	(void)store;
}

static void patterns_and_shapes(struct ck_store *st)
{
	struct ck_error err = { { 0 } };
	struct ck_import_opts o = { 0 };
	struct ck_ckpt_info *c;
	struct ck_file_info *f;
	char p[512], *pat = NULL;
	size_t n, nf;
	int rc;

	/* A user pattern, stored with the series and used again. */
	mkdirf("custom");
	mkdirf("custom/save-7");
	mkdirf("custom/save-5");
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/custom/save-5/a.pt", tmp), 0);
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/custom/save-7/a.pt", tmp), 0);
	o.step_pattern = "^save-([0-9]+)$";
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/custom", tmp), &o, NULL, NULL, &err);
	CHECK(rc == 2, "pattern import returned %d (%s)", rc, err.msg);
	CHECK(ck_store_series_pattern(st, "custom", &pat) == 0 && pat && !strcmp(pat, o.step_pattern),
	      "stored pattern %s", pat ? pat : "(none)");
	free(pat);
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/custom", tmp), NULL, NULL, NULL, &err);
	CHECK(rc == 2, "re-import without the pattern returned %d", rc);
	CHECK(ck_store_list_checkpoints(st, "custom", &c, &n) == 0 && n == 2 && c[0].step == 5 && c[1].step == 7,
	      "custom checkpoints");
	ck_ckpt_info_free(c, n);
	o.step_pattern = "^save-[0-9]+$";
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/custom", tmp), &o, NULL, NULL, &err) == -EINVAL &&
	      strstr(err.msg, "group"), "pattern without a group accepted");

	/* A directory without steps is one checkpoint of step 0. */
	mkdirf("final");
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/final/model.pt", tmp), 0);
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/final", tmp), NULL, NULL, NULL, &err) == 1, "final");
	CHECK(ck_store_list_checkpoints(st, "final", &c, &n) == 0 && n == 1 && c[0].step == 0 &&
	      !strcmp(c[0].name, "final"), "final checkpoint");
	ck_ckpt_info_free(c, n);

	/* One step-named file among other checkpoint files does not make a run dir. */
	mkdirf("mixed");
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/mixed/model.pt", tmp), 0);
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/mixed/shard_3.pt", tmp), 0);
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/mixed", tmp), NULL, NULL, NULL, &err) == 1, "mixed");
	CHECK(ck_store_list_checkpoints(st, "mixed", &c, &n) == 0 && n == 1 && c[0].step == 0 &&
	      !strcmp(c[0].name, "mixed"), "mixed is one checkpoint");
	if (n == 1) {
		CHECK(ck_store_list_files(st, c[0].id, &f, &nf) == 0 && nf == 2, "files of mixed");
		ck_file_info_free(f, nf);
	}
	ck_ckpt_info_free(c, n);

	/* Single-file checkpoints in a run dir, and --series. */
	mkdirf("run2");
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/run2/model_000500.pt", tmp), 0);
	copy_fixture("torch2x/candle_test.pt", pathf(p, sizeof(p), "%s/run2/model_000100.pt", tmp), 0);
	o.step_pattern = NULL;
	o.series = "renamed";
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/run2", tmp), &o, NULL, NULL, &err) == 2, "run2");
	CHECK(ck_store_list_checkpoints(st, "renamed", &c, &n) == 0 && n == 2 && c[0].step == 100 &&
	      c[1].is_file && !strcmp(c[1].name, "model_000500.pt"), "file checkpoints");
	if (n == 2) {
		CHECK(ck_store_list_files(st, c[1].id, &f, &nf) == 0 && nf == 1 && !strcmp(f[0].relpath, "") &&
		      f[0].kind == CK_FILE_TORCH && f[0].ntensors == 1, "the file of a file checkpoint");
		ck_file_info_free(f, nf);
	}
	ck_ckpt_info_free(c, n);
	o.series = "bad/name";
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/run2", tmp), &o, NULL, NULL, &err) == -EINVAL,
	      "series name with a slash accepted");
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/nonexistent", tmp), NULL, NULL, NULL, &err) == -ENOENT &&
	      strstr(err.msg, "nonexistent"), "missing directory: %s", err.msg);
}

static void store_lifecycle(const char *store)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char p[512];
	int rc;

	CHECK(ck_store_init(store, &err) == -EEXIST, "init over a store");
	CHECK(ck_store_init(pathf(p, sizeof(p), "%s/run1", tmp), &err) == -ENOTEMPTY, "init in a full dir");
	rc = ck_store_open(pathf(p, sizeof(p), "%s/run1", tmp), 1, &st, &err);
	CHECK(rc == -ENOENT && strstr(err.msg, "not a ckptfs store"), "open a non-store: %d %s", rc, err.msg);
	/* A read-only store lists but does not import. */
	SETUP(ck_store_open(store, 1, &st, &err) == 0);
	CHECK(ck_store_import(st, pathf(p, sizeof(p), "%s/final", tmp), NULL, NULL, NULL, &err) == -EROFS,
	      "import into a read-only store");
	ck_store_close(st);
	/* A store of a future format is refused, not misread. */
	write_text(pathf(p, sizeof(p), "%s/ckptfs-store", store), "ckptfs-store 2\n");
	CHECK(ck_store_open(store, 1, &st, &err) == -EPROTONOSUPPORT, "future store format opened");
	write_text(pathf(p, sizeof(p), "%s/ckptfs-store", store), "ckptfs-store 1\n");
	/* A malformed layers.conf names its line. */
	write_text(pathf(p, sizeof(p), "%s/layers.conf", store), "# rules\nbroken(\tx\n");
	rc = ck_store_open(store, 1, &st, &err);
	CHECK(rc == -EINVAL && strstr(err.msg, "layers.conf:2:"), "bad layers.conf: %d %s", rc, err.msg);
	unlink(p);
}

int main(void)
{
	struct ck_error err = { { 0 } };
	struct report r = { .n = 0 };
	struct ck_store *st;
	char store[512], p[512], cmd[600];
	const char *dir = test_fixtures();
	struct stat sb;
	int rc;

	if (!dir) {
		printf("SKIP: CKPT_FIXTURES not set\n");
		return 77;
	}
	fixtures = strdup(dir);
	if (stat(fixtures, &sb) < 0) {
		printf("SKIP: no %s\n", fixtures);
		free((void *)fixtures);
		return 77;
	}
	snprintf(tmp, sizeof(tmp), "%s/t_store.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	make_run();
	pathf(store, sizeof(store), "%s/store", tmp);
	rc = ck_store_init(store, &err);
	CHECK(rc == 0, "init: %s", err.msg);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/run1", tmp), NULL, on_report, &r, &err);
	if (rc < 0)
		printf("import failed: %s\n", err.msg);
	check_first_import(st, &r, rc);
	reimport_and_changes(st, store);
	patterns_and_shapes(st);
	ck_store_close(st);
	store_lifecycle(store);

	if (test_failures) {
		size_t i;

		for (i = 0; i < r.n; i++)
			printf("  report %d %s\n", r.status[i], r.lines[i]);
		printf("%d failure(s); files kept in %s\n", test_failures, tmp);
	} else {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		if (system(cmd) != 0)
			printf("could not remove %s\n", tmp);
	}
	free((void *)fixtures);
	return test_failures ? 1 : 0;
}
