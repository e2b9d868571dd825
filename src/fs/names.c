/* Names in a writable mount (names.h): lookup, mkdir, unlink, rmdir and
 * rename where the in-progress space meets the view (dirs.h).
 *
 * A rename inside a series directory to a name that carries a step, from
 * one that has none or is temporary, commits (include/ckptfs/writer_rules.h);
 * so does setxattr user.ckptfs.commit (write.c).  The request is answered
 * only after the commit: EIO when the directory was quarantined.  While a
 * commit runs, changes inside the directory get EBUSY.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/writer.h"
#include "ckptfs/writer_rules.h"
#include "ckptfs/log.h"
#include "ckptfs/writer_staging.h"
#include "ckptfs/writer_staged_ops.h"
#include "creds.h"
#include "delete.h"
#include "dirs.h"
#include "names.h"
#include "nodes.h"
#include "notify.h"

/* Registers the child name of c (it exists) and fills its entry. */
static int staged_entry(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name,
			struct fuse_entry_param *e)
{
	struct ck_staged_at at;
	uint64_t ino;
	int rc = ckfs_child_at(fs, c, name, &at);

	memset(e, 0, sizeof(*e));
	if (rc == 0 && fstatat(at.dir, at.name, &e->attr, AT_SYMLINK_NOFOLLOW) != 0)
		rc = -errno;
	ck_staging_at_free(&at);
	if (rc)
		return rc;
	if (c->kind == CKFS_DIR_ROOT)
		rc = ck_staging_get(fs->staging, 0, name, NULL, &e->attr, &ino);
	else if (c->kind == CKFS_DIR_SERIES)
		rc = ck_staging_get(fs->staging, 0, c->series, name, &e->attr, &ino);
	else
		rc = ck_staging_get(fs->staging, c->staged, NULL, name, &e->attr, &ino);
	if (rc)
		return rc;
	e->ino = ino;
	e->attr.st_ino = ino;
	e->generation = 1;
	/* Files being written change under the kernel's feet: no caching. */
	e->attr_timeout = 0;
	e->entry_timeout = 0;
	return 0;
}

/* The entry of name in the directory of c: the view's, else the staged one. */
static int lookup_in(struct ckfs *fs, fuse_ino_t parent, struct ckfs_dir_ctx *c, const char *name,
		     struct fuse_entry_param *e)
{
	int rc = -ENOENT;

	if (c->view_dir && c->kind != CKFS_DIR_STAGED) {
		struct ck_vattr a;

		/* The view first: a staged series node may have a view
		 * directory by now (its first commit). */
		rc = ck_view_getattr(fs->view, c->view_dir, &a);
		if (rc == 0)
			rc = ckfs_view_entry(fs, ck_staging_is_staged(parent) ? a.ino : parent, name, e);
	}
	if (rc == -ENOENT && c->kind != CKFS_DIR_VIEW)
		rc = staged_entry(fs, c, name, e);
	return rc;
}

void ckfs_rw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_dir_ctx c;
	struct fuse_entry_param e;
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc == 0) {
		rc = lookup_in(fs, parent, &c, name, &e);
		/* A checkpoint being committed is in neither place for a moment:
		 * here (the claim), or on another node (the view catches up). */
		if (rc == -ENOENT && c.kind == CKFS_DIR_SERIES && c.series &&
		    (ck_staging_wait_unclaimed(fs->staging, c.series, name) ||
		     ck_writer_moved_elsewhere(fs->writer, c.series, name))) {
			ckfs_dir_ctx_free(&c);
			rc = ckfs_dir_ctx(fs, parent, &c);
			if (rc == 0)
				rc = lookup_in(fs, parent, &c, name, &e);
		}
	}
	ckfs_dir_ctx_free(&c);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

