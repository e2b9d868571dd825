/* mount.lock: which writable mount serves the store on this node.
 *
 * It lives beside the node's index: STORE/mount.lock on a local
 * filesystem (one index, one node), and on a shared filesystem
 * BASE/<store id>-<hash>/mount.lock in the node-local index's directory
 * (index_place.c), so that every node (every node-local index) has a
 * writable mount of its own, while the writers of one staged directory
 * on several nodes coordinate through its writers lock (writers.c).
 * A writable ckptfs holds an exclusive flock on it for as long as it runs
 * (the kernel drops it when the daemon dies, kill -9 included) and keeps
 * "PID MOUNTPOINT\n" in it.  A second writable mount with the same index
 * is refused: the mount keeps claims and parses of in-progress files in
 * memory, and recovers the store when it starts.  ckptctl commit asks
 * that mount to commit instead of moving a directory it may be writing
 * into (docs/format.md). */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>

#include "ckptfs/fileio.h"
#include "ckptfs/store.h"
#include "index.h"

#define MOUNT_LOCK_FILE "mount.lock"
#define MAX_RECORD 8192
/* How long a claim waits for a holder whose mount is gone (see below). */
#define ENDING_HOLDER_WAIT_MS 10000
#define ENDING_HOLDER_POLL_MS 20

/* Where this node's mount.lock of store is (writable: the store's id may
 * be made): 0 and *path (allocated), or -errno with err. */
static int lock_path(const char *store, int writable, char **path, struct ck_error *err)
{
	struct ck_index_place where;
	char *real = realpath(store, NULL);
	int rc;

	*path = NULL;
	if (!real)
		return ck_fail(err, errno, "%s: %s", store, strerror(errno));
	rc = ck_index_place_find(real, writable, &where, err);
	free(real);
	if (rc < 0)
		return rc;
	*path = ck_path_join(where.parent, MOUNT_LOCK_FILE);
	ck_index_place_clear(&where);
	return *path ? 0 : ck_fail(err, ENOMEM, "out of memory");
}

/* Reads "PID MOUNTPOINT\n" from fd: 0, or -ENOENT when it holds none. */
static int read_record(int fd, long *pid, char **mountpoint)
{
	char buf[MAX_RECORD + 1], *space, *end;
	ssize_t n = pread(fd, buf, MAX_RECORD, 0);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	end = strchr(buf, '\n');
	space = strchr(buf, ' ');
	if (!end || !space || space > end)
		return -ENOENT;
	*end = '\0';
	*space = '\0';
	*pid = strtol(buf, NULL, 10);
	*mountpoint = strdup(space + 1);
	return *mountpoint ? 0 : -ENOMEM;
}

/* Whether path is a mount point now: 1, 0, or -1 when that cannot be told. */
static int mounted_now(const char *path)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent m;
	char buf[4 * MAX_RECORD];
	int found = 0;

	if (!f)
		return -1;
	while (!found && getmntent_r(f, &m, buf, sizeof(buf)))
		found = strcmp(m.mnt_dir, path) == 0;
	endmntent(f);
	return found;
}

/* Whether the holder of the lock on fd is on its way out: its mount is
 * gone (unmounted, or detached after a crash) but the daemon is still
 * tearing down, or a commit child it forked (which shares the lock) is
 * finishing a commit.  A record being written or cleared counts too. */
static int holder_ending(int fd)
{
	char *other = NULL;
	long pid;
	int rc = read_record(fd, &pid, &other);

	if (rc == 0)
		rc = mounted_now(other) == 0;
	else
		rc = rc == -ENOENT;
	free(other);
	return rc;
}

/* flock(LOCK_EX) on fd, waiting a while for a holder that is ending: a
 * remount right after an unmount must not fail because the old daemon has
 * not quite exited.  0 or -errno (-EWOULDBLOCK: a live mount holds it). */
static int lock_claim(int fd)
{
	for (int waited = 0;; waited += ENDING_HOLDER_POLL_MS) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return -errno;
		if (waited >= ENDING_HOLDER_WAIT_MS || !holder_ending(fd))
			return -EWOULDBLOCK;
		usleep(ENDING_HOLDER_POLL_MS * 1000);
	}
}

int ck_store_mount_claim(const char *store, const char *mountpoint, int *fd_out, struct ck_error *err)
{
	char *path, *other = NULL;
	char record[MAX_RECORD];
	long pid;
	int fd, len, rc;

	*fd_out = -1;
	rc = lock_path(store, 1, &path, err);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;

		ck_fail(err, e, "%s: %s", path, strerror(e));
		free(path);
		return -e;
	}
	rc = lock_claim(fd);
	if (rc < 0) {
		int e = -rc;

		if (e == EWOULDBLOCK && read_record(fd, &pid, &other) == 0)
			ck_fail(err, EBUSY, "%s is already mounted writable by ckptfs (pid %ld) at %s on this node "
				"(with this node's index, %s)", store, pid, other, path);
		else if (e == EWOULDBLOCK)
			ck_fail(err, EBUSY, "%s is already mounted writable by another ckptfs", store);
		else
			ck_fail(err, e, "%s: cannot lock: %s", path, strerror(e));
		free(other);
		free(path);
		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	len = snprintf(record, sizeof(record), "%ld %s\n", (long)getpid(), mountpoint);
	if (len < 0 || (size_t)len >= sizeof(record) || ftruncate(fd, 0) < 0 ||
	    pwrite(fd, record, (size_t)len, 0) != len) {
		int e = len < 0 || (size_t)len >= sizeof(record) ? ENAMETOOLONG : errno;

		ck_fail(err, e, "%s: cannot record the mount: %s", path, strerror(e));
		free(path);
		close(fd);
		return -e;
	}
	free(path);
	*fd_out = fd;
	return 0;
}

void ck_store_mount_release(int fd)
{
	if (fd < 0)
		return;
	if (ftruncate(fd, 0) < 0) {
		/* the record only names a mount while the lock is held */
	}
	close(fd);
}

int ck_store_mount_owner(const char *store, long *pid, char **mountpoint)
{
	char *path;
	int fd, rc;

	*mountpoint = NULL;
	rc = lock_path(store, 0, &path, NULL);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	/* Free to take: no daemon holds it, whatever the file says. */
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		close(fd);
		return 0;
	}
	rc = errno == EWOULDBLOCK ? read_record(fd, pid, mountpoint) : -errno;
	close(fd);
	if (rc == -ENOENT)
		return 0;	/* a daemon between taking the lock and writing its record */
	return rc < 0 ? rc : 1;
}
