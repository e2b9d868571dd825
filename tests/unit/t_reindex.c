/* Manifests and reindex through the store's API, without torch: a run of
 * real fixture files (torch.save, safetensors, a refused file, a JSON file)
 * and a series of single-file checkpoints with a user step pattern are
 * imported; every checkpoint gets a manifest; with the index deleted the
 * store says how to recover, and reindex brings back everything the index
 * held (ids aside), the step pattern and the series record included.  Then
 * damaged, misplaced and missing manifests, changed files (--verify),
 * leftovers of crashes, and an import whose index was replaced under it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckptfs/store.h"
#include "store/manifest.h"
#include "testutil.h"

static char tmp[256];
static char store[300];

static void copy_file(const char *src, const char *dst)
{
	size_t n;
	uint8_t *p = read_file(src, &n);

	SETUP(p);
	write_bytes(dst, p, n);
	free(p);
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	SETUP((size_t)vsnprintf(cmd, sizeof(cmd), fmt, ap) < sizeof(cmd));
	va_end(ap);
	SETUP(system(cmd) == 0);
}

/* ---- what the index holds, as text, without ids ---- */

static void snap_file(struct ck_store *st, const struct ck_file_info *f, struct ck_buf *b)
{
	struct ck_storage_info *s;
	struct ck_tensor_info *t;
	size_t ns, nt, i;
	int d;

	SETUP(ck_buf_printf(b, "  file '%s' %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %u '%s'\n",
			    f->relpath, ck_file_kind_name(f->kind), f->src_path, f->dev, f->ino, f->size,
			    f->mtime_ns, f->ntensors, f->error ? f->error : "(none)") == 0);
	SETUP(ck_store_list_storages(st, f->id, &s, &ns) == 0);
	for (i = 0; i < ns; i++)
		SETUP(ck_buf_printf(b, "    storage '%s' %" PRIu64 " %" PRIu64 " %016" PRIx64 "%016" PRIx64 "\n",
				    s[i].key, s[i].offset, s[i].length, s[i].hash_hi, s[i].hash_lo) == 0);
	ck_storage_info_free(s, ns);
	SETUP(ck_store_list_tensors(st, f->id, &t, &nt) == 0);
	for (i = 0; i < nt; i++) {
		SETUP(ck_buf_printf(b, "    tensor '%s' '%s' %s [", t[i].name, t[i].layer, ck_dtype_name(t[i].dtype)) ==
		      0);
		for (d = 0; d < t[i].ndim; d++)
			SETUP(ck_buf_printf(b, "%s%" PRIu64, d ? "," : "", t[i].shape[d]) == 0);
		SETUP(ck_buf_printf(b, "] '%s' %" PRIu64 "\n", t[i].storage_key, t[i].storage_offset) == 0);
	}
	ck_tensor_info_free(t, nt);
}

static char *snapshot(void)
{
	struct ck_error err = { { 0 } };
	struct ck_buf b = CK_BUF_INIT;
	struct ck_store *st;
	char **series;
	size_t nseries, i, j, k;

	SETUP(ck_store_open(store, 1, &st, &err) == 0);
	SETUP(ck_store_list_series(st, &series, &nseries) == 0);
	for (i = 0; i < nseries; i++) {
		struct ck_ckpt_info *c;
		char *pattern;
		size_t nc;

		SETUP(ck_store_series_pattern(st, series[i], &pattern) == 0);
		SETUP(ck_buf_printf(&b, "series '%s' pattern '%s'\n", series[i], pattern ? pattern : "(none)") == 0);
		free(pattern);
		SETUP(ck_store_list_checkpoints(st, series[i], &c, &nc) == 0);
		for (j = 0; j < nc; j++) {
			struct ck_file_info *f;
			size_t nf;

			SETUP(ck_buf_printf(&b, " ckpt '%s' %" PRId64 " %d %s\n", c[j].name, c[j].step, c[j].is_file,
					    c[j].src_path) == 0);
			SETUP(ck_store_list_files(st, c[j].id, &f, &nf) == 0);
			for (k = 0; k < nf; k++)
				snap_file(st, &f[k], &b);
			ck_file_info_free(f, nf);
		}
		ck_ckpt_info_free(c, nc);
	}
	ck_strv_free(series, nseries);
	ck_store_close(st);
	SETUP(ck_buf_putc(&b, '\0') == 0);
	return (char *)ck_buf_steal(&b, NULL);
}

