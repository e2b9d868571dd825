/* After a crash: finishing staged commits that were cut short, removing
 * temporary files and stale writers locks, and listing the quarantine.
 *
 * A directory under STORE/data/<series>/ was validated and made durable
 * before it was renamed there (staged.c), so one that the index does not
 * hold is a commit that stopped between the rename and the index commit:
 * recovery records it, as an import of it in place would. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "delete.h"
#include "index.h"
#include "manifest.h"
#include "staging.h"

#define MAX_REASON (64u << 10)

/* The directories among the entries of STORE/area/SERIES, for each_dir. */
struct dirs_only {
	int (*fn)(void *ctx, const char *series, const char *name, const char *path);
	void *ctx;
};

static int dir_entry(void *ctx, const char *series, const char *name, const char *path)
{
	struct dirs_only *w = ctx;
	struct stat sb;

	return lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? w->fn(w->ctx, series, name, path) : 0;
}

/* Calls fn(ctx, series, name, path) for each directory STORE/area/<series>/<name>. */
static int each_dir(const char *store, const char *area,
		    int (*fn)(void *ctx, const char *series, const char *name, const char *path), void *ctx)
{
	struct dirs_only w = { fn, ctx };

	return ck_store_area_each(store, area, dir_entry, &w);
}

/* STORE/manifests/<series>/<name>.manifest.tmp.<pid>: the writer died before
 * its rename (only called while no commit of this index runs; on a shared
 * filesystem other nodes' commits do not take this node's lock, so only a
 * temporary file older than any write is theirs no more). */
static int remove_manifest_temp(void *ctx, const char *series, const char *name, const char *path)
{
	const struct ck_store *st = ctx;
	struct stat sb;

	(void)series;
	if (strstr(name, CK_MANIFEST_SUFFIX CK_REPLACE_TMP) && lstat(path, &sb) == 0 &&
	    ck_store_temp_stale(st->where.shared, &sb) && unlink(path) < 0)
		return -errno;
	return 0;
}

struct recovery {
	struct ck_store *st;
	ck_import_report_fn report;
	void *rctx;
	struct ck_error *err;
	int first_rc;
	int recovered;
};

static int keep_first(struct recovery *r, int rc, const struct ck_error *why)
{
	if (rc < 0 && r->first_rc == 0) {
		r->first_rc = rc;
		if (r->err)
			*r->err = *why;
	}
	return 0;
}

static int recover_data_dir(void *ctx, const char *series, const char *name, const char *path)
{
	struct recovery *r = ctx;
	struct ck_import_opts opts = { .series = series };
	struct ck_error why = { { 0 } };
	struct ck_ckpt_info *ck;
	int rc;

	rc = ck_store_find_checkpoint(r->st, series, name, &ck);
	if (rc == 0) {
		ck_ckpt_info_free(ck, 1);
		return 0;
	}
	if (rc != -ENOENT)
		return keep_first(r, ck_fail(&why, -rc, "%s: cannot read the index: %s", r->st->path, strerror(-rc)),
				  &why);
	rc = ck_store_import(r->st, path, &opts, r->report, r->rctx, &why);
	if (rc < 0)
		return keep_first(r, ck_fail(&why, -rc, "cannot finish committing %s: %s", path, why.msg), &why);
	r->recovered++;
	if (r->report)
		r->report(r->rctx, path, CK_COMMIT_RECOVERED, "commit finished by recovery");
	return 0;
}

/* Removes the temporary files a writer of dir/REASON that died left:
 * "REASON.tmp.<pid>" (and "REASON.tmp", the name older versions used). */
static void remove_reason_temps(const char *dir)
{
	static const char prefix[] = CK_QUARANTINE_REASON ".tmp";
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)) != NULL) {
		if (!strncmp(e->d_name, prefix, sizeof(prefix) - 1))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
}

/* A quarantined directory whose REASON was not written yet when the commit stopped. */
static int recover_quarantined(void *ctx, const char *series, const char *name, const char *path)
{
	struct recovery *r = ctx;
	struct ck_error why = { { 0 } };
	char *reason = ck_path_join(path, CK_QUARANTINE_REASON);
	int rc = 0;

	(void)series;
	(void)name;
	if (!reason) {
		rc = -ENOMEM;
	} else if (access(reason, F_OK) < 0 && errno == ENOENT) {
		remove_reason_temps(path);
		rc = ck_store_write_reason(path, ".: the commit stopped before it wrote why; "
						 "commit a copy of it again to see\n", &why);
		keep_first(r, rc, &why);
		rc = 0;
	}
	free(reason);
	return rc;
}

