/* Name operations of a writable mount (names.c): lookup, mkdir, unlink,
 * rmdir and rename where the in-progress space meets the view, with the
 * rename commits.  Each answers its request before it returns. */
#ifndef CKPTFS_FS_NAMES_H
#define CKPTFS_FS_NAMES_H

#include <sys/types.h>

#include "lowlevel.h"
#include "mount.h"

void ckfs_rw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ckfs_rw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname, unsigned int flags);
/* symlink, mknod (regular files only: EPERM for what a checkpoint cannot
 * hold) and link, inside in-progress directories. */
void ckfs_rw_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void ckfs_rw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ckfs_rw_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
/* Commits top directory name of series as final (ck_writer_commit_now),
 * answers req (0 or -errno), then tells the kernel the names changed in
 * dir, the series directory's node.  For a rename or setxattr commit. */
void ckfs_commit_and_reply(fuse_req_t req, struct ckfs *fs, fuse_ino_t dir, const char *series,
			   const char *name, const char *final);

#endif
