/* See include/ckptfs/fileio.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <sys/syscall.h>
#include <linux/openat2.h>

#include "ckptfs/fileio.h"

int ck_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t got = pread(fd, p, len, (off_t)off);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			return -EIO;
		p += got;
		off += (uint64_t)got;
		len -= (size_t)got;
	}
	return 0;
}

int ck_read_file(const char *path, size_t max, uint8_t **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat sb;
	uint8_t *buf;
	int rc;

	*out = NULL;
	*len = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*len = (size_t)sb.st_size;
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
		close(fd);
		return S_ISREG(sb.st_mode) ? -EFBIG : -EINVAL;
	}
	buf = malloc(*len + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	rc = ck_pread_full(fd, buf, *len, 0);
	close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[*len] = 0;
	*out = buf;
	return 0;
}

int ck_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fsync_open(const char *path, int flags)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	int rc = 0;

	if (fd < 0)
		return -errno;
	/* Some filesystems cannot sync a directory (EINVAL): nothing more to do there. */
	if (fsync(fd) < 0 && errno != EINVAL)
		rc = -errno;
	close(fd);
	return rc;
}

int ck_fsync_file(const char *path)
{
	return fsync_open(path, O_NOFOLLOW);
}

int ck_fsync_dir(const char *dir)
{
	return fsync_open(dir, O_DIRECTORY);
}

/* The directory path is in ("/" for "/x", "." for "x"), allocated. */
static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n;
	char *dir;

	if (!slash)
		return strdup(".");
	n = slash == path ? 1 : (size_t)(slash - path);
	dir = malloc(n + 1);
	if (dir) {
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	return dir;
}

int ck_fsync_parent(const char *path)
{
	char *dir = parent_of(path);
	int rc;

	if (!dir)
		return -ENOMEM;
	rc = ck_fsync_dir(dir);
	free(dir);
	return rc;
}

int ck_mkdir_durable(const char *path)
{
	if (mkdir(path, 0755) < 0)
		return errno == EEXIST ? 0 : -errno;
	return ck_fsync_parent(path);
}

/* Writes and syncs the temporary file: 0 or -errno with err. */
static int write_synced(const char *tmp, const void *data, size_t len, struct ck_error *err)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc;

	if (fd < 0)
		return ck_fail(err, errno, "%s: %s", tmp, strerror(errno));
	rc = ck_write_all(fd, data, len);
	if (rc < 0) {
		close(fd);
		return ck_fail(err, -rc, "%s: write: %s", tmp, strerror(-rc));
	}
	if (fsync(fd) < 0) {
		rc = ck_fail(err, errno, "%s: fsync: %s", tmp, strerror(errno));
		close(fd);
		return rc;
	}
	if (close(fd) < 0)
		return ck_fail(err, errno, "%s: close: %s", tmp, strerror(errno));
	return 0;
}

int ck_file_replace(const char *path, const void *data, size_t len, struct ck_error *err)
{
	size_t n = strlen(path) + sizeof(CK_REPLACE_TMP) + 24;
	char *tmp = malloc(n), *dir;
	int rc;

	if (!tmp)
		return ck_fail(err, ENOMEM, "out of memory");
	snprintf(tmp, n, "%s" CK_REPLACE_TMP "%ld", path, (long)getpid());
	rc = write_synced(tmp, data, len, err);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = ck_fail(err, errno, "%s: rename: %s", path, strerror(errno));
	if (rc < 0) {
		unlink(tmp);
		free(tmp);
		return rc;
	}
	free(tmp);
	dir = parent_of(path);
	if (!dir)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = ck_fsync_dir(dir);
	if (rc < 0)
		ck_fail(err, -rc, "%s: fsync: %s", dir, strerror(-rc));
	free(dir);
	return rc;
}

char *ck_path_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s%s", a, *a && *b ? "/" : "", b);
	return p;
}

/* openat2 with RESOLVE_NO_SYMLINKS (Linux 5.6+); -ENOSYS before. */
static int open_no_symlinks(int root, const char *rel)
{
#ifdef SYS_openat2
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH,
	};
	long fd = syscall(SYS_openat2, root, rel, &how, sizeof(how));

	return fd >= 0 ? (int)fd : -errno;
#else
	(void)root;
	(void)rel;
	return -ENOSYS;
#endif
}

int ck_open_dir_beneath(int root, const char *rel)
{
	int fd = -1, rc;

	if (!*rel) {
		fd = fcntl(root, F_DUPFD_CLOEXEC, 0);
		return fd >= 0 ? fd : -errno;
	}
	if (strlen(rel) < PATH_MAX) {
		rc = open_no_symlinks(root, rel);
		if (rc >= 0 || (rc != -ENOSYS && rc != -EPERM && rc != -E2BIG))
			return rc;
	}
	/* Component by component: longer than one system call takes, or a
	 * kernel without openat2 (or a seccomp filter that refuses it). */
	for (const char *p = rel; *p;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		char name[NAME_MAX + 1];
		int next;

		if (len == 0 || len > NAME_MAX) {
			rc = len ? -ENAMETOOLONG : -EINVAL;
			goto fail;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		next = openat(fd >= 0 ? fd : root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			/* O_PATH | O_NOFOLLOW opens a symbolic link itself: ENOTDIR */
			rc = -errno;
			goto fail;
		}
		if (fd >= 0)
			close(fd);
		fd = next;
		p += len;
		while (*p == '/')
			p++;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return rc;
}
