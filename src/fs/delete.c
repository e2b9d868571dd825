/* Deleting committed checkpoints through a writable mount (delete.h).
 *
 * The deletion runs in a child process, as a commit does
 * (ck_writer_delete): the view holds the store's LMDB environment open
 * read-only, and LMDB must not be opened twice in one process; the child
 * opens the store, then a view of its own to tell what newer composites
 * still draw from, one after the other.  The daemon then hides the
 * directory at once and lets the view follow the store.
 */
#include "config.h"

#include <errno.h>

#include "ckptfs/writer.h"
#include "delete.h"
#include "nodes.h"
#include "notify.h"
#include "passthrough.h"

void ckfs_delete_name(fuse_req_t req, struct ckfs *fs, const struct ckfs_dir_ctx *c, fuse_ino_t parent,
		      const char *name, int is_dir)
{
	const struct ck_vnode *n, *child;
	struct ck_vattr a;
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
		/* Inside a checkpoint: this mount stops showing the name, and
		 * the kernel may let go of the file it read it from. */
		int known = !is_dir && ck_view_getattr(fs->view, n, &a) == 0;

		rc = ck_view_hide(fs->view, n);
		fuse_reply_err(req, -rc);
		if (rc == 0 && known)
			ckfs_passthrough_release(fs, ckfs_fuse_ino(fs, a.ino));
		return;
	}
	if (rc == 0)
		rc = ck_writer_delete(fs->writer, c->series, name);
	if (rc == 0) {
		rc = ck_view_hide(fs->view, n);
		if (rc == -ENOENT)
			rc = 0;   /* a refresh hid it first */
	}
	fuse_reply_err(req, -rc);
	/* After the reply: the kernel holds the directory's lock until then. */
	if (rc == 0) {
		ck_writer_catch_up(fs->writer);
		ckfs_forget_hidden(fs);
	}
}
