/* Finishing deletions: what a reclaim does after its index transaction,
 * and what recovery does after a crash cut a deletion or a reclaim short.
 *
 * The order of every step keeps the rule that neither the index nor a
 * manifest names a file that is gone, and that a store-owned checkpoint
 * directory is never left without its record (recovery would take it for
 * a commit cut short and record it again):
 *
 *   1. the manifest no longer lists a file     (reclaim's transaction)
 *   2. the index drops what the manifest dropped
 *   3. the store's copies nothing lists are unlinked, emptied dirs removed
 *   4. a checkpoint with no file left: its directory goes, then its
 *      record and manifest (one transaction), then its tombstone.
 *
 * Every step can run again after a crash and finds its work done.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "ckptfs/str.h"
#include "delete.h"
#include "index.h"
#include "journal.h"
#include "manifest.h"
#include "chunk_table.h"
#include "staging.h"

struct finish {
	struct ck_store *st;
	const struct ck_ckpt_info *ck;
	const struct ck_manifest *m;
	ck_import_report_fn report;
	void *ctx;
	int changed;
};

/* Whether the manifest lists relpath (its files are in strictly increasing order). */
static int listed(const struct ck_manifest *m, const char *relpath)
{
	size_t lo = 0, hi = m->nfiles;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(relpath, m->files[mid].info.relpath);

		if (!c)
			return 1;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return 0;
}

/* 2: index records of files the manifest no longer lists. */
static int drop_unlisted_records(struct finish *f, struct ck_error *err)
{
	struct ck_delete_txn lt;
	struct ck_file_info *files = NULL;
	size_t n = 0, dropped = 0;
	int rc;

	rc = ck_delete_begin(f->st, &lt, 0, err);
	if (rc == 0)
		rc = ck_txn_list_files(lt.txn, f->st, f->ck->id, &files, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (listed(f->m, files[i].relpath))
			continue;
		rc = ck_delete_file_records(lt.txn, f->st, &files[i]);
		dropped++;
	}
	if (rc == 0 && dropped) {
		rc = ck_mdb_errno(mdb_txn_commit(lt.txn));
		lt.txn = NULL;
		f->changed = 1;
	}
	if (rc < 0 && !err->msg[0])
		ck_fail(err, -rc, "%s/%s: cannot update the index: %s", f->ck->series, f->ck->name, strerror(-rc));
	ck_delete_end(&lt);
	ck_file_info_free(files, n);
	return rc;
}

/* 3: under the checkpoint's own directory, regular files the manifest does
 * not list are unlinked and directories left empty removed (not root). */
static int sweep(struct finish *f, const char *root, const char *rel)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent *d;
	DIR *dir;
	int rc = 0;

	if (snprintf(path, sizeof(path), "%s%s%s", root, rel[0] ? "/" : "", rel) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	while ((d = readdir(dir)) != NULL && rc == 0) {
		struct stat sb;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", d->d_name) >= (int)sizeof(sub) ||
		    snprintf(path, sizeof(path), "%s/%s", root, sub) >= (int)sizeof(path)) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (lstat(path, &sb) < 0)
			continue;
		if (S_ISDIR(sb.st_mode)) {
			rc = sweep(f, root, sub);
			if (rc == 0 && rmdir(path) == 0)
				f->changed = 1;
		} else if (!listed(f->m, sub)) {
			if (unlink(path) < 0) {
				rc = -errno;
				break;
			}
			f->changed = 1;
			if (f->report)
				f->report(f->ctx, path, CK_RECLAIM_DROPPED, "unlinked");
		}
	}
	closedir(dir);
	return rc;
}

void ck_delete_drop_packmap(struct ck_store *st, const struct ck_ckpt_info *ck)
{
	char *packmap = ck_packmap_path(st->path, ck->series, ck->name);

	if (packmap && unlink(packmap) < 0 && errno != ENOENT)
		ck_warn("%s: cannot remove: %s", packmap, strerror(errno));
	free(packmap);
}

