/* Rebuilding the index from the manifests (`ckptctl reindex`).
 *
 *   1. Take STORE/index.lock exclusive: no commit runs until the end.
 *   2. Unless forced, make sure the current index (if it opens) holds no
 *      checkpoint without a manifest file: those would silently vanish.
 *   3. Build a new LMDB environment in STORE/index.reindex.<pid>/ from every
 *      STORE/manifests/<series>/<name>.manifest, in name order; a damaged
 *      manifest (bad checksum, bad content, or lying in another
 *      checkpoint's place) is reported and skipped.
 *   4. Sync it, and swap it with STORE/index in one renameat2(RENAME_EXCHANGE)
 *      (or, where the filesystem lacks it, two renames), then remove the old.
 *
 * A crash before 4 leaves the old index and a temporary directory, removed
 * by the next reindex; the exchange itself is atomic.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/str.h"
#include "commit.h"
#include "delete.h"
#include "index.h"
#include "journal.h"
#include "manifest.h"
#include "ckptfs/log.h"

#define TMP_PREFIX CK_STORE_INDEX_DIR ".reindex."
#define OLD_PREFIX CK_STORE_INDEX_DIR ".old."

struct reindex {
	const char *dir;           /* the store (its real path) */
	const struct ck_index_place *where;
	const struct ck_reindex_opts *opts;
	ck_import_report_fn report;
	void *ctx;
	struct ck_error *err;
	struct ck_store nst;       /* the index being built */
	size_t indexed;
};

/* The latest manifest of the series being indexed gives its record. */
struct series_state {
	int have;
	char *pattern;
	int64_t created_ns, imported_ns;
};

static char *joinf(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s", a, b);
	return p;
}

/* The names in dir (without . and ..), sorted.  -ENOENT when dir is missing. */
static int list_dir(const char *dir, char ***out, size_t *n)
{
	char **v = NULL, **nv;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (cnt == cap) {
			nv = ck_grow(v, &cap, sizeof(*v), 32);
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[cnt] = strdup(de->d_name);
		if (!v[cnt]) {
			rc = -ENOMEM;
			break;
		}
		cnt++;
	}
	closedir(d);
	if (rc < 0) {
		ck_strv_free(v, cnt);
		return rc;
	}
	if (cnt > 1)
		qsort(v, cnt, sizeof(*v), ck_strp_cmp);
	*out = v;
	*n = cnt;
	return 0;
}

/* Removes an LMDB environment directory (flat: data.mdb, lock.mdb). */
static void remove_env_dir(const char *path)
{
	char **names;
	size_t n, i;

	if (list_dir(path, &names, &n) < 0) {
		unlink(path);
		return;
	}
	for (i = 0; i < n; i++) {
		char *p = joinf(path, names[i]);

		if (p)
			unlink(p);
		free(p);
	}
	ck_strv_free(names, n);
	rmdir(path);
}

/* Temporary and old index directories of reindex runs that crashed. */
static void remove_leftovers(const char *dir)
{
	char **names;
	size_t n, i;

	if (list_dir(dir, &names, &n) < 0)
		return;
	for (i = 0; i < n; i++) {
		if (!strncmp(names[i], TMP_PREFIX, strlen(TMP_PREFIX)) ||
		    !strncmp(names[i], OLD_PREFIX, strlen(OLD_PREFIX))) {
			char *p = joinf(dir, names[i]);

			if (p)
				remove_env_dir(p);
			free(p);
		}
	}
	ck_strv_free(names, n);
}

/* ---- 2: what the current index holds that no manifest would bring back ---- */

static int count_unmanifested(const char *dir, struct ck_store *old, size_t *missing, char *example, size_t size)
{
	char **series;
	size_t ns, i, j;
	int rc;

	rc = ck_store_list_series(old, &series, &ns);
	for (i = 0; i < ns && rc == 0; i++) {
		struct ck_ckpt_info *c;
		size_t nc;

		rc = ck_store_list_checkpoints(old, series[i], &c, &nc);
		if (rc < 0)
			break;
		for (j = 0; j < nc && rc == 0; j++) {
			char *path = ck_manifest_path(dir, c[j].series, c[j].name);
			struct stat sb;

			if (!path) {
				rc = -ENOMEM;
			} else if (lstat(path, &sb) < 0 && errno == ENOENT) {
				if (!*missing)
					snprintf(example, size, "%s/%s", c[j].series, c[j].name);
				(*missing)++;
			}
			free(path);
		}
		ck_ckpt_info_free(c, nc);
	}
	ck_strv_free(series, ns);
	return rc;
}

