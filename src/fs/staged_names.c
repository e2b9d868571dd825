/* Names in a writable mount: lookup, listing, mkdir, unlink, rmdir and
 * rename where the in-progress space meets the view, and the commit rules.
 *
 *   /                  series: the view's, then STORE/staging/<series>/
 *                      of series with no committed checkpoint yet
 *   /<series>/         committed checkpoints (view), then in-progress
 *                      directories STORE/staging/<series>/<dir>/
 *   in-progress dirs   passthrough to the real files and directories
 *
 * Commit rules: renaming an in-progress directory to a name that carries
 * a step when its own name has none or is temporary ("tmp*", ".*",
 * "*.tmp"), or setting user.ckptfs.commit on it.  The rename (or setxattr)
 * is answered only after the commit: EIO when the directory was
 * quarantined.  Completion markers (markers.c) and idle time (idle.c)
 * commit too; while a commit runs, changes inside the directory get EBUSY.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs.h"
#include "ckptfs/store.h"
#include "delete.h"
#include "staged.h"

/* The series name of a view directory right under the root, or NULL. */
static const char *view_series(struct ckfs *fs, const struct ck_vnode *n)
{
	return ck_vnode_is_series_dir(fs->view, n) ? ck_vnode_name(n) : NULL;
}

int ckfs_dir_ctx(struct ckfs *fs, fuse_ino_t ino, struct ckfs_dir_ctx *c)
{
	const struct ck_vnode *n, *root = ck_view_root(fs->view);
	const char *series;
	int rc;

	memset(c, 0, sizeof(*c));
	if (ckfs_is_staged(ino)) {
		rc = ckfs_staging_series(fs->staging, ino, &c->series);
		if (rc == -ENOMEM)
			return rc;
		c->kind = rc == 0 ? CKFS_DIR_SERIES : CKFS_DIR_STAGED;
		c->staged = ino;
		/* A new series gets its view directory with its first commit. */
		if (c->kind == CKFS_DIR_SERIES && ck_view_lookup(fs->view, root, c->series, &n) == 0)
			c->view_dir = n;
		return 0;
	}
	n = ckfs_node(fs, ino);
	if (!n)
		return -ESTALE;
	c->view_dir = n;
	if (ino == FUSE_ROOT_ID) {
		c->kind = CKFS_DIR_ROOT;
		return 0;
	}
	series = view_series(fs, n);
	if (!series) {
		c->kind = CKFS_DIR_VIEW;
		return 0;
	}
	c->kind = CKFS_DIR_SERIES;
	/* A series reloaded by a refresh: the kernel may still hold its old
	 * directory for a moment; its committed entries are the new one's. */
	if (ck_view_lookup(fs->view, root, series, &n) == 0)
		c->view_dir = n;
	c->series = strdup(series);
	return c->series ? 0 : -ENOMEM;
}

void ckfs_dir_ctx_free(struct ckfs_dir_ctx *c)
{
	free(c->series);
	c->series = NULL;
}

/* Whether the view has name in the directory of c. */
static int in_view(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name)
{
	const struct ck_vnode *n;

	return c->view_dir && ck_view_lookup(fs->view, c->view_dir, name, &n) == 0;
}

int ckfs_child_path(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name, char **path)
{
	switch (c->kind) {
	case CKFS_DIR_ROOT:
		*path = ckfs_staging_top_path(fs->staging, name, NULL);
		break;
	case CKFS_DIR_SERIES:
		*path = ckfs_staging_top_path(fs->staging, c->series, name);
		break;
	case CKFS_DIR_STAGED:
		return ckfs_staging_path(fs->staging, c->staged, name, path);
	default:
		return -EROFS;
	}
	return *path ? 0 : -ENOMEM;
}

/* Registers the child name of c (it exists) and fills its entry. */
static int staged_entry(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name,
			struct fuse_entry_param *e)
{
	char *path;
	uint64_t ino;
	int rc = ckfs_child_path(fs, c, name, &path);

