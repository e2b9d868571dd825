/* The read path of committed files (read.c): open a composite, answer
 * each read from the extents the view maps it to, release.  Each answers
 * its request before it returns. */
#ifndef CKPTFS_FS_READ_H
#define CKPTFS_FS_READ_H

#include <stddef.h>
#include <sys/types.h>

#include "lowlevel.h"

void ckfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void ckfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

#endif
