/* Deleting committed checkpoints through a writable mount (delete.h).
 *
 * The deletion runs in a forked child, as a commit does (commit.c): the
 * view holds the store's LMDB environment open read-only, and LMDB must
 * not be opened twice in one process; the child opens the store, then a
 * view of its own to tell what newer composites still draw from, one
 * after the other.  The parent then hides the directory at once and lets
 * the view follow the store (ck_view_refresh).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs/refs.h"
#include "delete.h"

void ckfs_log_delete(const char *series, const char *name, int rc, const struct ck_error *err)
{
	if (rc < 0)
		ck_warn("%s/%s: cannot delete: %s", series, name, err->msg[0] ? err->msg : strerror(-rc));
	else
		ck_info("%s/%s: deleted", series, name);
}

static int delete_in_child(struct ckfs *fs, const char *series, const char *name)
{
	struct ck_error err = { { 0 } };
	int status, rc;
	pid_t pid;

	pid = CKFS_CHILD_EXECS ? ckfs_spawn_helper(fs, "--delete-helper", series, name, NULL) : ckfs_fork(fs);
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		rc = ck_delete_checkpoint(fs->cfg->store, series, name, NULL, NULL, NULL, NULL, NULL, &err);
		ckfs_log_delete(series, name, rc, &err);
		/* _exit: the child must not run the parent's atexit work. */
		_exit(rc < 0 && -rc < 256 ? -rc : rc ? EIO : 0);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (!WIFEXITED(status))
		return -EIO;   /* killed: the next writable open rolls the deletion forward */
	return -WEXITSTATUS(status);
}

void ckfs_delete_name(fuse_req_t req, struct ckfs *fs, const struct ckfs_dir_ctx *c, fuse_ino_t parent,
		      const char *name, int is_dir)
{
	const struct ck_vnode *n, *child;
	int rc, first;

	(void)parent;
	if (c->kind == CKFS_DIR_ROOT) {
		fuse_reply_err(req, EROFS);   /* a series goes with its last checkpoint, not by rmdir */
		return;
	}
	rc = ck_view_lookup(fs->view, c->view_dir, name, &n);
	/* Its first visible child: -ENOTDIR for a file, -ENOENT when empty. */
	first = rc ? rc : ck_view_child(fs->view, n, 0, &child);
	if (rc == 0 && is_dir != (first != -ENOTDIR))
		rc = is_dir ? -ENOTDIR : -EISDIR;
	if (rc == 0 && is_dir && first == 0)
		rc = -ENOTEMPTY;
	if (rc == 0 && c->kind != CKFS_DIR_SERIES) {
		/* Inside a checkpoint: this mount stops showing the name. */
		rc = ck_view_hide(fs->view, n);
		fuse_reply_err(req, -rc);
		return;
	}
	if (rc == 0)
		rc = delete_in_child(fs, c->series, name);
	if (rc == 0) {
		rc = ck_view_hide(fs->view, n);
		if (rc == -ENOENT)
			rc = 0;   /* a refresh hid it first */
	}
	fuse_reply_err(req, -rc);
	/* After the reply: the kernel holds the directory's lock until then. */
	if (rc == 0) {
		ckfs_after_commit(fs, 0, NULL, NULL);
		ckfs_forget_hidden(fs->view, fs->se, fs->root_ino);
	}
}
