/* Deleting checkpoints, the store's side (src/store/delete*.c, tombstone.c),
 * without torch: tombstones parse back and refuse every damaged byte; a
 * deletion flags the record and writes the tombstone, and a reindex keeps
 * it; a reclaim refuses a stale stamp, drops the listed files of deleted
 * checkpoints only, unlinks the store's own copies and never a user's
 * imported file, and removes a checkpoint left with nothing; a process
 * killed at each stage of a deletion or a reclaim leaves a store that the
 * next writable open makes consistent (the index, the manifests and the
 * files on disk agree, and a reindex gives the same listing). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/store.h"
#include "testutil.h"
#include "store/delete.h"
#include "store/manifest.h"

static char tmp[256];
static char store[300];
static const char *fixture;   /* a valid safetensors file */

static int exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

static int store_has(const char *rel)
{
	char p[1024];

	return exists(pathf(p, sizeof(p), "%s/%s", store, rel));
}

/* A checkpoint dir holding the fixture as model.safetensors and a config.json. */
static void fill(const char *dir)
{
	char p[1024];
	size_t n;
	uint8_t *data = read_file(fixture, &n);

	SETUP(data);
	SETUP(run_command(pathf(p, sizeof(p), "mkdir -p '%s'", dir), NULL) == 0);
	write_bytes(pathf(p, sizeof(p), "%s/model.safetensors", dir), data, n);
	write_bytes(pathf(p, sizeof(p), "%s/config.json", dir), "{}\n", 3);
	free(data);
}

/* run/<name> committed through the staging area: the store owns its files. */
static void commit(struct ck_store *st, const char *name)
{
	struct ck_error err = { { 0 } };
	char dir[600];

	fill(pathf(dir, sizeof(dir), "%s/staging/run/%s", store, name));
	SETUP(ck_store_commit_staged(st, "run", name, NULL, NULL, NULL, &err) == 0);
}

static struct ck_ckpt_info *find(struct ck_store *st, const char *series, const char *name)
{
	struct ck_ckpt_info *c = NULL;

	return ck_store_find_checkpoint(st, series, name, &c) == 0 ? c : NULL;
}

/* The ids of the files of series/name (at most max), or 0 files. */
static size_t file_ids(struct ck_store *st, const char *series, const char *name, uint64_t *ids, size_t max)
{
	struct ck_ckpt_info *c = find(st, series, name);
	struct ck_file_info *f = NULL;
	size_t n = 0, k = 0;

	if (c && ck_store_list_files(st, c->id, &f, &n) == 0)
		for (; k < n && k < max; k++)
			ids[k] = f[k].id;
	ck_file_info_free(f, n);
	ck_ckpt_info_free(c, c ? 1 : 0);
	return k;
}

static int64_t stamp_of(struct ck_store *st, const char *series)
{
	uint64_t s = 0;

	SETUP(ck_store_series_stamp(st, series, &s) == 0);
	return (int64_t)s;
}

static void test_tombstone_text(void)
{
	struct ck_buf b = CK_BUF_INIT;
	struct ck_error err = { { 0 } };
	char text[256];
	int64_t imported = 0;
	size_t bad = 0, len;
	XXH128_hash_t h;

	SETUP(ck_tombstone_format(&b, -1712345678901234567LL, 1712345679000000000LL) == 0);
	CHECK(ck_tombstone_parse((const char *)b.data, b.len, &imported, NULL, &err) == 0 &&
	      imported == -1712345678901234567LL, "parse(format()) gives back the import time: %s", err.msg);
	for (size_t i = 0; i < b.len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			b.data[i] ^= (uint8_t)(1 << bit);
			if (ck_tombstone_parse((const char *)b.data, b.len, &imported, NULL, &err) == 0)
				bad++;
			b.data[i] ^= (uint8_t)(1 << bit);
		}
	}
	CHECK(bad == 0, "%zu single bit flips went unnoticed", bad);
	CHECK(ck_tombstone_parse((const char *)b.data, b.len - 1, &imported, NULL, &err) == -EBADMSG,
	      "a truncated tombstone is torn");
	/* Checksummed but not the one spelling: leading zeros, -0. */
	for (int k = 0; k < 2; k++) {
		len = (size_t)snprintf(text, sizeof(text), "ckptfs-tombstone 1\nimported-ns=%s deleted-ns=5\n",
				       k ? "-0" : "012");
		h = XXH3_128bits(text, len);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "checksum xxh3-128=%016llx%016llx\n",
					(unsigned long long)h.high64, (unsigned long long)h.low64);
		CHECK(ck_tombstone_parse(text, len, &imported, NULL, &err) == -EINVAL, "'%s' accepted",
		      k ? "-0" : "012");
	}
	ck_buf_free(&b);
}