static void expect_same(const char *want, const char *got, const char *what)
{
	size_t i = 0;

	while (want[i] && want[i] == got[i])
		i++;
	CHECK(want[i] == got[i], "%s: index differs at byte %zu:\n--- before: %.200s\n--- after: %.200s", what, i,
	      want + i, got + i);
}

/* ---- reports ---- */

struct reports {
	size_t indexed, stale, damaged;
	int last_status;
	char last_path[512], last_msg[512];
};

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct reports *r = ctx;

	if (status == 0)
		r->indexed++;
	else if (status == CK_REINDEX_STALE)
		r->stale++;
	else
		r->damaged++;
	if (status != 0) {
		r->last_status = status;
		snprintf(r->last_path, sizeof(r->last_path), "%s", path);
		snprintf(r->last_msg, sizeof(r->last_msg), "%s", msg);
	}
}

static int reindex(const struct ck_reindex_opts *o, struct reports *r, struct ck_error *err)
{
	memset(r, 0, sizeof(*r));
	err->msg[0] = '\0';
	return ck_store_reindex(store, o, on_report, r, err);
}

static int import(const char *sub, const char *series, const char *pattern)
{
	struct ck_import_opts o = { .series = series, .step_pattern = pattern };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char p[512];
	int rc;

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/%s", tmp, sub), &o, NULL, NULL, &err);
	if (rc < 0)
		printf("import %s: %s\n", sub, err.msg);
	ck_store_close(st);
	return rc;
}

static char *manifest_of(const char *series, const char *name)
{
	char *p = ck_manifest_path(store, series, name);

	SETUP(p);
	return p;
}

static void make_runs(const char *fixtures)
{
	char src[512], dst[512];

	sh("mkdir -p '%s/run/checkpoint-10' '%s/run/checkpoint-20' '%s/snaps'", tmp, tmp, tmp);
	copy_file(pathf(src, sizeof(src), "%s/torch2x/candle_test.pt", fixtures),
		  pathf(dst, sizeof(dst), "%s/run/checkpoint-10/model.pt", tmp));
	copy_file(pathf(src, sizeof(src), "%s/safetensors/burn_multi_layer.safetensors", fixtures),
		  pathf(dst, sizeof(dst), "%s/run/checkpoint-20/model.safetensors", tmp));
	write_bytes(pathf(dst, sizeof(dst), "%s/run/checkpoint-20/broken.pt", tmp), "junk", 4);
	write_bytes(pathf(dst, sizeof(dst), "%s/run/checkpoint-20/trainer_state.json", tmp), "{}\n", 3);
	/* Names only a user pattern finds steps in. */
	copy_file(pathf(src, sizeof(src), "%s/torch2x/burn_reader_bfloat16.pt", fixtures),
		  pathf(dst, sizeof(dst), "%s/snaps/s7.pt", tmp));
}

static void manifests_written(void)
{
	struct ck_error err = { { 0 } };
	struct ck_manifest m;
	char *p = manifest_of("run", "checkpoint-20");
	int rc = ck_manifest_load(NULL, p, &m, &err);

	CHECK(rc == 0, "%s: %d %s", p, rc, err.msg);
	if (rc == 0) {
		CHECK(m.nfiles == 3 && !strcmp(m.files[0].info.relpath, "broken.pt") &&
		      m.files[0].info.kind == CK_FILE_BAD && m.files[0].info.error &&
		      m.files[1].info.kind == CK_FILE_SAFETENSORS && m.files[1].nt == 9 &&
		      m.files[2].info.kind == CK_FILE_OTHER && m.ckpt.step == 20 && !m.pattern,
		      "checkpoint-20's manifest does not hold its files");
		ck_manifest_clear(&m);
	}
	free(p);
	p = manifest_of("snaps", "s7.pt");
	rc = ck_manifest_load(NULL, p, &m, &err);
	CHECK(rc == 0 && m.ckpt.is_file && m.pattern && !strcmp(m.pattern, "^s([0-9]+)\\.pt$") && m.ckpt.step == 7,
	      "%s: %d %s", p, rc, err.msg);
	if (rc == 0)
		ck_manifest_clear(&m);
	free(p);
}