/* 4: the record and the manifest of a checkpoint with nothing left, in one
 * transaction (the manifest kept as a hard link until it commits), then
 * the tombstone and the packmap. */
static int remove_checkpoint(struct finish *f, const char *mpath, struct ck_error *err)
{
	char *tomb = ck_tombstone_path(mpath), backup[PATH_MAX + 32];
	struct ck_delete_txn lt;
	int have_backup = 0, rc;

	if (!tomb)
		return ck_fail(err, ENOMEM, "out of memory");
	snprintf(backup, sizeof(backup), "%s.old.%ld", mpath, (long)getpid());
	rc = ck_delete_begin(f->st, &lt, 0, err);
	if (rc == 0)
		rc = ck_delete_ckpt_records(lt.txn, f->st, f->ck);
	if (rc == 0 && link(mpath, backup) == 0)
		have_backup = 1;
	if (rc == 0)
		rc = ck_tombstone_unlink(mpath);
	if (rc == 0)
		rc = ck_journal_note_ckpt(f->st, f->ck->series, f->ck->name, NULL, NULL, err);
	if (rc == 0) {
		ck_crash_point("reclaim-unrecorded");   /* test hook: manifest gone, record not */
		rc = ck_mdb_errno(mdb_txn_commit(lt.txn));
		lt.txn = NULL;
	}
	if (rc < 0 && have_backup)
		rename(backup, mpath);
	else if (have_backup)
		unlink(backup);
	if (rc < 0 && have_backup)
		ck_journal_note_ckpt(f->st, f->ck->series, f->ck->name, NULL, NULL, NULL);
	if (rc == 0) {
		ck_tombstone_unlink(tomb);
		ck_delete_drop_packmap(f->st, f->ck);
		ck_journal_note_ckpt(f->st, f->ck->series, f->ck->name, NULL, NULL, NULL);
		f->changed = 1;
		if (f->report) {
			char what[600];

			snprintf(what, sizeof(what), "%s/%s", f->ck->series, f->ck->name);
			f->report(f->ctx, what, CK_RECLAIM_REMOVED, "nothing draws from it any more");
		}
	} else if (!err->msg[0]) {
		ck_fail(err, -rc, "%s/%s: cannot remove the record: %s", f->ck->series, f->ck->name, strerror(-rc));
	}
	ck_delete_end(&lt);
	free(tomb);
	return rc;
}

int ck_delete_finish(struct ck_store *st, const struct ck_ckpt_info *ck, ck_import_report_fn report,
		     void *ctx, struct ck_error *err)
{
	struct ck_manifest m = { 0 };
	struct ck_error why = { { 0 } };
	struct finish f = { st, ck, &m, report, ctx, 0 };
	char *mpath = ck_manifest_path(st->path, ck->series, ck->name);
	char *owned = ck_delete_owned_dir(st, ck);
	struct stat sb;
	int rc;

	if (!mpath)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = ck_manifest_load(st->path, mpath, &m, &why);
	if (rc == -ENOENT) {
		/* Cut short in step 4: the manifest went, the record stayed. */
		if (owned && lstat(owned, &sb) == 0) {
			ck_warn("%s/%s: deleted, without a manifest, but %s is still there: left alone",
				ck->series, ck->name, owned);
			rc = 0;
		} else {
			rc = remove_checkpoint(&f, mpath, err);
		}
		goto out;
	}
	if (rc < 0) {
		ck_fail(err, -rc, "%s: %s", mpath, why.msg);
		goto out;
	}
	rc = drop_unlisted_records(&f, err);
	if (rc == 0 && owned) {
		rc = sweep(&f, owned, "");
		if (rc < 0)
			ck_fail(err, -rc, "%s: %s", owned, strerror(-rc));
	}
	if (rc == 0 && m.nfiles == 0) {
		if (owned && rmdir(owned) < 0 && errno != ENOENT) {
			rc = ck_fail(err, errno, "%s: %s", owned, strerror(errno));
		} else {
			if (owned)
				ck_fsync_parent(owned);
			ck_crash_point("reclaim-unlinked");   /* test hook: files gone, record and manifest not */
			rc = remove_checkpoint(&f, mpath, err);
		}
	}
out:
	ck_manifest_clear(&m);
	free(mpath);
	free(owned);
	return rc < 0 ? rc : f.changed;
}