static void test_delete_and_reindex(void)
{
	struct ck_reindex_opts ro = { 0 };
	struct ck_error err = { { 0 } };
	struct ck_ckpt_info *c;
	struct ck_store *st;
	size_t n;

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	commit(st, "checkpoint-10");
	commit(st, "checkpoint-20");
	commit(st, "checkpoint-30");
	CHECK(ck_store_delete_checkpoint(st, "run", "checkpoint-10", &err) == 0, "delete: %s", err.msg);
	CHECK(store_has("manifests/run/checkpoint-10.tombstone"), "no tombstone beside the manifest");
	CHECK(ck_store_delete_checkpoint(st, "run", "checkpoint-10", &err) == -ENOENT, "deleted twice");
	CHECK(ck_store_delete_checkpoint(st, "run", "checkpoint-99", &err) == -ENOENT, "deleted what is not there");
	SETUP(ck_store_list_checkpoints(st, "run", &c, &n) == 0);
	CHECK(n == 3 && c[0].deleted && !c[1].deleted && !c[2].deleted,
	      "the listing keeps the deleted checkpoint, flagged (%zu)", n);
	ck_ckpt_info_free(c, n);
	ck_store_close(st);
	SETUP(ck_store_open(store, 1, &st, &err) == 0);
	CHECK(ck_store_delete_checkpoint(st, "run", "checkpoint-20", &err) == -EROFS, "deleted read-only");
	ck_store_close(st);

	CHECK(ck_store_reindex(store, &ro, NULL, NULL, &err) == 3, "reindex: %s", err.msg);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	c = find(st, "run", "checkpoint-10");
	CHECK(c && c->deleted, "a reindex brought the deleted checkpoint back");
	ck_ckpt_info_free(c, c ? 1 : 0);
	c = find(st, "run", "checkpoint-20");
	CHECK(c && !c->deleted, "a reindex deleted a live checkpoint");
	ck_ckpt_info_free(c, c ? 1 : 0);
	ck_store_close(st);
}

