/* Idle commits (-o commit_idle=SEC): a trainer that writes a checkpoint
 * directory and leaves no marker still gets it committed once it rests.
 * Every second a thread walks STORE/staging/<series>/<dir>/ and commits
 * each directory whose name carries a step, that holds at least one file,
 * has nothing open, and whose newest modification is SEC seconds old.
 * A file that does not parse sends the directory to the quarantine, as
 * every commit does.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs.h"
#include "ckptfs/clock.h"
#include "ckptfs/store.h"

/* Newest mtime under the directory fd (closed here) and how many regular
 * files it holds; 0 or -errno. */
static int newest_change(int fd, int64_t *newest, size_t *files, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	struct stat st;
	int rc = 0;

	if (!d) {
		close(fd);
		return -errno;
	}
	if (fstat(dirfd(d), &st) == 0 && ck_timespec_ns(st.st_mtim) > *newest)
		*newest = ck_timespec_ns(st.st_mtim);
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;	/* removed meanwhile */
		if (ck_timespec_ns(st.st_mtim) > *newest)
			*newest = ck_timespec_ns(st.st_mtim);
		if (S_ISREG(st.st_mode)) {
			(*files)++;
		} else if (S_ISDIR(st.st_mode) && depth < 64) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			if (sub >= 0)
				rc = newest_change(sub, newest, files, depth + 1);
		}
	}
	closedir(d);
	return rc;
}

int ckfs_newest_change(const char *dir, int64_t *newest_ns, size_t *files)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	*newest_ns = 0;
	*files = 0;
	if (fd < 0)
		return -errno;
	return newest_change(fd, newest_ns, files, 0);
}

int64_t ckfs_now_ns(void)
{
	return ck_now_ns();
}

static void check_dir(struct ckfs_idler *r, const char *series, const char *name, int fd)
{
	int64_t newest = 0;
	size_t files = 0;
	int64_t step;
	int rc;

	if (ckfs_step_of(r->fs, series, name, &step) != 0) {
		close(fd);
		return;
	}
	if (newest_change(fd, &newest, &files, 0) || files == 0 ||
	    ckfs_now_ns() - newest < (int64_t)r->secs * 1000000000)
		return;
	rc = ckfs_commit_dir(r->fs, series, name, 1);
	if (rc && rc != -EAGAIN)
		ck_warn("%s/%s: idle commit: %s", series, name, strerror(-rc));
}

static void check_series(struct ckfs_idler *r, int top, const char *series)
{
	int fd = openat(top, series, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		int sub;

		if (de->d_name[0] == '.')
			continue;	/* dot names are temporary by convention */
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			check_dir(r, series, de->d_name, sub);
	}
	closedir(d);
}

static void check_all(struct ckfs_idler *r)
{
	char *top = ckfs_staging_top_path(r->fs->staging, "", NULL);
	struct dirent *de;
	DIR *d = top ? opendir(top) : NULL;

	free(top);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			check_series(r, dirfd(d), de->d_name);
	closedir(d);
}

static void idle_tick(void *arg)
{
	check_all(arg);
}

int ckfs_idler_start(struct ckfs_idler *r, struct ckfs *fs, unsigned secs)
{
	memset(r, 0, sizeof(*r));
	r->fs = fs;
	r->secs = secs;
	/* Checked every second; secs is how long a directory must be quiet. */
	return ckfs_ticker_start(&r->ticker, 1, idle_tick, r);
}

void ckfs_idler_stop(struct ckfs_idler *r)
{
	ckfs_ticker_stop(&r->ticker);
}