static int check_coverage(struct reindex *r, const char *idx)
{
	struct ck_store old = { .path = (char *)r->dir, .readonly = 1 };
	char example[600] = "";
	char *data = joinf(idx, "data.mdb");
	size_t missing = 0;
	struct stat sb;
	int rc;

	if (!data)
		return ck_fail(r->err, ENOMEM, "out of memory");
	rc = stat(data, &sb);
	free(data);
	/* No index, or one that does not open: nothing there to keep. */
	if (rc < 0 || ck_store_open_index(&old, idx, 0, NULL) < 0) {
		if (old.env)
			mdb_env_close(old.env);
		return 0;
	}
	rc = count_unmanifested(r->dir, &old, &missing, example, sizeof(example));
	mdb_env_close(old.env);
	if (rc < 0)
		return ck_fail(r->err, -rc, "%s: cannot read the current index: %s", r->dir, strerror(-rc));
	if (missing)
		return ck_fail(r->err, EEXIST,
			       "the index holds %zu checkpoint%s with no manifest (%s%s), imported before manifests "
			       "existed?  Import %s again to write %s, or pass --force to drop %s",
			       missing, missing == 1 ? "" : "s", example, missing > 1 ? ", ..." : "",
			       missing == 1 ? "it" : "them", missing == 1 ? "its manifest" : "their manifests",
			       missing == 1 ? "it" : "them");
	return 0;
}

/* ---- 3: the manifests into the new index ---- */

static void report(const struct reindex *r, const char *path, int status, const char *msg)
{
	if (r->report)
		r->report(r->ctx, path, status, msg);
}

static void verify_files(const struct reindex *r, const struct ck_manifest *m, const char *what)
{
	size_t i;

	for (i = 0; i < m->nfiles; i++) {
		struct ck_error why = { { 0 } };

		if (ck_file_check(&m->files[i].info, &why) < 0)
			report(r, what, CK_REINDEX_STALE, why.msg);
	}
}

static int index_manifest(struct reindex *r, const char *path, struct series_state *ss)
{
	struct ck_error why = { { 0 } };
	struct ck_manifest m;
	char *expected, *what;
	char msg[64];
	size_t n;
	int rc;

	rc = ck_manifest_load(r->dir, path, &m, &why);
	if (rc == -ENOMEM)
		return ck_fail(r->err, ENOMEM, "out of memory");
	if (rc < 0) {
		report(r, path, rc, why.msg);
		return 0;
	}
	expected = ck_manifest_path(r->dir, m.ckpt.series, m.ckpt.name);
	n = strlen(m.ckpt.series) + strlen(m.ckpt.name) + 2;
	what = malloc(n);
	if (!expected || !what) {
		rc = ck_fail(r->err, ENOMEM, "out of memory");
		goto out;
	}
	snprintf(what, n, "%s/%s", m.ckpt.series, m.ckpt.name);
	if (strcmp(expected, path) != 0) {
		snprintf(why.msg, sizeof(why.msg), "describes checkpoint %s, whose manifest is %s", what, expected);
		report(r, path, -EINVAL, why.msg);
		goto out;
	}
	if (r->opts->verify)
		verify_files(r, &m, what);
	m.ckpt.deleted = ck_tombstone_applies(r->dir, &m);   /* deleted ones stay deleted */
	rc = ck_commit_restore(&r->nst, &m, r->err);
	if (rc < 0)
		goto out;
	if (!ss->have || m.imported_ns >= ss->imported_ns) {
		free(ss->pattern);
		ss->pattern = m.pattern;
		m.pattern = NULL;
		ss->created_ns = m.series_created_ns;
		ss->imported_ns = m.imported_ns;
		ss->have = 1;
	}
	snprintf(msg, sizeof(msg), "%zu file%s", m.nfiles, m.nfiles == 1 ? "" : "s");
	report(r, what, 0, msg);
	r->indexed++;
out:
	free(expected);
	free(what);
	ck_manifest_clear(&m);
	return rc;
}

/* Leftovers of commits that crashed: "<name>.manifest.tmp.<pid>" and ".old.<pid>". */
static int is_leftover(const char *name)
{
	return strstr(name, CK_MANIFEST_SUFFIX CK_REPLACE_TMP) || strstr(name, CK_MANIFEST_SUFFIX ".old.");
}

