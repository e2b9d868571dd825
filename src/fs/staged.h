/* Shared by the writable mount's operations (staged_names.c, write.c). */
#ifndef CKPTFS_FS_STAGED_H
#define CKPTFS_FS_STAGED_H

#include "ckptfs.h"

/* What a directory is, for operations on its names. */
enum ckfs_dir_kind {
	CKFS_DIR_ROOT,     /* series: the view's, then new ones in staging */
	CKFS_DIR_SERIES,   /* a series: committed checkpoints, then in-progress dirs */
	CKFS_DIR_STAGED,   /* inside an in-progress directory: passthrough */
	CKFS_DIR_VIEW,     /* inside a committed checkpoint: read-only */
};

struct ckfs_dir_ctx {
	enum ckfs_dir_kind kind;
	char *series;                    /* CKFS_DIR_SERIES */
	uint64_t staged;                 /* the staged node, if the directory is one */
	const struct ck_vnode *view_dir; /* the view's directory, if any */
};

int ckfs_dir_ctx(struct ckfs *fs, fuse_ino_t ino, struct ckfs_dir_ctx *c);
void ckfs_dir_ctx_free(struct ckfs_dir_ctx *c);
/* The real path of the child name of c: 0, -EROFS in the view, -ENOMEM. */
int ckfs_child_path(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name, char **path);
/* The series directory's FUSE inode (for invalidations), or 0 when the
 * series has none in the view yet (write.c). */
fuse_ino_t ckfs_series_dir_ino(struct ckfs *fs, const char *series);
/* Commits series/name as final, answers req (0 or -errno), then lets the
 * view and the kernel (dir: the series directory) catch up. */
void ckfs_commit_and_reply(fuse_req_t req, struct ckfs *fs, fuse_ino_t dir, const char *series,
			   const char *name, const char *final);

/* Name operations (staged_names.c). */
void ckfs_rw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ckfs_rw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname, unsigned int flags);

#endif