void ckfs_rw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_dir_ctx c;
	struct fuse_entry_param e;
	struct ck_owner dir_owner;
	struct ck_staged_at at = { -1, NULL };
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc == 0 && ckfs_dir_in_view(fs, &c, name))
		rc = -EEXIST;
	if (rc == 0 && c.kind == CKFS_DIR_STAGED && ck_staging_busy(fs->staging, c.staged))
		rc = -EBUSY;	/* being committed */
	if (rc == 0)
		rc = ckfs_dir_owner(fs, &c, &dir_owner);
	if (rc == 0 && c.kind == CKFS_DIR_STAGED) {
		rc = ckfs_child_at(fs, &c, name, &at);
		if (rc == 0 && mkdirat(at.dir, at.name, mode) != 0)
			rc = -errno;
	} else if (rc == 0 && c.kind == CKFS_DIR_ROOT) {
		rc = ck_staging_mkdir(fs->staging, name, NULL, mode);	/* a new series */
	} else if (rc == 0 && c.kind == CKFS_DIR_SERIES) {
		/* The first in-progress directory of a committed series makes
		 * its STORE/staging/<series>, which shows as the series does. */
		rc = ck_staging_series_dir(fs->staging, c.series, c.view_dir ? &dir_owner : NULL);
		if (rc == 0)
			rc = ck_staging_mkdir(fs->staging, c.series, name, mode);
	} else if (rc == 0) {
		rc = -EROFS;
	}
	if (rc == 0 && at.dir < 0)
		rc = ckfs_child_at(fs, &c, name, &at);
	if (rc == 0) {
		/* Made as root: whoever asked gets it, as a local mkdir gives it. */
		struct ckfs_cred cred;
		int given;

		ckfs_cred_get(req, &cred);
		given = ck_staging_give(&at, -1, &dir_owner, &cred.c, mode, 1);
		ckfs_cred_put(&cred);
		if (given < 0)
			ck_warn("%s: cannot give it to its creator: %s", name, strerror(-given));
		rc = staged_entry(fs, &c, name, &e);
	}
	ck_staging_at_free(&at);
	ckfs_dir_ctx_free(&c);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int is_dir)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_dir_ctx c;
	struct ck_staged_at at = { -1, NULL };
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc == 0 && ckfs_dir_in_view(fs, &c, name)) {
		ckfs_delete_name(req, fs, &c, parent, name, is_dir);	/* rm -r of a checkpoint */
		ckfs_dir_ctx_free(&c);
		return;
	}
	if (rc == 0 && !is_dir && c.kind != CKFS_DIR_STAGED &&
	    !(c.kind == CKFS_DIR_SERIES && ck_rule_series_marker(name)))
		rc = -EROFS;
	if (rc == 0 && c.kind == CKFS_DIR_STAGED && ck_staging_busy(fs->staging, c.staged))
		rc = -EBUSY;	/* being committed */
	if (rc == 0)
		rc = ckfs_child_at(fs, &c, name, &at);
	if (rc == 0 && unlinkat(at.dir, at.name, is_dir ? AT_REMOVEDIR : 0) != 0)
		rc = -errno;
	if (rc == 0) {
		if (c.kind == CKFS_DIR_ROOT)
			ck_staging_removed(fs->staging, 0, name, NULL);
		else if (c.kind == CKFS_DIR_SERIES)
			ck_staging_removed(fs->staging, 0, c.series, name);
		else
			ck_staging_removed(fs->staging, c.staged, NULL, name);
	}
	ck_staging_at_free(&at);
	ckfs_dir_ctx_free(&c);
	fuse_reply_err(req, -rc);
}

void ckfs_rw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 0);
}

void ckfs_rw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 1);
}

void ckfs_commit_and_reply(fuse_req_t req, struct ckfs *fs, fuse_ino_t dir, const char *series,
			   const char *name, const char *final)
{
	int rc = ck_writer_commit_now(fs->writer, series, name, final);

	fuse_reply_err(req, -rc);
	ckfs_inval_commit_names(fs, dir, name, final);
}

