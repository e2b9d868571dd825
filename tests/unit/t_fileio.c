/* src/common/fileio.c: whole reads and writes, durable replacement of a
 * file (what it leaves on success and on each kind of failure), durable
 * mkdir and directory syncs, path joining. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "testutil.h"

static char root[] = "/tmp/t_fileio.XXXXXX";

/* Entries of dir other than . and .., each name in out (size bytes) after a space. */
static int entries(const char *dir, char *out, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	out[0] = '\0';
	SETUP(d != NULL);
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		n++;
		strncat(out, " ", size - strlen(out) - 1);
		strncat(out, e->d_name, size - strlen(out) - 1);
	}
	closedir(d);
	return n;
}

static void write_all(void)
{
	char path[512];
	static char big[1 << 20];
	size_t len = 0;
	uint8_t *back;
	int fd;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 251);
	fd = open(pathf(path, sizeof(path), "%s/all", root), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	SETUP(fd >= 0);
	CHECK(ck_write_all(fd, big, sizeof(big)) == 0, "ck_write_all of 1 MiB failed");
	CHECK(ck_write_all(fd, big, 0) == 0, "ck_write_all of nothing failed");
	close(fd);
	back = read_file(path, &len);
	CHECK(back && len == sizeof(big) && !memcmp(back, big, len), "ck_write_all wrote %zu bytes, not 1 MiB", len);
	free(back);
	CHECK(ck_write_all(-1, big, 1) == -EBADF, "ck_write_all to a bad descriptor is not -EBADF");
}

static void read_whole(void)
{
	char path[512], link[512];
	uint8_t *got;
	size_t len;

	write_bytes(pathf(path, sizeof(path), "%s/small", root), "abc\0def", 7);
	CHECK(ck_read_file(path, 7, &got, &len) == 0 && len == 7 && !memcmp(got, "abc\0def", 8),
	      "whole file, NUL-terminated");
	free(got);
	CHECK(ck_read_file(path, 6, &got, &len) == -EFBIG && len == 7 && !got, "over max: not -EFBIG with the size");
	write_bytes(pathf(path, sizeof(path), "%s/empty", root), "", 0);
	CHECK(ck_read_file(path, 0, &got, &len) == 0 && len == 0 && got && !got[0], "an empty file");
	free(got);
	SETUP(symlink(path, pathf(link, sizeof(link), "%s/link", root)) == 0);
	CHECK(ck_read_file(link, 100, &got, &len) == -ELOOP, "a symbolic link is followed");
	CHECK(ck_read_file(root, 100, &got, &len) == -EINVAL, "a directory is not -EINVAL");
	CHECK(ck_read_file(pathf(path, sizeof(path), "%s/none", root), 100, &got, &len) == -ENOENT, "no file");
}

static void replace(void)
{
	struct ck_error err = { "" };
	char dir[512], path[512], list[1024];
	struct stat sb;
	uint8_t *back;
	size_t len = 0;

	SETUP(mkdir(pathf(dir, sizeof(dir), "%s/r", root), 0755) == 0);
	pathf(path, sizeof(path), "%s/target", dir);

	/* a new file, then its replacement: only the target is left */
	CHECK(ck_file_replace(path, "first", 5, &err) == 0, "new file: %s", err.msg);
	CHECK(ck_file_replace(path, "second!", 7, &err) == 0, "replacement: %s", err.msg);
	back = read_file(path, &len);
	CHECK(back && len == 7 && !memcmp(back, "second!", 7), "target holds '%.*s'", (int)len,
	      back ? (char *)back : "");
	free(back);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0644, "mode %o, want 644", sb.st_mode & 07777);
	CHECK(entries(dir, list, sizeof(list)) == 1, "entries left:%s", list);
	CHECK(ck_file_replace(path, "", 0, &err) == 0 && stat(path, &sb) == 0 && sb.st_size == 0,
	      "an empty replacement: %s", err.msg);

	/* the rename fails (a directory is in the way): the temporary is gone,
	 * the directory stays, and the message names the step */
	SETUP(mkdir(pathf(path, sizeof(path), "%s/adir", dir), 0755) == 0);
	SETUP(mkdir(pathf(path, sizeof(path), "%s/adir/inside", dir), 0755) == 0);
	pathf(path, sizeof(path), "%s/adir", dir);
	err.msg[0] = '\0';
	CHECK(ck_file_replace(path, "x", 1, &err) < 0, "replacing a non-empty directory succeeded");
	CHECK(strstr(err.msg, "rename") && strstr(err.msg, path), "message '%s' names neither step nor path",
	      err.msg);
	CHECK(entries(dir, list, sizeof(list)) == 2, "temporary file left:%s", list);
	CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode), "the directory in the way was touched");

	/* the temporary file cannot be made: -errno, nothing left */
	pathf(path, sizeof(path), "%s/missing/target", dir);
	CHECK(ck_file_replace(path, "x", 1, &err) == -ENOENT, "no such directory: not -ENOENT");
	CHECK(strstr(err.msg, "missing/target" CK_REPLACE_TMP) != NULL, "message '%s' does not name the temporary",
	      err.msg);
}

