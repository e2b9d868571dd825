/* What a local filesystem does to the files and directories of an
 * in-progress checkpoint (src/writer/staged_ops.c), below the FUSE
 * adapter: attributes, opens, links and symbolic links, extended
 * attributes, on the real nodes under STORE/staging that the table of
 * include/ckptfs/writer_staging.h names.  The daemon acts as root; the
 * kernel checked the caller's permissions against the attributes these
 * functions report (default_permissions), and the owners of what they
 * create are given to the caller as a local filesystem would
 * (ck_staging_give).
 *
 * Every node is reached by its names (ck_staging_at) or, once they are
 * all gone, through a handle still open on it (ck_staging_held_fd): an
 * unlinked file keeps answering stat, chmod, truncate and its extended
 * attributes as on a local filesystem.
 *
 * What a checkpoint cannot hold is refused with EPERM: device nodes,
 * fifos and sockets (ck_staged_mknod).  Only the user.* namespace of
 * extended attributes is kept (others: ENOTSUP), and user.ckptfs.* is
 * the mount's own (EPERM).
 *
 * Thread rules: any thread, any number at once; the table's lock is taken
 * only to find nodes, never across a system call on them.  Errors are
 * -errno from the system call that failed.
 */
#ifndef CKPTFS_WRITER_STAGED_OPS_H
#define CKPTFS_WRITER_STAGED_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "ckptfs/perm.h"
#include "ckptfs/writer_staging.h"

/* The extended attributes the mount itself answers for (never stored). */
#define CK_XATTR_PREFIX "user.ckptfs."

/* lstat of node ino: by its name, else through a handle open on it.
 * 0, -ENOENT (its name is gone from disk: a commit may have moved it),
 * -ESTALE (no name and no handle). */
int ck_staged_stat(struct ck_staging *s, uint64_t ino, struct stat *st);

/* open(2) of file node ino with flags (O_CREAT and O_EXCL ignored, a
 * symbolic link never followed), by its name, else by reopening a handle
 * still open on it.  A descriptor (close-on-exec) or -errno. */
int ck_staged_open(struct ck_staging *s, uint64_t ino, int flags);

/* What a setattr changes: CK_SET_* in what; a time with tv_nsec
 * UTIME_NOW is the current time. */
#define CK_SET_MODE 1u
#define CK_SET_UID 2u
#define CK_SET_GID 4u
#define CK_SET_SIZE 8u
#define CK_SET_ATIME 16u
#define CK_SET_MTIME 32u
struct ck_staged_set {
	unsigned what;
	mode_t mode;
	uint32_t uid, gid;
	off_t size;
	struct timespec atime, mtime;
};
/* chown (under chown(2)'s rule for c, ck_perm_chown_ok: the owner first,
 * which may clear setuid and setgid bits), chmod, truncate and utimens of
 * node ino, through fd when it is a descriptor open on it (-1: none), as
 * set says.  A symbolic link takes owners and times, not a mode
 * (-EOPNOTSUPP) or a size (-EINVAL).  0 or -errno; what came before a
 * failure stays done. */
int ck_staged_setattr(struct ck_staging *s, uint64_t ino, int fd, const struct ck_cred *c,
		      const struct ck_staged_set *set);

/* readlink(2) of node ino into buf (size bytes, NUL-terminated): the
 * target's length, -EINVAL for a node that is no symbolic link, -errno. */
ssize_t ck_staged_readlink(struct ck_staging *s, uint64_t ino, char *buf, size_t size);

/* Makes the symbolic link name -> target in the directory at (from
 * ck_staging_at of the directory's node and name, or ck_staging_top_at),
 * owned as c makes it in a directory of owner dir.  0 or -errno. */
int ck_staged_symlink(const struct ck_staged_at *at, const char *target, const struct ck_owner *dir,
		      const struct ck_cred *c);

/* mknod(2) at at for c, in a directory of owner dir: a regular file
 * (S_IFREG) is made empty and given to c; device nodes, fifos and sockets
 * are refused with -EPERM, as a checkpoint cannot hold them.  0 or -errno. */
int ck_staged_mknod(const struct ck_staged_at *at, mode_t mode, const struct ck_owner *dir,
		    const struct ck_cred *c);

/* link(2) of file node ino (by its name, else through a handle open on
 * it) to the new name at.  Directories are refused (-EPERM), as link(2)
 * refuses them.  0 or -errno; the caller then records the name
 * (ck_staging_linked). */
int ck_staged_link(struct ck_staging *s, uint64_t ino, const struct ck_staged_at *at);

/* Extended attributes of node ino in the user.* namespace, kept in the
 * real file's.  getxattr: the value's size (into value when size > 0,
 * -ERANGE when it does not fit); listxattr: the user.* names, each ending
 * with NUL, with get's size rules; setxattr (flags: XATTR_CREATE,
 * XATTR_REPLACE) and removexattr: 0.  Other namespaces: -ENOTSUP
 * (list leaves them out); user.ckptfs.*: -EPERM to set or remove, -ENODATA
 * to get.  A symbolic link takes none (-EPERM to set, as Linux). */
ssize_t ck_staged_getxattr(struct ck_staging *s, uint64_t ino, const char *name, void *value, size_t size);
ssize_t ck_staged_listxattr(struct ck_staging *s, uint64_t ino, char *list, size_t size);
int ck_staged_setxattr(struct ck_staging *s, uint64_t ino, const char *name, const void *value, size_t size,
		       int flags);
int ck_staged_removexattr(struct ck_staging *s, uint64_t ino, const char *name);

#endif