static void test_reclaim(void)
{
	struct ck_error err = { { 0 } };
	struct ck_import_opts io = { .series = "run2" };
	struct ck_ckpt_info *c;
	struct ck_file_info *f = NULL;
	struct ck_store *st;
	uint64_t ids[8], live[8];
	char user[512], p[600];
	size_t n = 0, nlive;
	int64_t stamp;

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	/* checkpoint-10: model.safetensors, config.json (by path order). */
	SETUP(file_ids(st, "run", "checkpoint-10", ids, 8) == 2);
	nlive = file_ids(st, "run", "checkpoint-20", live, 8);
	stamp = stamp_of(st, "run");
	commit(st, "checkpoint-40");
	CHECK(ck_store_reclaim(st, "run", (uint64_t)stamp, ids, 1, NULL, NULL, &err) == -EAGAIN,
	      "a stale stamp was taken");
	CHECK(store_has("data/run/checkpoint-10/config.json"), "a refused reclaim unlinked a file");

	/* One file (config.json) and a live checkpoint's files, which stay. */
	stamp = stamp_of(st, "run");
	memcpy(&ids[2], live, nlive * sizeof(*ids));
	CHECK(ck_store_reclaim(st, "run", (uint64_t)stamp, ids, 1, NULL, NULL, &err) == 1, "reclaim: %s",
	      err.msg);
	CHECK(ck_store_reclaim(st, "run", (uint64_t)stamp_of(st, "run"), &ids[2], nlive, NULL, NULL, &err) == 0,
	      "files of a live checkpoint were dropped");
	CHECK(!store_has("data/run/checkpoint-10/config.json"), "the store's own copy stays on disk");
	CHECK(store_has("data/run/checkpoint-10/model.safetensors"), "a file still listed went");
	c = find(st, "run", "checkpoint-10");
	CHECK(c && ck_store_list_files(st, c->id, &f, &n) == 0 && n == 1, "the index still lists it");
	ck_file_info_free(f, n);
	ck_ckpt_info_free(c, c ? 1 : 0);
	CHECK(file_ids(st, "run", "checkpoint-20", live, 8) == nlive, "a live checkpoint lost files");

	/* The last file: the checkpoint goes with its directory and manifest. */
	CHECK(ck_store_reclaim(st, "run", (uint64_t)stamp_of(st, "run"), ids, 2, NULL, NULL, &err) == 1,
	      "reclaim: %s", err.msg);
	CHECK(!find(st, "run", "checkpoint-10"), "a checkpoint with no file left is still indexed");
	CHECK(!store_has("data/run/checkpoint-10"), "its directory is still there");
	CHECK(!store_has("manifests/run/checkpoint-10.manifest") && !store_has("manifests/run/checkpoint-10.tombstone"),
	      "its manifest or tombstone is still there");

	/* Imported in place: dropped from the index, never unlinked. */
	pathf(user, sizeof(user), "%s/user/run2", tmp);
	fill(pathf(p, sizeof(p), "%s/checkpoint-5", user));
	fill(pathf(p, sizeof(p), "%s/checkpoint-6", user));
	SETUP(ck_store_import(st, user, &io, NULL, NULL, &err) == 2);
	SETUP(ck_store_delete_checkpoint(st, "run2", "checkpoint-5", &err) == 0);
	SETUP(file_ids(st, "run2", "checkpoint-5", ids, 8) == 2);
	CHECK(ck_store_reclaim(st, "run2", (uint64_t)stamp_of(st, "run2"), ids, 2, NULL, NULL, &err) == 2,
	      "reclaim: %s", err.msg);
	CHECK(!find(st, "run2", "checkpoint-5"), "the imported checkpoint is still indexed");
	CHECK(exists(pathf(p, sizeof(p), "%s/checkpoint-5/model.safetensors", user)) &&
	      exists(pathf(p, sizeof(p), "%s/checkpoint-5/config.json", user)), "a user's file was unlinked");
	ck_store_close(st);
}

/* The index, the manifests and the disk agree: every checkpoint has a
 * manifest listing exactly its files, every file is on disk, the deleted
 * flag is what the tombstone says, and every directory under data/ is a
 * checkpoint of the index. */
