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
#include "index.h"

int ck_store_lock_file(const char *dir, const char *name, int exclusive, int *fd, struct ck_error *err)
{
	char *path = ck_path_join(dir, name);
	int rc = 0;

	*fd = -1;
	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
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
	free(path);
	return rc;
}

int ck_store_lock(const char *dir, int exclusive, int *fd, struct ck_error *err)
{
	return ck_store_lock_file(dir, CK_STORE_LOCK_FILE, exclusive, fd, err);
}

int ck_store_commit_lock(const struct ck_store *st, int *fd, struct ck_error *err)
{
	return ck_store_lock_file(st->path, CK_STORE_COMMIT_LOCK, 1, fd, err);
}

void ck_store_unlock(int fd)
{
	if (fd >= 0)
		close(fd);   /* releases the flock */
}

int ck_store_index_current(struct ck_store *st, struct ck_error *err)
{
	size_t n = strlen(st->path) + sizeof(CK_STORE_INDEX_DIR) + sizeof("/data.mdb") + 1;
	char *path = malloc(n);
	struct stat now, mine;
	mdb_filehandle_t fd;
	int same;

	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	snprintf(path, n, "%s/%s/data.mdb", st->path, CK_STORE_INDEX_DIR);
	same = mdb_env_get_fd(st->env, &fd) == 0 && fstat(fd, &mine) == 0 && stat(path, &now) == 0 &&
	       now.st_dev == mine.st_dev && now.st_ino == mine.st_ino;
	free(path);
	if (!same)
		return ck_fail(err, ESTALE, "%s: the index was rebuilt (ckptctl reindex) since it was opened; try again",
			       st->path);
	return 0;
}