static int index_series(struct reindex *r, const char *sdir, const char *series)
{
	struct series_state ss = { 0 };
	char **names;
	size_t n, i;
	int rc;

	rc = list_dir(sdir, &names, &n);
	if (rc < 0)
		return ck_fail(r->err, -rc, "%s: %s", sdir, strerror(-rc));
	for (i = 0; i < n && rc == 0; i++) {
		char *path = joinf(sdir, names[i]);
		struct stat sb;

		if (!path) {
			rc = ck_fail(r->err, ENOMEM, "out of memory");
		} else if (ck_ends_with(names[i], CK_MANIFEST_SUFFIX)) {
			rc = index_manifest(r, path, &ss);
		} else if (is_leftover(names[i]) && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
			   ck_store_temp_stale(r->where->shared, &sb)) {
			unlink(path);   /* no commit of this index runs while we hold the lock */
		}
		free(path);
	}
	ck_strv_free(names, n);
	if (rc == 0 && ss.have)
		rc = ck_commit_series(&r->nst, series, ss.pattern, ss.created_ns, r->err);
	free(ss.pattern);
	return rc;
}

static int index_all(struct reindex *r)
{
	char *top = joinf(r->dir, CK_MANIFEST_DIR);
	char **names = NULL;
	size_t n = 0, i;
	int rc;

	if (!top)
		return ck_fail(r->err, ENOMEM, "out of memory");
	rc = list_dir(top, &names, &n);
	if (rc == -ENOENT) {
		rc = 0;   /* nothing committed yet */
	} else if (rc < 0) {
		ck_fail(r->err, -rc, "%s: %s", top, strerror(-rc));
	}
	for (i = 0; i < n && rc == 0; i++) {
		char *sdir = joinf(top, names[i]);
		struct stat sb;

		if (!sdir)
			rc = ck_fail(r->err, ENOMEM, "out of memory");
		else if (lstat(sdir, &sb) == 0 && S_ISDIR(sb.st_mode))
			rc = index_series(r, sdir, names[i]);
		free(sdir);
	}
	ck_strv_free(names, n);
	free(top);
	return rc;
}

/* ---- 4: swapping it in ---- */

static int swap_in(struct reindex *r, const char *tmp, const char *idx)
{
	struct stat sb;
	char old[64];
	char *oldp;
	int rc;

	if (lstat(idx, &sb) < 0) {
		if (rename(tmp, idx) < 0)
			return ck_fail(r->err, errno, "%s: %s", idx, strerror(errno));
		return 0;
	}
#ifdef RENAME_EXCHANGE
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, idx, RENAME_EXCHANGE) == 0) {
		remove_env_dir(tmp);   /* now the old index */
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
		return ck_fail(r->err, errno, "%s: cannot swap in the new index: %s", idx, strerror(errno));
#endif
	/* Without an atomic exchange: a crash between the renames leaves no
	 * index, which every tool reports as "run ckptctl reindex". */
	snprintf(old, sizeof(old), OLD_PREFIX "%ld", (long)getpid());
	oldp = joinf(r->where->parent, old);
	if (!oldp)
		return ck_fail(r->err, ENOMEM, "out of memory");
	rc = rename(idx, oldp) < 0 ? -errno : 0;
	if (rc == 0 && rename(tmp, idx) < 0) {
		rc = -errno;
		rename(oldp, idx);
	}
	if (rc == 0)
		remove_env_dir(oldp);
	free(oldp);
	if (rc < 0)
		return ck_fail(r->err, -rc, "%s: cannot swap in the new index: %s", idx, strerror(-rc));
	return 0;
}