static int64_t series_created(const char *series, const char *name)
{
	struct ck_error err = { { 0 } };
	struct ck_manifest m;
	char *p = manifest_of(series, name);
	int64_t t = -1;

	if (ck_manifest_load(NULL, p, &m, &err) == 0) {
		t = m.series_created_ns;
		ck_manifest_clear(&m);
	}
	free(p);
	return t;
}

static void flip_byte(const char *path, size_t at)
{
	size_t n;
	uint8_t *p = read_file(path, &n);

	SETUP(p && at < n);
	p[at] ^= 0x04;
	write_bytes(path, p, n);
	free(p);
}

static void index_replaced_under_an_import(void)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	struct reports r;
	char p[512];
	pid_t pid;
	int status, rc;

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	fflush(NULL);
	pid = fork();
	SETUP(pid >= 0);
	if (pid == 0)
		_exit(reindex(NULL, &r, &err) < 0 ? 1 : 0);
	SETUP(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reindex in a child failed");
	rc = ck_store_import(st, pathf(p, sizeof(p), "%s/run", tmp), NULL, NULL, NULL, &err);
	CHECK(rc == -ESTALE && strstr(err.msg, "rebuilt"), "import into a replaced index: %d %s", rc, err.msg);
	ck_store_close(st);
}

int main(void)
{
	const char *dir = test_fixtures();
	struct ck_reindex_opts verify = { .verify = 1 }, force = { .force = 1 };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	struct reports r;
	char fixtures[512], p[600], q[600], *before, *after, *saved;
	struct timespec times[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };
	struct stat sb;
	int64_t created;
	size_t nsaved;
	int rc;

	if (!dir || stat(pathf(fixtures, sizeof(fixtures), "%s", dir), &sb) < 0) {
		printf("SKIP: no fixtures (CKPT_FIXTURES)\n");
		return 77;
	}
	snprintf(tmp, sizeof(tmp), "%s/t_reindex.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	make_runs(fixtures);
	SETUP(ck_store_init(store, &err) == 0);
	CHECK(import("run", NULL, NULL) == 2, "import run");
	CHECK(import("snaps", NULL, "^s([0-9]+)\\.pt$") == 1, "import snaps");
	manifests_written();
	before = snapshot();
	created = series_created("snaps", "s7.pt");

	/* No index: a clear message, then everything back from the manifests. */
	sh("rm -rf '%s/index'", store);
	rc = ck_store_open(store, 1, &st, &err);
	CHECK(rc == -ENOENT && strstr(err.msg, "index missing: run ckptctl reindex"), "open without index: %d %s", rc,
	      err.msg);
	rc = reindex(NULL, &r, &err);
	CHECK(rc == 3 && r.indexed == 3 && !r.damaged && !r.stale, "reindex: %d %s", rc, err.msg);
	after = snapshot();
	expect_same(before, after, "reindex without an index");
	free(after);
	rc = reindex(&verify, &r, &err);
	CHECK(rc == 3 && !r.damaged && !r.stale, "reindex --verify over an index: %d %s", rc, err.msg);
	after = snapshot();
	expect_same(before, after, "reindex over an index");
	free(after);

	/* Imports go on in the rebuilt index, with the series' stored pattern. */
	CHECK(import("run", NULL, NULL) == 2, "re-import after reindex");
	after = snapshot();
	expect_same(before, after, "re-import after reindex");
	free(after);
	copy_file(pathf(p, sizeof(p), "%s/snaps/s7.pt", tmp), pathf(q, sizeof(q), "%s/snaps/s9.pt", tmp));
	CHECK(import("snaps", NULL, NULL) == 2, "import with the stored pattern");
	CHECK(series_created("snaps", "s9.pt") == created, "series record not restored");
	free(before);
	before = snapshot();
	CHECK(strstr(before, "ckpt 's9.pt' 9 1"), "s9.pt not a checkpoint of step 9:\n%s", before);

	/* A damaged manifest is reported and skipped; the rest is indexed. */
	pathf(p, sizeof(p), "%s/manifests/run/checkpoint-20.manifest", store);
	saved = (char *)read_file(p, &nsaved);
	SETUP(saved);
	flip_byte(p, nsaved / 2);
	rc = reindex(NULL, &r, &err);
	CHECK(rc == 3 && r.damaged == 1 && r.last_status == -EBADMSG && !strcmp(r.last_path, p) &&
	      strstr(r.last_msg, "checksum"), "damaged manifest: %d %s / %s", rc, r.last_path, r.last_msg);
	after = snapshot();
	CHECK(!strstr(after, "checkpoint-20") && strstr(after, "checkpoint-10") && strstr(after, "s9.pt"),
	      "after skipping a damaged manifest:\n%s", after);
	free(after);
	write_bytes(p, saved, nsaved);
	free(saved);

	/* One in another checkpoint's place is damaged too. */
	copy_file(pathf(q, sizeof(q), "%s/manifests/run/checkpoint-10.manifest", store),
		  pathf(p, sizeof(p), "%s/manifests/run/checkpoint-11.manifest", store));
	rc = reindex(NULL, &r, &err);
	CHECK(rc == 4 && r.damaged == 1 && !strcmp(r.last_path, p) && strstr(r.last_msg, "run/checkpoint-10"),
	      "misplaced manifest: %d %s / %s", rc, r.last_path, r.last_msg);
	unlink(p);
	after = snapshot();
	expect_same(before, after, "reindex with a misplaced manifest");
	free(after);

	/* A checkpoint the index holds without a manifest is not dropped unless forced. */
	pathf(p, sizeof(p), "%s/manifests/snaps/s9.pt.manifest", store);
	saved = (char *)read_file(p, &nsaved);
	SETUP(saved);
	unlink(p);
	rc = reindex(NULL, &r, &err);
	CHECK(rc == -EEXIST && strstr(err.msg, "snaps/s9.pt") && strstr(err.msg, "--force"),
	      "reindex dropping a checkpoint: %d %s", rc, err.msg);
	after = snapshot();
	expect_same(before, after, "refused reindex");
	free(after);
	rc = reindex(&force, &r, &err);
	after = snapshot();
	CHECK(rc == 3 && !strstr(after, "s9.pt"), "forced reindex: %d %s", rc, err.msg);
	free(after);
	write_bytes(p, saved, nsaved);
	free(saved);

	/* Leftovers of crashed runs go; --verify names a changed file. */
	sh("mkdir '%s/index.reindex.999999' && touch '%s/index.reindex.999999/data.mdb'", store, store);
	sh("touch '%s/manifests/run/checkpoint-10.manifest.tmp.999999'", store);
	SETUP(utimensat(AT_FDCWD, pathf(p, sizeof(p), "%s/run/checkpoint-10/model.pt", tmp), times, 0) == 0);
	rc = reindex(&verify, &r, &err);
	CHECK(rc == 4 && r.stale == 1 && !strcmp(r.last_path, "run/checkpoint-10") &&
	      strstr(r.last_msg, "model.pt: changed since import"), "verify: %d %s: %s", rc, r.last_path, r.last_msg);
	after = snapshot();
	expect_same(before, after, "reindex after a crash");
	free(after);
	CHECK(stat(pathf(p, sizeof(p), "%s/index.reindex.999999", store), &sb) < 0, "temporary index left");
	CHECK(stat(pathf(p, sizeof(p), "%s/manifests/run/checkpoint-10.manifest.tmp.999999", store), &sb) < 0,
	      "temporary manifest left");

	index_replaced_under_an_import();
	free(before);

	if (test_failures)
		printf("files kept in %s\n", tmp);
	else
		sh("rm -rf '%s'", tmp);
	return test_result();
}
