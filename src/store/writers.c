/* STORE/writers/<series>/<dir>: who writes into a staged directory, on
 * every node (include/ckptfs/store.h; docs/design.md, "Writers on many
 * nodes").
 *
 * A writable mount holds a shared flock on the file while files of
 * STORE/staging/<series>/<dir>/ are open for writing through it; a commit
 * of the directory holds it exclusive from before it validates the files
 * until the directory has left staging.  flock between the clients of a
 * shared filesystem is what every filesystem ckptfs supports for writers
 * gives (docs/design.md has the table), and a lock dies with the process
 * that held it, kill -9 included.  A node's buffered writes reach the
 * other clients when it closes its files (close-to-open), which it does
 * before giving up its shared lock: a commit that holds the lock
 * exclusive reads every node's bytes.
 *
 * The file goes once its directory left staging, unlinked by whoever
 * holds it exclusive.  Whoever locks it checks afterwards that the path
 * still names the file it locked, and starts again if not: a lock on a
 * file unlinked meanwhile guards nothing. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/clock.h"
#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "index.h"
#include "manifest.h"
#include "staging.h"

#define POLL_MS 20

/* STORE/writers/<series>/<dir>, allocated; with make, the directories
 * above it are created as needed.  NULL with errno. */
static char *lock_path(const char *store, const char *series, const char *dir, int make)
{
	char *area, *sdir = NULL, *path = NULL;

	if (ck_manifest_check_name(series) < 0 || ck_manifest_check_name(dir) < 0) {
		errno = EINVAL;
		return NULL;
	}
	area = ck_path_join(store, CK_STORE_WRITERS_DIR);
	if (area)
		sdir = ck_path_join(area, series);
	if (sdir)
		path = ck_path_join(sdir, dir);
	if (path && make) {
		/* A lost race to make them is no failure: the open tells. */
		if (mkdir(area, 0755) < 0 && errno != EEXIST) {
			/* the open below fails and says why */
		}
		if (mkdir(sdir, 0755) < 0 && errno != EEXIST) {
			/* likewise */
		}
	}
	free(area);
	free(sdir);
	if (!path)
		errno = ENOMEM;
	return path;
}

/* Whether fd is still the file at path. */
static int still_there(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* flock(how | LOCK_NB) on the file at path, made when create is set,
 * trying for wait_ms: 0 with *fd, -EBUSY (someone holds a conflicting lock
 * all that time), or -errno (-ENOENT: no such file, create unset). */
static int lock_file(const char *path, int how, int create, unsigned wait_ms, int *fd)
{
	double until = ck_monotonic_s() + wait_ms / 1000.0;

	*fd = -1;
	for (;;) {
		int f = open(path, O_RDWR | (create ? O_CREAT : 0) | O_CLOEXEC, 0644), rc;

		if (f < 0)
			return -errno;
		while ((rc = flock(f, how | LOCK_NB)) < 0 && errno == EINTR)
			;
		if (rc == 0 && still_there(f, path)) {
			*fd = f;
			return 0;
		}
		rc = rc < 0 ? errno : 0;
		close(f);
		if (rc && rc != EWOULDBLOCK)
			return -rc;
		if (rc && ck_monotonic_s() >= until)
			return -EBUSY;
		if (rc)
			usleep(POLL_MS * 1000);
		/* else: unlinked after the open; the next open makes it anew */
	}
}

int ck_writers_share(const char *store, const char *series, const char *dir, int *fd, struct ck_error *err)
{
	char *path = lock_path(store, series, dir, 1);
	int rc;

	*fd = -1;
	if (!path)
		return ck_fail(err, errno, "%s/%s: %s", series, dir, strerror(errno));
	rc = lock_file(path, LOCK_SH, 1, CK_WRITERS_SHARE_WAIT_MS, fd);
	if (rc == -EBUSY)
		ck_fail(err, EBUSY, "%s/%s is being committed", series, dir);
	else if (rc < 0)
		ck_fail(err, -rc, "%s: cannot lock: %s", path, strerror(-rc));
	free(path);
	return rc;
}

int ck_writers_exclusive(const char *store, const char *series, const char *dir, unsigned wait_ms, int *fd,
			 struct ck_error *err)
{
	char *path = lock_path(store, series, dir, 1);
	int rc;

	*fd = -1;
	if (!path)
		return ck_fail(err, errno, "%s/%s: %s", series, dir, strerror(errno));
	rc = lock_file(path, LOCK_EX, 1, wait_ms, fd);
	if (rc == -EBUSY)
		ck_fail(err, EBUSY, "%s/%s: files in it are open for writing on another node or process "
			"(waited %u ms)", series, dir, wait_ms);
	else if (rc < 0)
		ck_fail(err, -rc, "%s: cannot lock: %s", path, strerror(-rc));
	free(path);
	return rc;
}

int ck_writers_wait(const char *store, const char *series, const char *dir, unsigned wait_ms)
{
	char *path = lock_path(store, series, dir, 0);
	int fd, rc;

	if (!path)
		return -errno;
	rc = lock_file(path, LOCK_SH, 0, wait_ms, &fd);
	free(path);
	ck_writers_unlock(fd);
	return rc == -ENOENT ? 0 : rc;
}

void ck_writers_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

void ck_writers_done(const char *store, const char *series, const char *dir, int fd)
{
	char *path = fd >= 0 ? lock_path(store, series, dir, 0) : NULL;

	if (path && still_there(fd, path) && unlink(path) < 0 && errno != ENOENT)
		ck_warn("%s: %s", path, strerror(errno));
	free(path);
	ck_writers_unlock(fd);
}

/* One lock file: gone once free and its directory is not staged. */
static int sweep_one(void *ctx, const char *series, const char *name, const char *path)
{
	const char *store = ctx;
	char *staged = NULL, *area = ck_path_join(store, CK_STORE_STAGING_DIR), *sdir = NULL;
	struct stat sb;
	int fd;

	(void)path;
	if (area && (sdir = ck_path_join(area, series)) != NULL)
		staged = ck_path_join(sdir, name);
	if (staged && lstat(staged, &sb) < 0 && errno == ENOENT &&
	    ck_writers_exclusive(store, series, name, 0, &fd, NULL) == 0) {
		/* Checked again under the lock: made and written into meanwhile? */
		if (lstat(staged, &sb) < 0 && errno == ENOENT)
			ck_writers_done(store, series, name, fd);
		else
			ck_writers_unlock(fd);
	}
	free(area);
	free(sdir);
	free(staged);
	return 0;
}

int ck_writers_sweep(const char *store)
{
	return ck_store_area_each(store, CK_STORE_WRITERS_DIR, sweep_one, (void *)store);
}
