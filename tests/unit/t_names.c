/* Names are data (the store and the view, without FUSE): series,
 * checkpoint and file names with quotes, backslashes, newlines, bytes that
 * are not UTF-8, and 255 bytes each (a series and a checkpoint name of 255
 * bytes together, and paths inside a checkpoint, pass LMDB's key limit)
 * import, list, are found, survive a reindex from the manifests, and
 * resolve in a view to the bytes of the file. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/store.h"
#include "ckptfs/view.h"
#include "testutil.h"

static char tmp[256];

#define ODD "q\"uote \\back\nline\xff\xfe"

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	SETUP(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void mkdirs(const char *path)
{
	char cmd[8192];

	SETUP(strlen(path) < 4000);
	snprintf(cmd, sizeof(cmd), "mkdir -p -- \"$(printf '%%s' \"$P\")\"");
	SETUP(setenv("P", path, 1) == 0 && system(cmd) == 0);
}

struct series_case {
	char *series, *ckpt, *file;   /* file may hold '/' */
};

static void check_series(struct ck_store *st, const struct series_case *c, const char *store)
{
	struct ck_ckpt_info *ck = NULL, *one = NULL;
	struct ck_file_info *f = NULL;
	size_t n = 0, nf = 0;
	int rc;

	rc = ck_store_list_checkpoints(st, c->series, &ck, &n);
	CHECK(rc == 0 && n == 1 && !strcmp(ck[0].name, c->ckpt) && !strcmp(ck[0].series, c->series),
	      "%zu-byte series: checkpoints %d %zu", strlen(c->series), rc, n);
	if (rc == 0 && n == 1) {
		rc = ck_store_list_files(st, ck[0].id, &f, &nf);
		CHECK(rc == 0 && nf == 2 && (!strcmp(f[0].relpath, c->file) || !strcmp(f[1].relpath, c->file)),
		      "%zu-byte series: files %d %zu", strlen(c->series), rc, nf);
		CHECK(nf != 2 || strcmp(f[0].relpath, f[1].relpath) < 0, "files out of path order");
		ck_file_info_free(f, nf);
	}
	CHECK(ck_store_find_checkpoint(st, c->series, c->ckpt, &one) == 0 && !strcmp(one->name, c->ckpt),
	      "%zu-byte checkpoint not found by name", strlen(c->ckpt));
	if (one)
		ck_ckpt_info_free(one, 1);
	ck_ckpt_info_free(ck, n);
	(void)store;
}

static void check_view(const char *store, const struct series_case *c, size_t ncases)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	for (size_t i = 0; i < ncases; i++) {
		const struct ck_vnode *s, *ck, *n = NULL;
		struct ck_vfile *f;
		struct ck_extent e[4];
		char *rel = strdup(c[i].file), *part, *save = NULL;
		int rc;

		SETUP(rel);
		rc = ck_view_lookup(v, ck_view_root(v), c[i].series, &s);
		CHECK(rc == 0, "view: series %zu not found", i);
		if (rc == 0)
			rc = ck_view_lookup(v, s, c[i].ckpt, &ck);
		CHECK(rc == 0, "view: checkpoint %zu not found", i);
		n = rc == 0 ? ck : NULL;
		for (part = strtok_r(rel, "/", &save); n && part; part = strtok_r(NULL, "/", &save))
			if (ck_view_lookup(v, n, part, &n) < 0)
				n = NULL;
		CHECK(n != NULL, "view: file %zu not found", i);
		if (n && ck_view_open_file(v, n, &f) == 0) {
			rc = ck_vfile_map(f, 0, 64, e, 4);
			CHECK(rc == 1 && e[0].len == 5, "view: file %zu maps to %d extents", i, rc);
			ck_vfile_put(f);
		}
		free(rel);
	}
	ck_view_close(v);
}