void ckfs_rw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_dir_ctx a, b;
	struct ck_staged_at from = { -1, NULL }, to = { -1, NULL };
	char *to_path = NULL;
	int rc = ckfs_dir_ctx(fs, parent, &a);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = ckfs_dir_ctx(fs, newparent, &b);
	if (rc) {
		ckfs_dir_ctx_free(&a);
		fuse_reply_err(req, -rc);
		return;
	}
	if (ckfs_dir_in_view(fs, &a, name) || a.kind == CKFS_DIR_VIEW || b.kind == CKFS_DIR_VIEW)
		rc = -EROFS;
	else if (ckfs_dir_in_view(fs, &b, newname))
		rc = -EEXIST;	/* a committed checkpoint is never replaced */
	else if (a.kind != b.kind || a.kind == CKFS_DIR_ROOT ||
		 (a.kind == CKFS_DIR_SERIES && strcmp(a.series, b.series) != 0))
		rc = -EXDEV;
	else if (a.kind == CKFS_DIR_SERIES && ck_writer_is_commit_rename(fs->writer, a.series, name, newname))
		rc = flags & ~RENAME_NOREPLACE ? -EINVAL : 1;	/* a commit never replaces */
	else if (a.kind == CKFS_DIR_STAGED &&
		 (ck_staging_busy(fs->staging, a.staged) || ck_staging_busy(fs->staging, b.staged)))
		rc = -EBUSY;	/* being committed */
	if (rc == 1) {
		ckfs_commit_and_reply(req, fs, parent, a.series, name, newname);
		goto out;
	}
	if (rc == 0)
		rc = ckfs_child_at(fs, &a, name, &from);
	if (rc == 0)
		rc = ckfs_child_at(fs, &b, newname, &to);
	/* A file with other names stays in their checkpoint: each commit
	 * takes its own files, never one another's. */
	if (rc == 0 && a.kind == CKFS_DIR_STAGED && !ck_staging_same_top(fs->staging, a.staged, b.staged)) {
		struct stat st;

		if (fstatat(from.dir, from.name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    st.st_nlink > 1)
			rc = -EXDEV;
	}
	if (rc == 0 && renameat2(from.dir, from.name, to.dir, to.name, flags) != 0)
		rc = -errno;
	if (rc == 0)
		ck_staging_moved(fs->staging, a.kind == CKFS_DIR_STAGED ? a.staged : 0, a.series, name,
				 b.kind == CKFS_DIR_STAGED ? b.staged : 0, newname, (flags & RENAME_EXCHANGE) != 0);
	if (rc == 0 && b.kind == CKFS_DIR_STAGED)
		ck_staging_path(fs->staging, b.staged, newname, &to_path);
	else if (rc == 0)
		to_path = ck_staging_top_path(fs->staging, b.series, newname);
	fuse_reply_err(req, -rc);
	/* DCP's .metadata.tmp -> .metadata: the marker lands by rename. */
	if (to_path)
		ck_writer_marker_check(fs->writer, to_path);
out:
	ck_staging_at_free(&from);
	ck_staging_at_free(&to);
	free(to_path);
	ckfs_dir_ctx_free(&a);
	ckfs_dir_ctx_free(&b);
}

/* Where a new non-directory name may go: inside an in-progress directory
 * (the caller checks the kind of node), or a series marker right in a
 * series directory.  Elsewhere a checkpoint's files cannot be: EPERM
 * (EROFS in a committed checkpoint, which is read-only).  0 or -errno,
 * with at and the directory's owner. */
static int new_name_at(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name, int marker_ok,
		       struct ck_staged_at *at, struct ck_owner *dir_owner)
{
	int rc = 0;