static void dirs(void)
{
	char path[512], cwd[4096];

	CHECK(ck_mkdir_durable(pathf(path, sizeof(path), "%s/made", root)) == 0, "mkdir failed");
	CHECK(ck_mkdir_durable(path) == 0, "an existing directory is not success");
	CHECK(ck_mkdir_durable(pathf(path, sizeof(path), "%s/no/such", root)) == -ENOENT,
	      "mkdir without its parent is not -ENOENT");
	CHECK(ck_fsync_dir(root) == 0, "fsync of a directory failed");
	CHECK(ck_fsync_dir(pathf(path, sizeof(path), "%s/all", root)) == -ENOTDIR, "fsync_dir of a file");
	CHECK(ck_fsync_file(path) == 0, "fsync of a file failed");
	CHECK(ck_fsync_file(pathf(path, sizeof(path), "%s/link", root)) == -ELOOP, "fsync_file follows a link");
	CHECK(ck_fsync_dir(pathf(path, sizeof(path), "%s/nothing", root)) == -ENOENT, "fsync of nothing");
	CHECK(ck_fsync_parent(pathf(path, sizeof(path), "%s/made/not-there", root)) == 0, "fsync of the parent");
	CHECK(ck_fsync_parent("/") == 0 && ck_fsync_parent("/tmp") == 0, "fsync of / as a parent");
	SETUP(getcwd(cwd, sizeof(cwd)) != NULL && chdir(root) == 0);
	CHECK(ck_fsync_parent("relative") == 0, "a path without '/' is in '.'");
	CHECK(ck_file_replace("relative", "r", 1, NULL) == 0 && access("relative", F_OK) == 0,
	      "a relative target (and no err)");
	SETUP(chdir(cwd) == 0);
}

static void join(void)
{
	char *p = ck_path_join("a/b", "c"), *q = ck_path_join("", "c"), *r = ck_path_join("a", "");

	CHECK(p && !strcmp(p, "a/b/c"), "join: '%s'", p ? p : "(null)");
	CHECK(q && !strcmp(q, "c"), "join with empty a: '%s'", q ? q : "(null)");
	CHECK(r && !strcmp(r, "a"), "join with empty b: '%s'", r ? r : "(null)");
	free(p);
	free(q);
	free(r);
}

/* ck_open_dir_beneath: paths longer than PATH_MAX, never through a link. */
static void beneath(void)
{
	char name[256], rel[8192] = "";
	int rootfd = open(root, O_PATH | O_DIRECTORY), fd, cur;
	struct stat a, b;

	SETUP(rootfd >= 0);
	memset(name, 'x', 250);
	name[250] = '\0';
	cur = dup(rootfd);
	for (int i = 0; i < 24; i++) {
		int next;

		SETUP(mkdirat(cur, name, 0755) == 0);
		next = openat(cur, name, O_PATH | O_DIRECTORY);
		SETUP(next >= 0);
		close(cur);
		cur = next;
		strcat(rel, i ? "/" : "");
		strcat(rel, name);
	}
	fd = ck_open_dir_beneath(rootfd, rel);
	CHECK(fd >= 0 && fstat(fd, &a) == 0 && fstat(cur, &b) == 0 && a.st_ino == b.st_ino,
	      "a path of %zu bytes: %d", strlen(rel), fd);
	if (fd >= 0)
		close(fd);
	close(cur);
	fd = ck_open_dir_beneath(rootfd, "");
	CHECK(fd >= 0 && fstat(fd, &a) == 0 && fstat(rootfd, &b) == 0 && a.st_ino == b.st_ino, "\"\" is root");
	if (fd >= 0)
		close(fd);
	SETUP(symlinkat(".", rootfd, "dirlink") == 0);
	fd = ck_open_dir_beneath(rootfd, "dirlink");
	CHECK(fd == -ELOOP || fd == -ENOTDIR, "a link to a directory was followed: %d", fd);
	fd = ck_open_dir_beneath(rootfd, "dirlink/made");
	CHECK(fd == -ELOOP || fd == -ENOTDIR, "a link on the way was followed: %d", fd);
	CHECK(ck_open_dir_beneath(rootfd, "nothing") == -ENOENT, "a missing directory");
	close(rootfd);
}

int main(void)
{
	char cmd[600];

	SETUP(mkdtemp(root) != NULL);
	write_all();
	read_whole();
	replace();
	dirs();
	join();
	beneath();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
	return test_result();
}
