/* Write-type requests answered EROFS (readonly.c): the whole read-only
 * table, and what the writable one does not support. */
#ifndef CKPTFS_FS_READONLY_H
#define CKPTFS_FS_READONLY_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lowlevel.h"

void ckfs_rofs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi);
void ckfs_rofs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ckfs_rofs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ckfs_rofs_remove(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rofs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void ckfs_rofs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags);
void ckfs_rofs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void ckfs_rofs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi);
void ckfs_rofs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi);
void ckfs_rofs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags);
void ckfs_rofs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void ckfs_rofs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi);
void ckfs_rofs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags);

#endif