	if (ckfs_dir_in_view(fs, c, name))
		rc = -EEXIST;
	else if (c->kind == CKFS_DIR_VIEW)
		rc = -EROFS;
	else if (c->kind == CKFS_DIR_STAGED)
		rc = ck_staging_busy(fs->staging, c->staged) ? -EBUSY : 0;   /* being committed */
	else if (!(marker_ok && c->kind == CKFS_DIR_SERIES && ck_rule_series_marker(name)))
		rc = -EPERM;
	if (rc == 0)
		rc = ckfs_dir_owner(fs, c, dir_owner);
	if (rc == 0)
		rc = ckfs_child_at(fs, c, name, at);
	return rc;
}

/* Answers a request that made name in the directory of c: its entry, or
 * the error. */
static void reply_new_entry(fuse_req_t req, struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name,
			    int rc)
{
	struct fuse_entry_param e;

	if (rc == 0)
		rc = staged_entry(fs, c, name, &e);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

/* Makes a new entry at at for caller c, in a directory of owner dir. */
typedef int (*make_fn)(const struct ck_staged_at *at, const void *arg, const struct ck_owner *dir,
		       const struct ck_cred *c);

/* A new non-directory entry name in parent, made by make, answered with
 * its entry; refused first with refuse when it is not 0. */
static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int marker_ok, int refuse, make_fn make,
		       const void *arg)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_staged_at at = { -1, NULL };
	struct ck_owner dir_owner;
	struct ckfs_dir_ctx c;
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc == 0 && refuse)
		rc = c.kind == CKFS_DIR_VIEW ? -EROFS : refuse;
	if (rc == 0)
		rc = new_name_at(fs, &c, name, marker_ok, &at, &dir_owner);
	if (rc == 0 && c.kind == CKFS_DIR_SERIES)
		ck_staging_series_dir(fs->staging, c.series, c.view_dir ? &dir_owner : NULL);
	if (rc == 0) {
		struct ckfs_cred cred;

		ckfs_cred_get(req, &cred);
		rc = make(&at, arg, &dir_owner, &cred.c);
		ckfs_cred_put(&cred);
	}
	ck_staging_at_free(&at);
	reply_new_entry(req, fs, &c, name, rc);
	ckfs_dir_ctx_free(&c);
}

static int make_symlink(const struct ck_staged_at *at, const void *target, const struct ck_owner *dir,
			const struct ck_cred *c)
{
	return ck_staged_symlink(at, target, dir, c);
}

static int make_node(const struct ck_staged_at *at, const void *mode, const struct ck_owner *dir,
		     const struct ck_cred *c)
{
	return ck_staged_mknod(at, *(const mode_t *)mode, dir, c);
}

void ckfs_rw_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	make_entry(req, parent, name, 0, 0, make_symlink, target);
}

void ckfs_rw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)rdev;
	/* Fifos, devices and sockets are not checkpoint data. */
	make_entry(req, parent, name, 1, S_ISREG(mode) ? 0 : -EPERM, make_node, &mode);
}

void ckfs_rw_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_staged_at at = { -1, NULL };
	struct fuse_entry_param e;
	struct ck_owner dir_owner;
	struct ckfs_dir_ctx c;
	int rc = ckfs_dir_ctx(fs, newparent, &c);

	if (rc == 0)
		rc = new_name_at(fs, &c, newname, 0, &at, &dir_owner);
	/* One file in two checkpoints would let a write to the one still in
	 * progress change the other once committed. */
	if (rc == 0 && (!ck_staging_is_staged(ino) || !ck_staging_same_top(fs->staging, ino, c.staged)))
		rc = -EXDEV;
	if (rc == 0)
		rc = ck_staged_link(fs->staging, ino, &at);
	if (rc == 0)
		rc = ck_staging_linked(fs->staging, ino, c.staged, newname);
	if (rc == 0) {
		memset(&e, 0, sizeof(e));
		rc = ck_staged_stat(fs->staging, ino, &e.attr);
		e.ino = ino;
		e.attr.st_ino = ino;
		e.generation = 1;
	}
	ck_staging_at_free(&at);
	ckfs_dir_ctx_free(&c);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}
