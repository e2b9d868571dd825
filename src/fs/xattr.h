/* Extended attributes of committed nodes (xattr.c): the view's
 * provenance, step and kind, and user.ckptfs.io.  Each answers its request
 * before it returns. */
#ifndef CKPTFS_FS_XATTR_H
#define CKPTFS_FS_XATTR_H

#include <stddef.h>

#include "lowlevel.h"

void ckfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ckfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);

#endif
