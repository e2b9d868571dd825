/* rm -r of a committed checkpoint through a writable mount (delete.c).
 *
 * The kernel unlinks every file of a tree before it removes the
 * directories.  Inside a committed checkpoint an unlink (or the rmdir of
 * an emptied subdirectory) only hides the name in this mount, in memory:
 * a restart of the daemon shows it again, the checkpoint intact.  The
 * rmdir of the checkpoint directory itself, once nothing in it is
 * visible, deletes the checkpoint in the store (include/ckptfs/refs.h),
 * as does the unlink of a single-file checkpoint (model_000500.pt).
 */
#ifndef CKPTFS_FS_DELETE_H
#define CKPTFS_FS_DELETE_H

#include "dirs.h"
#include "lowlevel.h"
#include "mount.h"

/* unlink (is_dir 0) or rmdir (1) of name, which the view has in directory
 * c (parent: its FUSE inode).  Answers req: 0, -ENOTEMPTY, -EISDIR,
 * -ENOTDIR, -EROFS (a series directory), or the store's -errno. */
void ckfs_delete_name(fuse_req_t req, struct ckfs *fs, const struct ckfs_dir_ctx *c, fuse_ino_t parent,
		      const char *name, int is_dir);

#endif
