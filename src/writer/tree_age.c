/* How long a directory tree has rested (tree_age.h). */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/clock.h"
#include "tree_age.h"

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

int ckw_tree_newest_fd(int fd, int64_t *newest_ns, size_t *files)
{
	*newest_ns = 0;
	*files = 0;
	return newest_change(fd, newest_ns, files, 0);
}

int ckw_tree_newest(const char *dir, int64_t *newest_ns, size_t *files)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	*newest_ns = 0;
	*files = 0;
	if (fd < 0)
		return -errno;
	return newest_change(fd, newest_ns, files, 0);
}