	if (rc)
		return rc;
	memset(e, 0, sizeof(*e));
	if (lstat(path, &e->attr) != 0)
		rc = -errno;
	free(path);
	if (rc)
		return rc;
	if (c->kind == CKFS_DIR_ROOT)
		rc = ckfs_staging_get(fs->staging, 0, name, NULL, &ino);
	else if (c->kind == CKFS_DIR_SERIES)
		rc = ckfs_staging_get(fs->staging, 0, c->series, name, &ino);
	else
		rc = ckfs_staging_get(fs->staging, c->staged, NULL, name, &ino);
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
			rc = ckfs_view_entry(fs, ckfs_is_staged(parent) ? a.ino : parent, name, e);
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
		/* A checkpoint being committed is in neither place for a moment. */
		if (rc == -ENOENT && c.kind == CKFS_DIR_SERIES && c.series &&
		    ckfs_staging_wait_unclaimed(fs->staging, c.series, name)) {
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

/* Appends a copy of name to *v (n entries): 0 or -ENOMEM. */
static int strv_add(char ***v, size_t *n, const char *name)
{
	char **grown = realloc(*v, (*n + 1) * sizeof(**v));

	if (!grown)
		return -ENOMEM;
	*v = grown;
	grown[*n] = strdup(name);
	if (!grown[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int strv_has(char **v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return 1;
	return 0;
}

/* Whether dir (the view's; NULL: none yet) lists name. */
static int listed(struct ckfs *fs, const struct ck_vnode *dir, const char *name)
{
	const struct ck_vnode *n;

	return dir && ck_view_lookup(fs->view, dir, name, &n) == 0;
}

int ckfs_staged_names(struct ckfs *fs, const struct ck_vnode *dir, char ***names, size_t *n)
{
	const struct ck_vnode *root = ck_view_root(fs->view);
	const char *series = dir == root ? NULL : view_series(fs, dir);

	*names = NULL;
	*n = 0;
	if (dir != root && !series)
		return 0;
	return ckfs_staged_names_of(fs, series, dir, names, n);
}

int ckfs_staged_names_of(struct ckfs *fs, const char *series, const struct ck_vnode *dir, char ***names,
			 size_t *n)
{
	char **claimed = NULL, *path;
	size_t nclaimed = 0;
	struct dirent *d;
	DIR *dd;
	int rc = 0;

	*names = NULL;
	*n = 0;
	path = ckfs_staging_top_path(fs->staging, series ? series : "", NULL);
	if (!path)
		return -ENOMEM;
	dd = opendir(path);
	free(path);
	while (dd && rc == 0 && (d = readdir(dd)) != NULL) {
		struct stat st;
		int is_dir = d->d_type == DT_DIR;

		/* Some filesystems leave d_type unknown. */
		if (d->d_type == DT_UNKNOWN)
			is_dir = fstatat(dirfd(dd), d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(st.st_mode);
		if (is_dir && d->d_name[0] != '.' && !listed(fs, dir, d->d_name))
			rc = strv_add(names, n, d->d_name);
	}
	if (dd)
		closedir(dd);
	/* Read after the directory: one whose commit moved it out since is
	 * claimed until the view shows it (under its committed name). */
	if (rc == 0 && series)
		rc = ckfs_staging_claimed(fs->staging, series, &claimed, &nclaimed);
	for (size_t i = 0; rc == 0 && i < nclaimed; i++)
		if (!strv_has(*names, *n, claimed[i]) && !listed(fs, dir, claimed[i]))
			rc = strv_add(names, n, claimed[i]);
	ck_strv_free(claimed, nclaimed);
	if (rc) {
		ck_strv_free(*names, *n);
		*names = NULL;
		*n = 0;
	}
	return rc;
}

/* Creates a directory and its missing parent, tolerating both existing. */
static int mkdir_parent_too(const char *path, mode_t mode)
{
	char *slash, *parent = strdup(path);
	int rc = 0;

	if (!parent)
		return -ENOMEM;
	slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		if (mkdir(parent, 0755) != 0 && errno == ENOENT) {
			/* STORE/staging itself is missing too */
			char *up = strrchr(parent, '/');

			if (up) {
				*up = '\0';
				mkdir(parent, 0755);
				*up = '/';
			}
			mkdir(parent, 0755);
		}
	}
	free(parent);
	if (mkdir(path, mode) != 0)
		rc = -errno;
	return rc;
}

void ckfs_rw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_dir_ctx c;
	struct fuse_entry_param e;
	struct ck_owner dir_owner;
	struct stat st;
	char *path = NULL, *series_dir = NULL;
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc == 0 && in_view(fs, &c, name))
		rc = -EEXIST;
	if (rc == 0 && c.kind == CKFS_DIR_STAGED && ckfs_staging_busy(fs->staging, c.staged))
		rc = -EBUSY;	/* being committed */
	if (rc == 0)
		rc = ckfs_dir_owner(fs, &c, &dir_owner);
	if (rc == 0)
		rc = ckfs_child_path(fs, &c, name, &path);
	/* The first in-progress directory of a committed series makes its
	 * STORE/staging/<series>, which then shows as the series does. */
	if (rc == 0 && c.kind == CKFS_DIR_SERIES && c.view_dir) {
		series_dir = ckfs_staging_top_path(fs->staging, c.series, NULL);
		if (series_dir && lstat(series_dir, &st) == 0) {
			free(series_dir);
			series_dir = NULL;
		}
	}
	if (rc == 0)
		rc = c.kind == CKFS_DIR_STAGED ? (mkdir(path, mode) ? -errno : 0) :
		     mkdir_parent_too(path, mode);
	if (rc == 0 && series_dir)
		ckfs_mirror_series(fs, c.view_dir, series_dir);
	if (rc == 0)
		ckfs_give_new(req, &dir_owner, path, -1, mode, 1);
	free(series_dir);
	if (rc == 0)
		rc = staged_entry(fs, &c, name, &e);
	free(path);
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
	char *path = NULL;
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc == 0 && in_view(fs, &c, name)) {
		ckfs_delete_name(req, fs, &c, parent, name, is_dir);	/* rm -r of a checkpoint */
		ckfs_dir_ctx_free(&c);
		return;
	}
	if (rc == 0 && !is_dir && c.kind != CKFS_DIR_STAGED &&
	    !(c.kind == CKFS_DIR_SERIES && ckfs_is_series_marker(name)))
		rc = -EROFS;
	if (rc == 0 && c.kind == CKFS_DIR_STAGED && ckfs_staging_busy(fs->staging, c.staged))
		rc = -EBUSY;	/* being committed */
	if (rc == 0)
		rc = ckfs_child_path(fs, &c, name, &path);
	if (rc == 0 && (is_dir ? rmdir(path) : unlink(path)) != 0)
		rc = -errno;
	if (rc == 0) {
		if (c.kind == CKFS_DIR_ROOT)
			ckfs_staging_removed(fs->staging, 0, name, NULL);
		else if (c.kind == CKFS_DIR_SERIES)
			ckfs_staging_removed(fs->staging, 0, c.series, name);
		else
			ckfs_staging_removed(fs->staging, c.staged, NULL, name);
	}
	free(path);
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

/* "tmp-checkpoint-20", ".checkpoint-20", "checkpoint-20.tmp" */
static int is_temp_name(const char *name)
{
	size_t len = strlen(name);

	return strncmp(name, "tmp", 3) == 0 || name[0] == '.' ||
	       (len > 4 && strcmp(name + len - 4, ".tmp") == 0);
}

static int is_commit_rename(struct ckfs *fs, const char *series, const char *from, const char *to)
{
	int64_t step;

	if (ckfs_step_of(fs, series, to, &step) != 0)
		return 0;
	return is_temp_name(from) || ckfs_step_of(fs, series, from, &step) != 0;
}

/* Commits top directory name of series (c) as final and answers req once
 * the view caught up (see ckfs_view_catch_up).  A rename commit does not
 * wait for closes (the kernel may still be releasing the last file). */
void ckfs_commit_and_reply(fuse_req_t req, struct ckfs *fs, fuse_ino_t dir, const char *series,
			   const char *name, const char *final)
{
	struct stat st;
	char *path = ckfs_staging_top_path(fs->staging, series, name);
	int rc = ckfs_staging_claim(fs->staging, series, name, 0);

	if (rc == 0) {
		rc = ckfs_commit(fs, series, name, final);
		ckfs_staging_unclaim(fs->staging, series, name);
	}
	/* Committed or quarantined, the directory left the staging area. */
	if (path && lstat(path, &st) != 0 && errno == ENOENT)
		ckfs_staging_removed(fs->staging, 0, series, name);
	free(path);
	ckfs_view_catch_up(fs);
	fuse_reply_err(req, -rc);
	ckfs_inval_commit_names(fs, dir, name, final);
}

void ckfs_rw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_dir_ctx a, b;
	char *from = NULL, *to = NULL;
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
	if (in_view(fs, &a, name) || a.kind == CKFS_DIR_VIEW || b.kind == CKFS_DIR_VIEW)
		rc = -EROFS;
	else if (in_view(fs, &b, newname))
		rc = -EEXIST;	/* a committed checkpoint is never replaced */
	else if (a.kind != b.kind || a.kind == CKFS_DIR_ROOT ||
		 (a.kind == CKFS_DIR_SERIES && strcmp(a.series, b.series) != 0))
		rc = -EXDEV;
	else if (a.kind == CKFS_DIR_SERIES && is_commit_rename(fs, a.series, name, newname))
		rc = flags & ~RENAME_NOREPLACE ? -EINVAL : 1;	/* a commit never replaces */
	else if (a.kind == CKFS_DIR_STAGED &&
		 (ckfs_staging_busy(fs->staging, a.staged) || ckfs_staging_busy(fs->staging, b.staged)))
		rc = -EBUSY;	/* being committed */
	if (rc == 1) {
		ckfs_commit_and_reply(req, fs, parent, a.series, name, newname);
		goto out;
	}
	if (rc == 0)
		rc = ckfs_child_path(fs, &a, name, &from);
	if (rc == 0)
		rc = ckfs_child_path(fs, &b, newname, &to);
	if (rc == 0 && renameat2(AT_FDCWD, from, AT_FDCWD, to, flags) != 0)
		rc = -errno;
	if (rc == 0)
		ckfs_staging_moved(fs->staging, a.kind == CKFS_DIR_STAGED ? a.staged : 0, a.series, name,
				   b.kind == CKFS_DIR_STAGED ? b.staged : 0, newname);
	fuse_reply_err(req, -rc);
	/* DCP's .metadata.tmp -> .metadata: the marker lands by rename. */
	if (rc == 0 && to)
		ckfs_marker_check(fs, to);
out:
	free(from);
	free(to);
	ckfs_dir_ctx_free(&a);
	ckfs_dir_ctx_free(&b);
}
