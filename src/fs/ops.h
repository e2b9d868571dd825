/* The namespace's request handlers (ops.c), which both operation tables
 * use: connection setup, lookup, attributes, directory handles, statfs
 * and access, all on the view's nodes.  Each answers its request (a reply
 * or an error) before it returns. */
#ifndef CKPTFS_FS_OPS_H
#define CKPTFS_FS_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lowlevel.h"

void ckfs_op_init(void *userdata, struct fuse_conn_info *conn);
void ckfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ckfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void ckfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void ckfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi);
void ckfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void ckfs_op_access(fuse_req_t req, fuse_ino_t ino, int mask);
void ckfs_op_readlink(fuse_req_t req, fuse_ino_t ino);

#endif