static int build_and_swap(struct reindex *r, const char *idx)
{
	char name[64];
	char *tmp;
	int rc;

	snprintf(name, sizeof(name), TMP_PREFIX "%ld", (long)getpid());
	tmp = joinf(r->where->parent, name);
	if (!tmp)
		return ck_fail(r->err, ENOMEM, "out of memory");
	if (mkdir(tmp, 0755) < 0) {
		rc = ck_fail(r->err, errno, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return rc;
	}
	r->nst.path = (char *)r->dir;
	rc = ck_store_open_index(&r->nst, tmp, 1, r->err);
	/* Nobody sees this environment before the one sync below: no sync per checkpoint. */
	if (rc == 0 && mdb_env_set_flags(r->nst.env, MDB_NOSYNC, 1) != 0)
		rc = ck_fail(r->err, EIO, "%s: cannot set up the new index", tmp);
	if (rc == 0) {
		uint64_t head = 0;

		/* What the journal held before the manifests were read: the new
		 * index follows it from there (journal.c). */
		rc = ck_journal_head(r->dir, &head);
		if (rc < 0)
			ck_fail(r->err, -rc, "%s/%s: %s", r->dir, CK_JOURNAL_DIR, strerror(-rc));
		if (rc == 0)
			rc = index_all(r);
		if (rc == 0)
			rc = ck_journal_set_applied(&r->nst, head, r->err);
	}
	if (rc == 0) {
		struct ck_error why = { { 0 } };
		int prc = ck_pack_rebuild(&r->nst, 0, &why);

		/* Packed files come back from packmaps and packs; one that cannot
		 * stays raw (its raw file is still what the manifest names). */
		if (prc < 0)
			report(r, r->dir, prc, why.msg);
	}
	if (rc == 0 && mdb_env_sync(r->nst.env, 1) != 0)
		rc = ck_fail(r->err, EIO, "%s: cannot sync the new index", tmp);
	if (r->nst.env)
		mdb_env_close(r->nst.env);
	r->nst.env = NULL;
	if (rc == 0 && (rc = ck_fsync_dir(tmp)) < 0)
		ck_fail(r->err, -rc, "%s: %s", tmp, strerror(-rc));
	if (rc == 0)
		rc = swap_in(r, tmp, idx);
	if (rc == 0 && (rc = ck_fsync_dir(r->where->parent)) < 0)
		ck_fail(r->err, -rc, "%s: %s", r->where->parent, strerror(-rc));
	if (rc < 0)
		remove_env_dir(tmp);
	free(tmp);
	return rc;
}

/* Rebuilds the index at where from the store's manifests, holding its lock
 * exclusive.  store is the store's real path. */
static int rebuild(const char *store, const struct ck_index_place *where, const struct ck_reindex_opts *opts,
		   ck_import_report_fn report_fn, void *ctx, struct ck_error *err)
{
	struct reindex r = { .dir = store, .where = where, .opts = opts, .report = report_fn, .ctx = ctx,
			     .err = err };
	int lock, rc;

	rc = ck_lock_path(where->lock, 1, &lock, err);
	if (rc < 0)
		return rc;
	remove_leftovers(where->parent);
	if (!r.opts->force)
		rc = check_coverage(&r, where->dir);
	if (rc == 0)
		rc = build_and_swap(&r, where->dir);
	ck_store_unlock(lock);
	return rc < 0 ? rc : (int)r.indexed;
}

int ck_store_reindex(const char *dir, const struct ck_reindex_opts *opts, ck_import_report_fn report_fn, void *ctx,
		     struct ck_error *err)
{
	static const struct ck_reindex_opts defaults;
	struct ck_index_place where;
	char *real;
	int rc;

	rc = ck_store_check_marker(dir, err);
	if (rc < 0)
		return rc;
	real = realpath(dir, NULL);
	if (!real)
		return ck_fail(err, errno, "%s: %s", dir, strerror(errno));
	rc = ck_index_place_find(real, 1, &where, err);
	if (rc == 0) {
		rc = rebuild(real, &where, opts ? opts : &defaults, report_fn, ctx, err);
		ck_index_place_clear(&where);
	}
	free(real);
	return rc;
}

int ck_index_build(const char *store, const struct ck_index_place *where, struct ck_error *err)
{
	static const struct ck_reindex_opts opts = { .force = 1 };
	struct stat sb;
	char *data = joinf(where->dir, "data.mdb");
	int rc = 0, lock;

	if (!data)
		return ck_fail(err, ENOMEM, "out of memory");
	/* Another process of this node may be building it: wait for it, then
	 * look again. */
	rc = ck_lock_path(where->lock, 0, &lock, err);
	if (rc == 0) {
		rc = stat(data, &sb) == 0 ? 1 : 0;
		ck_store_unlock(lock);
	}
	free(data);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	ck_info("%s: building the node-local index in %s from the manifests", store, where->dir);
	rc = rebuild(store, where, &opts, NULL, NULL, err);
	return rc < 0 ? rc : 0;
}
