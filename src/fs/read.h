/* The read path of committed files (read.c): open a composite, answer
 * each read from the extents the view maps it to, release.  Each answers
 * its request before it returns. */
#ifndef CKPTFS_FS_READ_H
#define CKPTFS_FS_READ_H

#include <stddef.h>
#include <sys/types.h>

#include "ckptfs/view.h"
#include "lowlevel.h"

void ckfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* For the opens of other read-only files (the control directory's):
 * whether fi asks to write or truncate, which is then answered EROFS; the
 * handle made f (whose reference it takes), as every answer to the open,
 * passthrough's too, must carry it; and the answer to that open through
 * the daemon, with the page cache kept across opens or, with direct_io,
 * bypassed (f's reference given back if the open was interrupted). */
int ckfs_refuse_write_open(fuse_req_t req, const struct fuse_file_info *fi);
void ckfs_hold_vfile(struct fuse_file_info *fi, struct ck_vfile *f);
void ckfs_reply_open_vfile(fuse_req_t req, struct fuse_file_info *fi, struct ck_vfile *f, int direct_io);
void ckfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void ckfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

#endif
