/* The FUSE low-level operation table of ckptfs. */
#include "config.h"

#include "ops.h"
#include "read.h"
#include "readonly.h"
#include "tables.h"
#include "xattr.h"

const struct fuse_lowlevel_ops ckfs_ops = {
	.init = ckfs_op_init,
	.lookup = ckfs_op_lookup,
	.forget = ckfs_op_forget,
	.forget_multi = ckfs_op_forget_multi,
	.getattr = ckfs_op_getattr,
	.opendir = ckfs_op_opendir,
	.readdir = ckfs_op_readdir,
	.readdirplus = ckfs_op_readdirplus,
	.releasedir = ckfs_op_releasedir,
	.statfs = ckfs_op_statfs,
	.access = ckfs_op_access,
	.readlink = ckfs_op_readlink,
	.open = ckfs_op_open,
	.read = ckfs_op_read,
	.release = ckfs_op_release,
	.getxattr = ckfs_op_getxattr,
	.listxattr = ckfs_op_listxattr,

	.setattr = ckfs_rofs_setattr,
	.mknod = ckfs_rofs_mknod,
	.mkdir = ckfs_rofs_mkdir,
	.unlink = ckfs_rofs_remove,
	.rmdir = ckfs_rofs_remove,
	.symlink = ckfs_rofs_symlink,
	.rename = ckfs_rofs_rename,
	.link = ckfs_rofs_link,
	.write = ckfs_rofs_write,
	.create = ckfs_rofs_create,
	.setxattr = ckfs_rofs_setxattr,
	.removexattr = ckfs_rofs_removexattr,
	.fallocate = ckfs_rofs_fallocate,
	.copy_file_range = ckfs_rofs_copy_file_range,
};