static void check_consistent(struct ck_store *st, const char *when)
{
	struct ck_ckpt_info *c = NULL;
	size_t n = 0;
	char p[1024];

	SETUP(ck_store_list_checkpoints(st, "run", &c, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		struct ck_error err = { { 0 } };
		struct ck_file_info *f = NULL;
		struct ck_manifest m;
		char *mp = ck_manifest_path(store, "run", c[i].name);
		size_t nf = 0;

		SETUP(mp && ck_store_list_files(st, c[i].id, &f, &nf) == 0);
		if (ck_manifest_load(NULL, mp, &m, &err) < 0) {
			CHECK(0, "%s: %s has no manifest: %s", when, c[i].name, err.msg);
		} else {
			CHECK(m.nfiles == nf, "%s: %s: %zu files indexed, %zu in the manifest", when, c[i].name, nf,
			      m.nfiles);
			for (size_t j = 0; j < nf && j < m.nfiles; j++)
				CHECK(!strcmp(f[j].relpath, m.files[j].info.relpath), "%s: %s: %s indexed, %s in the "
				      "manifest", when, c[i].name, f[j].relpath, m.files[j].info.relpath);
			CHECK(ck_tombstone_applies(store, &m) == c[i].deleted, "%s: %s: deleted %d, tombstone %d",
			      when, c[i].name, c[i].deleted, !c[i].deleted);
			ck_manifest_clear(&m);
		}
		for (size_t j = 0; j < nf; j++)
			CHECK(exists(f[j].src_path), "%s: %s is indexed but gone", when, f[j].src_path);
		ck_file_info_free(f, nf);
		free(mp);
	}
	for (int step = 10; step <= 200; step += 10) {
		int indexed = 0;

		for (size_t i = 0; i < n; i++)
			indexed |= c[i].step == step;
		CHECK(indexed || !store_has(pathf(p, sizeof(p), "data/run/checkpoint-%d", step)),
		      "%s: data/run/checkpoint-%d is not indexed (recovery would record it again)", when, step);
	}
	ck_ckpt_info_free(c, n);
}

/* "name deleted" lines of the listing, for comparing with a reindex. */
static void listing(struct ck_store *st, struct ck_buf *out)
{
	struct ck_ckpt_info *c = NULL;
	size_t n = 0;

	SETUP(ck_store_list_checkpoints(st, "run", &c, &n) == 0);
	for (size_t i = 0; i < n; i++)
		SETUP(ck_buf_printf(out, "%s %d\n", c[i].name, c[i].deleted) == 0);
	SETUP(ck_buf_putc(out, 0) == 0);
	ck_ckpt_info_free(c, n);
}

/* Kills a deletion (stage "tombstone") or a reclaim of a whole
 * store-owned checkpoint at stage, then opens the store writable. */
static void test_crash_at(const char *stage, const char *name)
{
	struct ck_reindex_opts ro = { 0 };
	struct ck_buf before = CK_BUF_INIT, after = CK_BUF_INIT;
	struct ck_error err = { { 0 } };
	struct ck_ckpt_info *c;
	struct ck_store *st;
	int reclaim = strcmp(stage, "tombstone") != 0, status;
	pid_t pid;

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	commit(st, name);
	if (reclaim)
		SETUP(ck_store_delete_checkpoint(st, "run", name, &err) == 0);
	ck_store_close(st);
	fflush(NULL);
	pid = fork();
	SETUP(pid >= 0);
	if (pid == 0) {
		uint64_t ids[8];
		size_t n;

		setenv("CKPT_TEST_CRASH_AT", stage, 1);
		if (ck_store_open(store, 0, &st, &err) < 0)
			_exit(2);
		if (!reclaim) {
			ck_store_delete_checkpoint(st, "run", name, &err);
		} else {
			n = file_ids(st, "run", name, ids, 8);
			ck_store_reclaim(st, "run", (uint64_t)stamp_of(st, "run"), ids, n, NULL, NULL, &err);
		}
		_exit(0);
	}
	SETUP(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 137, "%s: the process did not stop there (%d)", stage,
	      status);
	/* A writable open recovers: the deletion or the reclaim is finished. */
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	check_consistent(st, stage);
	c = find(st, "run", name);
	if (reclaim) {
		char rel[300];

		CHECK(!c && !store_has(pathf(rel, sizeof(rel), "data/run/%s", name)),
		      "%s: %s is still there after recovery", stage, name);
	}
	else {
		CHECK(c && c->deleted, "%s: the deletion of %s was not rolled forward", stage, name);
	}
	ck_ckpt_info_free(c, c ? 1 : 0);
	listing(st, &before);
	ck_store_close(st);
	CHECK(ck_store_reindex(store, &ro, NULL, NULL, &err) >= 0, "%s: reindex: %s", stage, err.msg);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	listing(st, &after);
	CHECK(!strcmp((char *)before.data, (char *)after.data), "%s: reindexed as\n%s\ninstead of\n%s", stage,
	      (char *)after.data, (char *)before.data);
	ck_store_close(st);
	ck_buf_free(&before);
	ck_buf_free(&after);
}

int main(void)
{
	const char *fixtures = test_fixtures();
	static char fx[512];
	struct ck_error err = { { 0 } };
	char cmd[600];

	fixture = fixtures ? pathf(fx, sizeof(fx), "%s/safetensors/burn_mnist.safetensors", fixtures) : NULL;
	if (!fixture || access(fixture, R_OK) != 0) {
		printf("SKIP: no fixture %s\n", fixture ? fixture : "(CKPT_FIXTURES unset)");
		return 77;
	}
	pathf(tmp, sizeof(tmp), "%s/t_delete.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(ck_store_init(store, &err) == 0);
	test_tombstone_text();
	test_delete_and_reindex();
	test_reclaim();
	test_crash_at("tombstone", "checkpoint-100");
	test_crash_at("reclaim-manifest", "checkpoint-110");
	test_crash_at("reclaim-indexed", "checkpoint-120");
	test_crash_at("reclaim-unlinked", "checkpoint-130");
	test_crash_at("reclaim-unrecorded", "checkpoint-140");
	SETUP(run_command(pathf(cmd, sizeof(cmd), "rm -rf '%s'", tmp), NULL) == 0);
	return test_result();
}
