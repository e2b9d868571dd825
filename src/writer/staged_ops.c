/* What a local filesystem does to in-progress files and directories
 * (include/ckptfs/writer_staged_ops.h), on the real nodes under
 * STORE/staging: by name with the *at system calls, or through a handle
 * still open on a node whose names are gone.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "ckptfs/writer_staged_ops.h"

/* How a node is reached: by name (at.dir, at.name), else through fd. */
struct reach {
	struct ck_staged_at at;
	int fd;
};

static int reach(struct ck_staging *s, uint64_t ino, struct reach *r)
{
	int rc = ck_staging_at(s, ino, NULL, &r->at);

	r->fd = -1;
	if (rc != -ESTALE)
		return rc;
	r->fd = ck_staging_held_fd(s, ino);
	return r->fd < 0 ? r->fd : 0;
}

static void reach_done(struct reach *r)
{
	ck_staging_at_free(&r->at);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

/* "/proc/self/fd/DIR/NAME": the node by a short path, for the calls that
 * have no *at form (the last component is not followed by the l* calls). */
static int proc_path(const struct reach *r, char *buf, size_t size)
{
	int n = r->fd >= 0 ? snprintf(buf, size, "/proc/self/fd/%d", r->fd)
			   : snprintf(buf, size, "/proc/self/fd/%d/%s", r->at.dir, r->at.name);

	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

int ck_staged_stat(struct ck_staging *s, uint64_t ino, struct stat *st)
{
	struct reach r;
	int rc = reach(s, ino, &r);

	if (rc == 0 && (r.fd >= 0 ? fstat(r.fd, st) : fstatat(r.at.dir, r.at.name, st, AT_SYMLINK_NOFOLLOW)) != 0)
		rc = -errno;
	reach_done(&r);
	return rc;
}

int ck_staged_open(struct ck_staging *s, uint64_t ino, int flags)
{
	char proc[PATH_MAX];
	struct reach r;
	int fd = -1, rc = reach(s, ino, &r);

	flags = (flags | O_CLOEXEC | O_NOFOLLOW) & ~(O_CREAT | O_EXCL | O_NOCTTY);
	if (rc == 0 && r.fd < 0)
		fd = openat(r.at.dir, r.at.name, flags);
	else if (rc == 0 && (rc = proc_path(&r, proc, sizeof(proc))) == 0)
		fd = open(proc, flags & ~O_NOFOLLOW);   /* the magic link names the open file */
	if (rc == 0 && fd < 0)
		rc = -errno;
	reach_done(&r);
	return rc ? rc : fd;
}

/* A descriptor of the node for a change that needs one open for writing
 * (truncate): fd when given, else one opened here (*opened set). */
static int writable_fd(struct ck_staging *s, uint64_t ino, int fd, int *opened)
{
	*opened = 0;
	if (fd >= 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY)
		return fd;
	fd = ck_staged_open(s, ino, O_WRONLY);
	*opened = fd >= 0;
	return fd;
}

static int set_owner(struct ck_staging *s, uint64_t ino, const struct reach *r, int fd, const struct ck_cred *c,
		     const struct ck_staged_set *set)
{
	uint32_t uid = set->what & CK_SET_UID ? set->uid : (uint32_t)-1;
	uint32_t gid = set->what & CK_SET_GID ? set->gid : (uint32_t)-1;
	struct ck_owner o;
	struct stat st;
	int rc = ck_staged_stat(s, ino, &st);

	(void)r;
	if (rc)
		return rc;
	ck_owner_from_stat(&o, &st);
	rc = ck_perm_chown_ok(&o, c, uid, gid);
	if (rc)
		return rc;
	if (fd >= 0)
		rc = fchown(fd, uid, gid);
	else
		rc = fchownat(r->at.dir, r->at.name, uid, gid, AT_SYMLINK_NOFOLLOW);
	return rc ? -errno : 0;
}

static int set_times(const struct reach *r, int fd, const struct ck_staged_set *set)
{
	struct timespec tv[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };

	if (set->what & CK_SET_ATIME)
		tv[0] = set->atime;
	if (set->what & CK_SET_MTIME)
		tv[1] = set->mtime;
	if ((fd >= 0 ? futimens(fd, tv) : utimensat(r->at.dir, r->at.name, tv, AT_SYMLINK_NOFOLLOW)) != 0)
		return -errno;
	return 0;
}

int ck_staged_setattr(struct ck_staging *s, uint64_t ino, int fd, const struct ck_cred *c,
		      const struct ck_staged_set *set)
{
	struct reach r = { { -1, NULL }, -1 };
	struct stat st;
	int rc = 0;

	if (fd < 0) {
		rc = reach(s, ino, &r);
		fd = r.fd;
	}
	if (rc == 0 && fd < 0 && fstatat(r.at.dir, r.at.name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		rc = -errno;
	if (rc == 0 && fd < 0 && S_ISLNK(st.st_mode) && (set->what & (CK_SET_MODE | CK_SET_SIZE)))
		rc = set->what & CK_SET_MODE ? -EOPNOTSUPP : -EINVAL;
	/* chown(2)'s rule whatever -o permissions says: who owns a file is not
	 * a matter of trust.  Before the mode, which a chown may clear bits of. */
	if (rc == 0 && (set->what & (CK_SET_UID | CK_SET_GID)))
		rc = set_owner(s, ino, &r, fd, c, set);
	if (rc == 0 && (set->what & CK_SET_MODE) &&
	    (fd >= 0 ? fchmod(fd, set->mode & 07777) : fchmodat(r.at.dir, r.at.name, set->mode & 07777, 0)) != 0)
		rc = -errno;
	if (rc == 0 && (set->what & CK_SET_SIZE)) {
		int opened, wfd = writable_fd(s, ino, fd, &opened);

		if (wfd < 0)
			rc = wfd;
		else if (ftruncate(wfd, set->size) != 0)
			rc = -errno;
		if (opened)
			close(wfd);
	}
	if (rc == 0 && (set->what & (CK_SET_ATIME | CK_SET_MTIME)))
		rc = set_times(&r, fd, set);
	reach_done(&r);
	return rc;
}

ssize_t ck_staged_readlink(struct ck_staging *s, uint64_t ino, char *buf, size_t size)
{
	struct ck_staged_at at;
	ssize_t n;
	int rc = ck_staging_at(s, ino, NULL, &at);

	if (rc)
		return rc;
	n = readlinkat(at.dir, at.name, buf, size ? size - 1 : 0);
	if (n < 0)
		n = -errno;
	else if (size)
		buf[n] = '\0';
	ck_staging_at_free(&at);
	return n;
}

int ck_staged_symlink(const struct ck_staged_at *at, const char *target, const struct ck_owner *dir,
		      const struct ck_cred *c)
{
	struct ck_owner o;

	if (symlinkat(target, at->dir, at->name) != 0)
		return -errno;
	ck_perm_new_owner(dir, c, 0777, 0, &o);
	if (geteuid() == 0 && fchownat(at->dir, at->name, o.uid, o.gid, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	return 0;
}

int ck_staged_mknod(const struct ck_staged_at *at, mode_t mode, const struct ck_owner *dir,
		    const struct ck_cred *c)
{
	int fd, rc;

	if (!S_ISREG(mode) && (mode & S_IFMT) != 0)
		return -EPERM;	/* device nodes, fifos, sockets: not checkpoint data */
	fd = openat(at->dir, at->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 07777);
	if (fd < 0)
		return -errno;
	rc = ck_staging_give(NULL, fd, dir, c, mode & 07777, 0);
	close(fd);
	return rc;
}

int ck_staged_link(struct ck_staging *s, uint64_t ino, const struct ck_staged_at *at)
{
	char proc[PATH_MAX];
	struct reach r;
	struct stat st;
	int rc = reach(s, ino, &r);

	if (rc == 0 && (r.fd >= 0 ? fstat(r.fd, &st) : fstatat(r.at.dir, r.at.name, &st, AT_SYMLINK_NOFOLLOW)) != 0)
		rc = -errno;
	if (rc == 0 && S_ISDIR(st.st_mode))
		rc = -EPERM;
	if (rc == 0 && r.fd < 0 && linkat(r.at.dir, r.at.name, at->dir, at->name, 0) != 0)
		rc = -errno;
	/* An open file whose names are gone: its link count is 0, and Linux
	 * refuses to give it a name again (ENOENT), as a local one would. */
	if (rc == 0 && r.fd >= 0 && (rc = proc_path(&r, proc, sizeof(proc))) == 0 &&
	    linkat(AT_FDCWD, proc, at->dir, at->name, AT_SYMLINK_FOLLOW) != 0)
		rc = -errno;
	reach_done(&r);
	return rc;
}

/* 1: a user.* name the real file keeps; 0: the mount's own; -ENOTSUP: another namespace. */
static int user_name(const char *name)
{
	if (strncmp(name, CK_XATTR_PREFIX, strlen(CK_XATTR_PREFIX)) == 0)
		return 0;
	return strncmp(name, "user.", 5) == 0 ? 1 : -ENOTSUP;
}

ssize_t ck_staged_getxattr(struct ck_staging *s, uint64_t ino, const char *name, void *value, size_t size)
{
	char proc[PATH_MAX];
	struct reach r;
	ssize_t n;
	int rc = user_name(name);

	if (rc <= 0)
		return rc == 0 ? -ENODATA : rc;
	rc = reach(s, ino, &r);
	if (rc == 0 && r.fd < 0)
		rc = proc_path(&r, proc, sizeof(proc));
	if (rc) {
		reach_done(&r);
		return rc;
	}
	n = r.fd >= 0 ? fgetxattr(r.fd, name, value, size) : lgetxattr(proc, name, value, size);
	if (n < 0)
		n = -errno;
	reach_done(&r);
	return n;
}

ssize_t ck_staged_listxattr(struct ck_staging *s, uint64_t ino, char *list, size_t size)
{
	char proc[PATH_MAX], *all = NULL;
	struct reach r;
	ssize_t n = 0, kept = 0;
	int rc = reach(s, ino, &r);

	if (rc == 0 && r.fd < 0)
		rc = proc_path(&r, proc, sizeof(proc));
	/* The real list, then only its user.* names that are not the mount's. */
	while (rc == 0) {
		n = r.fd >= 0 ? flistxattr(r.fd, NULL, 0) : llistxattr(proc, NULL, 0);
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		free(all);
		all = malloc((size_t)n);
		if (!all) {
			rc = -ENOMEM;
			break;
		}
		n = r.fd >= 0 ? flistxattr(r.fd, all, (size_t)n) : llistxattr(proc, all, (size_t)n);
		if (n >= 0 || errno != ERANGE) {   /* ERANGE: it grew meanwhile */
			rc = n < 0 ? -errno : 0;
			break;
		}
	}
	for (ssize_t i = 0; rc == 0 && i < n;) {
		size_t len = strlen(all + i) + 1;

		if (user_name(all + i) == 1) {
			if (size && (size_t)kept + len > size)
				rc = -ERANGE;
			else if (size)
				memcpy(list + kept, all + i, len);
			kept += (ssize_t)len;
		}
		i += (ssize_t)len;
	}
	free(all);
	reach_done(&r);
	return rc ? rc : kept;
}

/* set (value non-NULL) or remove (value NULL) a user.* attribute. */
static int change_xattr(struct ck_staging *s, uint64_t ino, const char *name, const void *value, size_t size,
			int flags)
{
	char proc[PATH_MAX];
	struct reach r;
	int rc = user_name(name);

	if (rc <= 0)
		return rc == 0 ? -EPERM : rc;
	rc = reach(s, ino, &r);
	if (rc == 0 && r.fd < 0)
		rc = proc_path(&r, proc, sizeof(proc));
	if (rc == 0) {
		int ret;

		if (value)
			ret = r.fd >= 0 ? fsetxattr(r.fd, name, value, size, flags) : lsetxattr(proc, name, value, size, flags);
		else
			ret = r.fd >= 0 ? fremovexattr(r.fd, name) : lremovexattr(proc, name);
		rc = ret ? -errno : 0;
	}
	reach_done(&r);
	return rc;
}

int ck_staged_setxattr(struct ck_staging *s, uint64_t ino, const char *name, const void *value, size_t size,
		       int flags)
{
	return change_xattr(s, ino, name, value ? value : "", size, flags);
}

int ck_staged_removexattr(struct ck_staging *s, uint64_t ino, const char *name)
{
	return change_xattr(s, ino, name, NULL, 0, 0);
}
