/* The store's lock files (index.h).
 *
 * Writers against reindex: LMDB already serializes writers of one
 * environment, but `ckptctl reindex` replaces the environment itself: a
 * commit into the old one after the swap would be lost from the index.
 * So every commit holds STORE/index.lock shared and checks that its
 * environment is still STORE/index; reindex holds it exclusive from its
 * first read of the manifests until the new index is in place.
 * STORE/commit.lock orders whatever moves files in the store: staged
 * commits, recovery, compaction, gc and deletion. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "index.h"

int ck_store_lock_file(const char *dir, const char *name, int exclusive, int *fd, struct ck_error *err)
{
	char *path = ck_path_join(dir, name);
	int rc;

	*fd = -1;
	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = ck_lock_path(path, exclusive, fd, err);
	free(path);
	return rc;
}

int ck_lock_path(const char *path, int exclusive, int *fd, struct ck_error *err)
{
	int rc = 0;

	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0) {
		rc = ck_fail(err, errno, "%s: %s", path, strerror(errno));
	} else {
		while ((rc = flock(*fd, exclusive ? LOCK_EX : LOCK_SH)) < 0 && errno == EINTR)
			;
		if (rc < 0) {
			rc = ck_fail(err, errno, "%s: cannot lock: %s", path, strerror(errno));
			close(*fd);
			*fd = -1;
		}
	}
	return rc;
}

int ck_store_lock(const struct ck_store *st, int exclusive, int *fd, struct ck_error *err)
{
	return ck_lock_path(st->where.lock, exclusive, fd, err);
}

int ck_store_commit_lock(const struct ck_store *st, int *fd, struct ck_error *err)
{
	return ck_store_lock_file(st->path, CK_STORE_COMMIT_LOCK, 1, fd, err);
}

int ck_store_maintenance_lock(const struct ck_store *st, int *fd, struct ck_error *err)
{
	char *path = ck_path_join(st->path, CK_STORE_MAINTENANCE_LOCK), host[256] = "", record[400];
	int rc, len;

	*fd = -1;
	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0) {
		rc = ck_fail(err, errno, "%s: %s", path, strerror(errno));
		free(path);
		return rc;
	}
	if (flock(*fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		char other[400] = "";
		ssize_t n = pread(*fd, other, sizeof(other) - 1, 0);

		other[n > 0 ? n : 0] = '\0';
		other[strcspn(other, "\n")] = '\0';
		ck_info("%s: compaction or gc runs elsewhere (%s): waiting for it", st->path,
			other[0] ? other : "holder unknown");
		while ((rc = flock(*fd, LOCK_EX)) < 0 && errno == EINTR)
			;
		if (rc < 0) {
			rc = ck_fail(err, errno, "%s: cannot lock: %s", path, strerror(errno));
			close(*fd);
			*fd = -1;
			free(path);
			return rc;
		}
	}
	gethostname(host, sizeof(host) - 1);
	len = snprintf(record, sizeof(record), "pid %ld on %s\n", (long)getpid(), host);
	if (ftruncate(*fd, 0) < 0 || pwrite(*fd, record, (size_t)len, 0) != len) {
		/* the record only tells people who holds it */
	}
	free(path);
	return 0;
}

void ck_store_unlock(int fd)
{
	if (fd >= 0)
		close(fd);   /* releases the flock */
}

int ck_store_index_current(struct ck_store *st, struct ck_error *err)
{
	char *path = ck_path_join(st->where.dir, "data.mdb");
	struct stat now, mine;
	mdb_filehandle_t fd;
	int same;

	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	same = mdb_env_get_fd(st->env, &fd) == 0 && fstat(fd, &mine) == 0 && stat(path, &now) == 0 &&
	       now.st_dev == mine.st_dev && now.st_ino == mine.st_ino;
	free(path);
	if (!same)
		return ck_fail(err, ESTALE, "%s: the index was rebuilt (ckptctl reindex) since it was opened; try again",
			       st->path);
	return 0;
}