int ck_store_recover(struct ck_store *st, ck_import_report_fn report, void *ctx, struct ck_error *err)
{
	struct recovery r = { .st = st, .report = report, .rctx = ctx, .err = err };
	int lock, rc;

	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	/* No commit writes a manifest while the index lock is held exclusive. */
	rc = ck_store_lock(st, 1, &lock, err);
	if (rc < 0)
		return rc;
	rc = ck_store_area_each(st->path, CK_MANIFEST_DIR, remove_manifest_temp, st);
	ck_store_unlock(lock);
	if (rc < 0)
		return ck_fail(err, -rc, "%s/%s: cannot remove temporary files: %s", st->path, CK_MANIFEST_DIR,
			       strerror(-rc));
	rc = ck_store_commit_lock(st, &lock, err);
	if (rc < 0)
		return rc;
	/* A directory under data/ that another node committed is in its
	 * manifest and the journal, not a commit cut short. */
	rc = ck_store_follow(st, NULL, err);
	if (rc < 0) {
		ck_store_unlock(lock);
		return rc;
	}
	rc = each_dir(st->path, CK_STORE_DATA_DIR, recover_data_dir, &r);
	if (rc == 0)
		rc = each_dir(st->path, CK_STORE_QUARANTINE_DIR, recover_quarantined, &r);
	if (rc == 0) {
		struct ck_error why = { { 0 } };

		/* Deletions and reclaims cut short (delete_finish.c). */
		keep_first(&r, ck_delete_recover(st, report, ctx, &why), &why);
	}
	if (rc == 0) {
		struct ck_error why = { { 0 } };
		int applied = ck_pack_rebuild(st, 1, &why);

		/* A compaction cut short after its packmap (chunk_rebuild.c). */
		keep_first(&r, applied < 0 ? applied : 0, &why);
	}
	ck_store_unlock(lock);
	/* Writers locks of directories that left staging, which a process
	 * killed right after its commit left (writers.c). */
	if (rc == 0)
		ck_writers_sweep(st->path);
	if (rc < 0)
		return ck_fail(err, -rc, "%s: recovery: %s", st->path, strerror(-rc));
	return r.first_rc < 0 ? r.first_rc : r.recovered;
}

/* ---- listing the quarantine ---- */

struct qlist {
	struct ck_quarantine_info *v;
	size_t n, cap;
};

static char *read_reason(const char *dir)
{
	char *path = ck_path_join(dir, CK_QUARANTINE_REASON), *text;
	size_t n = 0;
	FILE *f;

	if (!path)
		return NULL;
	f = fopen(path, "re");
	free(path);
	if (!f)
		return strdup("");
	text = malloc(MAX_REASON + 1);
	if (text) {
		n = fread(text, 1, MAX_REASON, f);
		text[n] = '\0';
	}
	fclose(f);
	return text;
}

static int add_quarantined(void *ctx, const char *series, const char *name, const char *path)
{
	struct qlist *q = ctx;
	struct ck_quarantine_info *e;

	if (q->n == q->cap) {
		e = ck_grow(q->v, &q->cap, sizeof(*e), 16);
		if (!e)
			return -ENOMEM;
		q->v = e;
	}
	e = &q->v[q->n];
	e->series = strdup(series);
	e->name = strdup(name);
	e->path = strdup(path);
	e->reason = read_reason(path);
	if (!e->series || !e->name || !e->path || !e->reason) {
		free(e->series);
		free(e->name);
		free(e->path);
		free(e->reason);
		return -ENOMEM;
	}
	q->n++;
	return 0;
}

static int cmp_quarantined(const void *a, const void *b)
{
	const struct ck_quarantine_info *x = a, *y = b;
	int c = strcmp(x->series, y->series);

	return c ? c : strcmp(x->name, y->name);
}

int ck_store_list_quarantine(struct ck_store *st, struct ck_quarantine_info **out, size_t *n)
{
	struct qlist q = { 0 };
	int rc = each_dir(st->path, CK_STORE_QUARANTINE_DIR, add_quarantined, &q);

	if (rc == 0 && !q.v && !(q.v = calloc(1, sizeof(*q.v))))
		rc = -ENOMEM;
	if (rc < 0) {
		ck_quarantine_info_free(q.v, q.n);
		return rc;
	}
	if (q.n > 1)
		qsort(q.v, q.n, sizeof(*q.v), cmp_quarantined);
	*out = q.v;
	*n = q.n;
	return 0;
}

void ck_quarantine_info_free(struct ck_quarantine_info *v, size_t n)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < n; i++) {
		free(v[i].series);
		free(v[i].name);
		free(v[i].path);
		free(v[i].reason);
	}
	free(v);
}