int main(void)
{
	struct ck_error err = { { 0 } };
	char *s255 = repeat('S', 255), *c255 = repeat('c', 247), *f255 = repeat('f', 255), *d200 = repeat('d', 200);
	char store[300], path[4096], deep[1024], ckname[300];
	struct series_case cases[3];
	struct ck_store *st;

	snprintf(tmp, sizeof(tmp), "%s/t_names.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(ck_store_init(store, &err) == 0);

	/* 1: odd bytes everywhere; 2: 255-byte series and checkpoint names
	 * (a 255-byte checkpoint name has a step at its end: a user pattern);
	 * 3: a path of 807 bytes inside a checkpoint. */
	snprintf(ckname, sizeof(ckname), "%s-1234567", c255);
	snprintf(deep, sizeof(deep), "%s/%s/%s/%s", d200, d200, d200, f255 + 55);
	cases[0] = (struct series_case){ "run " ODD, "checkpoint-10", ODD ".txt" };
	cases[1] = (struct series_case){ s255, ckname, f255 };
	cases[2] = (struct series_case){ "deep", "checkpoint-5", deep };
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	for (size_t i = 0; i < 3; i++) {
		struct ck_import_opts o = { .step_pattern = i == 1 ? "([0-9]+)$" : NULL };
		char dir[1024];

		pathf(dir, sizeof(dir), "%s/%s/%s", tmp, cases[i].series, cases[i].ckpt);
		pathf(path, sizeof(path), "%s/%s", dir, cases[i].file);
		*strrchr(path, '/') = '\0';
		mkdirs(path);
		pathf(path, sizeof(path), "%s/%s", dir, cases[i].file);
		write_bytes(path, "bytes", 5);
		pathf(path, sizeof(path), "%s/other.json", dir);
		write_bytes(path, "{}", 2);
		pathf(dir, sizeof(dir), "%s/%s", tmp, cases[i].series);
		CHECK(ck_store_import(st, dir, &o, NULL, NULL, &err) == 1, "case %zu: import: %s", i, err.msg);
		check_series(st, &cases[i], store);
		/* Imported again: the same records are replaced, not added. */
		CHECK(ck_store_import(st, dir, &o, NULL, NULL, &err) == 1, "case %zu: import again: %s", i, err.msg);
		check_series(st, &cases[i], store);
	}
	ck_store_close(st);
	check_view(store, cases, 3);

	/* From the manifests alone. */
	CHECK(ck_store_reindex(store, &(struct ck_reindex_opts){ 0 }, NULL, NULL, &err) == 3, "reindex: %s", err.msg);
	SETUP(ck_store_open(store, 1, &st, &err) == 0);
	for (size_t i = 0; i < 3; i++)
		check_series(st, &cases[i], store);
	ck_store_close(st);
	check_view(store, cases, 3);

	/* Written through the store: a 255-byte staged name commits under a
	 * step name, and is quarantined (its name cut to fit) when torn. */
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	for (int torn = 0; torn < 2; torn++) {
		char *dir = ck_store_staging_path(st, cases[0].series, s255);

		SETUP(dir);
		mkdirs(dir);
		pathf(path, sizeof(path), "%s/%s", dir, torn ? "model.pt" : ODD);
		write_bytes(path, torn ? "PK\x03\x04 torn" : "bytes", 5);
		CHECK(ck_store_commit_staged(st, cases[0].series, s255, torn ? "checkpoint-8" : "checkpoint-7", NULL, NULL,
					     &err) == (torn ? -EBADMSG : 0),
		      "commit of a 255-byte staged name (%s): %s", torn ? "torn" : "good", err.msg);
		free(dir);
	}
	{
		struct ck_quarantine_info *q = NULL;
		size_t nq = 0;

		CHECK(ck_store_list_quarantine(st, &q, &nq) == 0 && nq == 1 && !strncmp(q[0].name, s255, 235) &&
		      strlen(q[0].name) <= 255 && strstr(q[0].reason, "model.pt"), "quarantine of a 255-byte name");
		ck_quarantine_info_free(q, nq);
	}
	ck_store_close(st);

	/* Deleted by name. */
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	CHECK(ck_store_delete_checkpoint(st, s255, ckname, &err) == 0, "delete the 255-byte checkpoint: %s", err.msg);
	CHECK(ck_store_delete_checkpoint(st, cases[0].series, "checkpoint-10", &err) == 0, "delete: %s", err.msg);
	ck_store_close(st);

	snprintf(path, sizeof(path), "rm -rf '%s'", tmp);
	SETUP(system(path) == 0);
	free(s255);
	free(c255);
	free(f255);
	free(d200);
	return test_result();
}
