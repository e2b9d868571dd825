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

/* Owners in the writable mount (owners.c).
 *  - ckfs_dir_owner: the owner, group and mode directory c shows.
 *  - ckfs_give_new: the node just made at path (fd open on it, or -1) gets
 *    the owner a local filesystem would give it, made by the user of req
 *    in a directory of owner parent with mode (the umask applied by the
 *    kernel): 0 or -errno (logged; the node stays the daemon's).
 *  - ckfs_mirror_series: STORE/staging/<series> at path, just made for a
 *    series the view has (series_dir), takes the owner, group and mode the
 *    view shows for it.
 *  - ckfs_may_chown: chown(2)'s rule for the user of req on path (fd, or
 *    -1): 0 or -EPERM.
 *  - ckfs_may_commit: whether the user of req may commit the in-progress
 *    directory at dir_path of series by setting user.ckptfs.commit: what
 *    renaming it inside the series directory needs (the kernel checked
 *    write permission on it).  0, -EACCES, -EPERM; 0 with -o nopermissions. */
int ckfs_dir_owner(struct ckfs *fs, const struct ckfs_dir_ctx *c, struct ck_owner *o);
int ckfs_give_new(fuse_req_t req, const struct ck_owner *parent, const char *path, int fd, mode_t mode,
		  int is_dir);
void ckfs_mirror_series(struct ckfs *fs, const struct ck_vnode *series_dir, const char *path);
int ckfs_may_chown(fuse_req_t req, const char *path, int fd, uint32_t uid, uint32_t gid);
int ckfs_may_commit(fuse_req_t req, struct ckfs *fs, const char *series, const char *dir_path);

/* Name operations (staged_names.c). */
void ckfs_rw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ckfs_rw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rw_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		    fuse_ino_t newparent, const char *newname, unsigned int flags);

#endif