/* ---- recovery ---- */

struct recover {
	struct ck_store *st;
	ck_import_report_fn report;
	void *ctx;
	struct ck_error *err;
	int first_rc;
	int changed;
};

static void keep_first(struct recover *r, int rc, const struct ck_error *why)
{
	if (rc < 0 && r->first_rc == 0) {
		r->first_rc = rc;
		if (r->err)
			*r->err = *why;
	}
}

/* A tombstone: rolls its deletion forward into the index, or removes it
 * when its manifest is gone or was written again since (re-imported). */
static void recover_tombstone(struct recover *r, const char *tpath)
{
	struct ck_error why = { { 0 } };
	struct ck_manifest m = { 0 };
	size_t n = strlen(tpath) - strlen(CK_TOMBSTONE_SUFFIX);
	char mpath[PATH_MAX];
	int64_t imported_ns;
	int rc;

	if (n + sizeof(CK_MANIFEST_SUFFIX) > sizeof(mpath))
		return;
	memcpy(mpath, tpath, n);
	strcpy(mpath + n, CK_MANIFEST_SUFFIX);
	rc = ck_tombstone_load(tpath, &imported_ns, &why);
	if (rc < 0) {
		ck_warn("%s: ignored: %s", tpath, why.msg);
		return;
	}
	rc = ck_manifest_load(NULL, mpath, &m, &why);
	if (rc == -ENOENT || (rc == 0 && m.imported_ns != imported_ns)) {
		ck_tombstone_unlink(tpath);
	} else if (rc == 0) {
		rc = ck_delete_mark(r->st, m.ckpt.series, m.ckpt.name, 0, &why);
		if (rc == 0) {
			r->changed++;
			if (r->report)
				r->report(r->ctx, tpath, 0, "deletion finished by recovery");
		} else if (rc != -ENOENT) {
			keep_first(r, rc, &why);
		}
	}
	ck_manifest_clear(&m);
}

/* A STORE/manifests/SERIES entry: a tombstone is rolled forward, the
 * temporary of a writer that died removed. */
static int tombstone_entry(void *ctx, const char *series, const char *name, const char *path)
{
	(void)series;
	if (strstr(name, CK_TOMBSTONE_SUFFIX CK_REPLACE_TMP))
		unlink(path);
	else if (ck_ends_with(name, CK_TOMBSTONE_SUFFIX))
		recover_tombstone(ctx, path);
	return 0;
}

static void recover_tombstones(struct recover *r)
{
	ck_store_area_each(r->st->path, CK_MANIFEST_DIR, tombstone_entry, r);
}

static void recover_deleted(struct recover *r)
{
	char **series = NULL;
	size_t ns = 0;

	if (ck_store_list_series(r->st, &series, &ns) < 0)
		return;
	for (size_t i = 0; i < ns; i++) {
		struct ck_ckpt_info *cks = NULL;
		size_t n = 0;

		if (ck_store_list_checkpoints(r->st, series[i], &cks, &n) < 0)
			continue;
		for (size_t j = 0; j < n; j++) {
			struct ck_error why = { { 0 } };
			int rc;

			if (!cks[j].deleted)
				continue;
			rc = ck_delete_finish(r->st, &cks[j], r->report, r->ctx, &why);
			if (rc > 0)
				r->changed++;
			keep_first(r, rc, &why);
		}
		ck_ckpt_info_free(cks, n);
	}
	ck_strv_free(series, ns);
}

int ck_delete_recover(struct ck_store *st, ck_import_report_fn report, void *ctx, struct ck_error *err)
{
	struct recover r = { st, report, ctx, err, 0, 0 };

	recover_tombstones(&r);
	recover_deleted(&r);
	return r.first_rc < 0 ? r.first_rc : r.changed;
}
