/* Files imported in place that moved (`ckptctl relocate STORE OLD NEW`;
 * docs/format.md, "Paths").
 *
 * What lives inside the store is recorded relative to it and moves with
 * it; a checkpoint imported in place keeps the absolute paths of its
 * files.  When those files move (a dataset volume mounted elsewhere, a
 * directory renamed), every manifest path under OLD is rewritten under
 * NEW, each rewrite journaled, and the index follows the journal as any
 * other index of the store does.  The files' identities are not touched:
 * a file that also got a new inode (copied rather than renamed) is read
 * again once at its next use (reidentify.c). */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/fileio.h"
#include "journal.h"
#include "manifest.h"

/* NEW + what follows OLD in path when path is OLD or lies under it
 * (component-wise), else NULL.  *err_nomem set when allocation failed. */
static char *moved(const char *path, const char *old, const char *new, int *nomem)
{
	size_t n = strlen(old);
	char *out = NULL;

	while (n > 1 && old[n - 1] == '/')
		n--;
	if (path[0] != '/' || strncmp(path, old, n) || (path[n] && path[n] != '/'))
		return NULL;
	if (asprintf(&out, "%.*s%s", (int)(strlen(new) > 1 && new[strlen(new) - 1] == '/' ? strlen(new) - 1 :
					    strlen(new)), new, path + n) < 0) {
		*nomem = 1;
		return NULL;
	}
	return out;
}

static int replace(char **path, const char *old, const char *new, int *nomem)
{
	char *p = moved(*path, old, new, nomem);

	if (!p)
		return 0;
	free(*path);
	*path = p;
	return 1;
}

static int relocate_manifest(struct ck_store *st, const char *mpath, const char *old, const char *new,
			     int dry_run, ck_import_report_fn report, void *ctx, struct ck_error *err)
{
	struct ck_manifest_txn mtx;
	struct ck_error why = { { 0 } };
	struct ck_manifest m;
	int nomem = 0, changed = 0, rc;

	rc = ck_manifest_load(st->path, mpath, &m, &why);
	if (rc < 0) {
		if (report)
			report(ctx, mpath, rc, why.msg);
		return rc == -ENOMEM ? ck_fail(err, ENOMEM, "out of memory") : 0;
	}
	changed += replace(&m.ckpt.src_path, old, new, &nomem);
	for (size_t i = 0; i < m.nfiles; i++)
		changed += replace(&m.files[i].info.src_path, old, new, &nomem);
	if (nomem) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	if (!changed)
		goto out;
	if (!dry_run) {
		rc = ck_manifest_store(st->path, &m, &mtx, &why);
		if (rc < 0) {
			ck_fail(err, -rc, "%s: %s", mpath, why.msg);
			goto out;
		}
		ck_manifest_store_commit(&mtx);
		rc = ck_journal_note_ckpt(st, m.ckpt.series, m.ckpt.name, NULL, NULL, err);
		if (rc < 0)
			goto out;
	}
	if (report) {
		char what[600], msg[64];

		snprintf(what, sizeof(what), "%s/%s", m.ckpt.series, m.ckpt.name);
		snprintf(msg, sizeof(msg), "%d path%s", changed, changed == 1 ? "" : "s");
		report(ctx, what, 0, msg);
	}
	rc = 1;
out:
	ck_manifest_clear(&m);
	return rc;
}

int ck_store_relocate(struct ck_store *st, const char *old, const char *new, int dry_run,
		      ck_import_report_fn report, void *ctx, struct ck_error *err)
{
	char *top = ck_path_join(st->path, CK_MANIFEST_DIR);
	struct dirent *de, *e;
	DIR *d;
	int lock = -1, total = 0, rc;

	if (!top)
		return ck_fail(err, ENOMEM, "out of memory");
	if (old[0] != '/' || new[0] != '/') {
		free(top);
		return ck_fail(err, EINVAL, "OLD_PREFIX and NEW_PREFIX must be absolute paths");
	}
	if (st->readonly && !dry_run) {
		free(top);
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	}
	/* No commit, reclaim or compaction rewrites a manifest meanwhile. */
	rc = dry_run ? 0 : ck_store_commit_lock(st, &lock, err);
	d = rc == 0 ? opendir(top) : NULL;
	if (rc == 0 && !d && errno != ENOENT)
		rc = ck_fail(err, errno, "%s: %s", top, strerror(errno));
	while (rc >= 0 && d && (de = readdir(d)) != NULL) {
		char *sdir = de->d_name[0] == '.' ? NULL : ck_path_join(top, de->d_name);
		DIR *sd = sdir ? opendir(sdir) : NULL;

		while (rc >= 0 && sd && (e = readdir(sd)) != NULL) {
			size_t n = strlen(e->d_name), sl = strlen(CK_MANIFEST_SUFFIX);
			char *mpath;

			if (n <= sl || strcmp(e->d_name + n - sl, CK_MANIFEST_SUFFIX))
				continue;
			mpath = ck_path_join(sdir, e->d_name);
			rc = mpath ? relocate_manifest(st, mpath, old, new, dry_run, report, ctx, err) :
				     ck_fail(err, ENOMEM, "out of memory");
			total += rc > 0;
			free(mpath);
		}
		if (sd)
			closedir(sd);
		free(sdir);
	}
	if (d)
		closedir(d);
	free(top);
	/* This index takes the new paths as every other one does. */
	if (rc >= 0 && !dry_run)
		rc = ck_store_follow(st, NULL, err);
	ck_store_unlock(lock);
	return rc < 0 ? rc : total;
}
