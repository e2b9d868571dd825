/* The in-progress namespace (include/ckptfs/writer_staging.h) without a
 * mount: nodes and their paths through renames and removals, inode
 * numbers never reused, open handles counted, hard links as names of one
 * node, a file reached through its handle once unlinked, paths longer
 * than PATH_MAX, no symbolic link followed on the way, and the claims of a commit:
 * EBUSY for writes into a claimed directory, for a second claim, and for
 * a claim that must wait for the last close; a lookup waiting for the
 * claim to go; the writers lock that other nodes' commits wait for. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/store.h"
#include "ckptfs/writer_staged_ops.h"
#include "ckptfs/writer_staging.h"
#include "testutil.h"

static char tmp[256];
static char store[300];

/* Whether name is among names[0..n). */
static int listed(char **names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return 1;
	return 0;
}

/* Whether STORE/rel exists. */
static int exists_rel(const char *rel)
{
	char p[600];
	struct stat sb;

	return lstat(pathf(p, sizeof(p), "%s/%s", store, rel), &sb) == 0;
}

static char *path_of(struct ck_staging *s, uint64_t ino, const char *child)
{
	char *p = NULL;

	return ck_staging_path(s, ino, child, &p) == 0 ? p : NULL;
}

static int path_is(struct ck_staging *s, uint64_t ino, const char *child, const char *rel)
{
	char want[600];
	char *p = path_of(s, ino, child);
	int same = p && strcmp(p, pathf(want, sizeof(want), "%s/staging/%s", store, rel)) == 0;

	if (!same)
		printf("path of %llx: %s, expected %s\n", (unsigned long long)ino, p ? p : "(none)", want);
	free(p);
	return same;
}

static void test_nodes(struct ck_staging *s)
{
	uint64_t series, top, sub, file, again, marker;
	char *a = NULL, *b = NULL, *p;

	SETUP(ck_staging_get(s, 0, "run", NULL, NULL, &series) == 0);
	SETUP(ck_staging_get(s, 0, "run", "tmp-5", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "sub", NULL, &sub) == 0);
	SETUP(ck_staging_get(s, sub, NULL, "model.bin", NULL, &file) == 0);
	SETUP(ck_staging_get(s, 0, "run", "latest", NULL, &marker) == 0);
	CHECK(ck_staging_is_staged(series) && ck_staging_is_staged(file) && !ck_staging_is_staged(1),
	      "staged inode numbers carry CK_STAGING_BIT");
	CHECK(series != top && top != sub && sub != file, "distinct nodes share a number");
	SETUP(ck_staging_get(s, 0, "run", "tmp-5", NULL, &again) == 0);
	CHECK(again == top, "a second lookup made a new node");
	SETUP(ck_staging_get(s, 0, "other", "tmp-5", NULL, &again) == 0);
	CHECK(again != top, "the same name in another series is another node");

	CHECK(path_is(s, series, NULL, "run"), "series path");
	CHECK(path_is(s, file, NULL, "run/tmp-5/sub/model.bin"), "file path");
	CHECK(path_is(s, top, "x", "run/tmp-5/x"), "child path");
	p = ck_staging_top_path(s, "", NULL);
	CHECK(p && strcmp(p + strlen(p) - 9, "/staging/") == 0, "the staging prefix is %s", p);
	free(p);

	CHECK(ck_staging_series(s, series, &a) == 0 && strcmp(a, "run") == 0, "series of the series node");
	free(a);
	CHECK(ck_staging_series(s, top, &a) == -EINVAL, "a top node is no series node");
	CHECK(ck_staging_top(s, top, &a, &b) == 0 && !strcmp(a, "run") && !strcmp(b, "tmp-5"), "top node");
	free(a);
	free(b);
	CHECK(ck_staging_top(s, file, &a, &b) == -EINVAL, "a file is no top node");
	CHECK(ck_staging_top_of(s, file, &a, &b) == 0 && !strcmp(a, "run") && !strcmp(b, "tmp-5"),
	      "the top directory a file is in");
	free(a);
	free(b);
	CHECK(ck_staging_top_of(s, series, &a, &b) == -EINVAL, "a series node is in no top directory");
	CHECK(ck_staging_is_series_file(s, marker) && ck_staging_is_series_file(s, top) &&
	      !ck_staging_is_series_file(s, file) && !ck_staging_is_series_file(s, series),
	      "nodes right under a series");

	/* A rename of the top directory: its subtree follows. */
	ck_staging_moved(s, 0, "run", "tmp-5", 0, "tmp-6", 0);
	CHECK(path_is(s, file, NULL, "run/tmp-6/sub/model.bin"), "subtree after a rename");
	CHECK(ck_staging_top_of(s, file, &a, &b) == 0 && !strcmp(b, "tmp-6"), "top after a rename");
	free(a);
	free(b);
	/* A rename into another directory, over an existing node. */
	SETUP(ck_staging_get(s, top, NULL, "other.bin", NULL, &again) == 0);
	ck_staging_moved(s, sub, NULL, "model.bin", top, "other.bin", 0);
	CHECK(path_is(s, file, NULL, "run/tmp-6/other.bin"), "a moved file");
	CHECK(ck_staging_path(s, again, NULL, &p) == -ESTALE, "the node renamed over keeps a path");
	/* Forgotten and nameless: gone, and its number is never given again. */
	ck_staging_forget(s, again, 1);
	CHECK(ck_staging_path(s, again, NULL, &p) == -ESTALE, "a forgotten node has a path");
	SETUP(ck_staging_get(s, top, NULL, "other.bin.2", NULL, &sub) == 0);
	CHECK(sub != again, "a forgotten number came back");

	/* Removed, but still looked up: stale until forgotten. */
	ck_staging_removed(s, top, NULL, "other.bin");
	CHECK(ck_staging_path(s, file, NULL, &p) == -ESTALE, "a removed node has a path");
	CHECK(ck_staging_open_begin(s, file, 0) == 0, "a removed node still counts handles");
	CHECK(ck_staging_open_end(s, file, 0) == 0, "handles left");
	ck_staging_forget(s, file, 1);
	CHECK(ck_staging_open_begin(s, file, 0) == -ESTALE, "a forgotten node took a handle");
	CHECK(ck_staging_open_begin(s, CK_STAGING_BIT | 999999, 0) == -ESTALE, "an unknown node took a handle");
}

struct waiter {
	struct ck_staging *s;
	atomic_int released;    /* set just before the unclaim */
	atomic_int saw_release;
	int rc;
};

static void *wait_claim(void *arg)
{
	struct waiter *w = arg;

	w->rc = ck_staging_wait_unclaimed(w->s, "run", "checkpoint-7");
	w->saw_release = atomic_load(&w->released);
	return NULL;
}

static void test_claims(struct ck_staging *s)
{
	uint64_t top, file, other;
	struct waiter w = { .s = s };
	pthread_t t;
	char **names;
	size_t n;

	SETUP(ck_staging_get(s, 0, "run", "checkpoint-7", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "model.bin", NULL, &file) == 0);
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-8", NULL, &other) == 0);

	/* A handle open in the directory: a claim that needs it closed waits. */
	CHECK(ck_staging_open_begin(s, file, 1) == 0, "open for writing");
	CHECK(ck_staging_open_begin(s, file, 0) == 0, "open for reading");
	CHECK(ck_staging_claim(s, "run", "checkpoint-7", 1) == -EBUSY, "claimed with a handle open");
	CHECK(ck_staging_open_end(s, file, 1) == 1, "one handle left");
	CHECK(ck_staging_claim(s, "run", "checkpoint-7", 1) == -EBUSY, "claimed with the last handle open");
	CHECK(!ck_staging_busy(s, file), "a refused claim marked the directory");
	/* A rename commit claims whatever is open. */
	CHECK(ck_staging_claim(s, "run", "checkpoint-7", 0) == 0, "a rename commit's claim");
	CHECK(ck_staging_busy(s, file) && ck_staging_busy(s, top), "claimed but not busy");
	CHECK(!ck_staging_busy(s, other), "a claim spilled to another directory");
	CHECK(ck_staging_claim(s, "run", "checkpoint-7", 0) == -EBUSY, "claimed twice");
	CHECK(ck_staging_open_begin(s, file, 1) == -EBUSY, "opened for writing while claimed");
	CHECK(ck_staging_open_begin(s, file, 0) == 0, "opened for reading while claimed");
	CHECK(ck_staging_open_end(s, file, 0) == 1, "handles");
	CHECK(ck_staging_claimed(s, "run", &names, &n) == 0 && n == 1 && !strcmp(names[0], "checkpoint-7"),
	      "the claimed names of run");
	ck_strv_free(names, n);
	CHECK(ck_staging_claimed(s, "other", &names, &n) == 0 && n == 0, "claims of another series");
	ck_strv_free(names, n);
	/* Every top node known, claimed or not, and nothing below one. */
	CHECK(ck_staging_tops(s, "run", &names, &n) == 0 && listed(names, n, "checkpoint-7") &&
	      listed(names, n, "checkpoint-8") && !listed(names, n, "model.bin") && !listed(names, n, "run"),
	      "the top nodes of run");
	ck_strv_free(names, n);
	CHECK(ck_staging_tops(s, "other", &names, &n) == 0 && n == 1 && !strcmp(names[0], "tmp-5"),
	      "the top nodes of another series");
	ck_strv_free(names, n);
	CHECK(ck_staging_wait_unclaimed(s, "run", "checkpoint-8") == 0, "waited for an unclaimed directory");

	/* A lookup waits for the claim to go. */
	SETUP(pthread_create(&t, NULL, wait_claim, &w) == 0);
	atomic_store(&w.released, 1);
	ck_staging_unclaim(s, "run", "checkpoint-7");
	pthread_join(t, NULL);
	CHECK(w.saw_release, "the wait ended before the unclaim");
	CHECK(!ck_staging_busy(s, file), "still busy after the unclaim");
	CHECK(ck_staging_open_end(s, file, 0) == 0, "handles left");
	CHECK(ck_staging_claim(s, "run", "checkpoint-7", 1) == 0, "a claim once closed");
	ck_staging_unclaim(s, "run", "checkpoint-7");

	/* A directory never looked up has nothing open: the claim marks nothing. */
	CHECK(ck_staging_claim(s, "run", "never-seen", 1) == 0, "claim of an unknown directory");
	CHECK(ck_staging_claimed(s, "run", &names, &n) == 0 && n == 0, "an unknown directory was marked");
	ck_strv_free(names, n);
	ck_staging_unclaim(s, "run", "never-seen");
}

/* Whether a commit on another node could take run/name's writers lock now. */
static int committable(const char *name)
{
	int fd, rc = ck_writers_exclusive(store, "run", name, 0, &fd, NULL);

	ck_writers_unlock(fd);
	return rc == 0;
}

/* Other nodes' commits: the writers lock of a top directory is held
 * shared from its first handle open for writing to the last close, not
 * for readers or series markers; a directory a commit holds elsewhere
 * refuses writers (EBUSY); a rename commit's own handles give it up. */
static void test_writers(struct ck_staging *s)
{
	uint64_t top, a, b, marker;
	int ex;

	SETUP(ck_staging_mkdir(s, "run", "checkpoint-30", 0755) == 0);
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-30", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "a.bin", NULL, &a) == 0);
	SETUP(ck_staging_get(s, top, NULL, "b.bin", NULL, &b) == 0);
	SETUP(ck_staging_get(s, 0, "run", "latest", NULL, &marker) == 0);
	CHECK(ck_staging_open_begin(s, a, 0) == 0 && committable("checkpoint-30"), "a reader holds the lock");
	CHECK(ck_staging_open_begin(s, a, 1) == 0 && !committable("checkpoint-30"), "a writer does not");
	CHECK(ck_staging_open_begin(s, b, 1) == 0, "a second writer");
	ck_staging_open_end(s, a, 1);
	CHECK(!committable("checkpoint-30"), "a writer left, but the lock is free");
	ck_staging_open_end(s, b, 1);
	CHECK(committable("checkpoint-30"), "the last writer kept the lock");
	ck_staging_open_end(s, a, 0);
	CHECK(ck_staging_open_begin(s, marker, 1) == 0 && !exists_rel("writers/run/latest"),
	      "a series marker took a writers lock");
	ck_staging_open_end(s, marker, 1);

	/* Being committed on another node. */
	SETUP(ck_writers_exclusive(store, "run", "checkpoint-30", 0, &ex, NULL) == 0);
	CHECK(ck_staging_open_begin(s, a, 1) == -EBUSY, "a writer while another node commits");
	CHECK(ck_staging_open_begin(s, a, 0) == 0, "a reader while another node commits");
	ck_staging_open_end(s, a, 0);
	ck_writers_unlock(ex);

	/* A rename commit of this process. */
	CHECK(ck_staging_open_begin(s, a, 1) == 0, "a writer");
	ck_staging_writers_off(s, "run", "checkpoint-30");
	CHECK(committable("checkpoint-30"), "the lock is still held for the commit");
	ck_staging_writers_on(s, "run", "checkpoint-30");
	CHECK(!committable("checkpoint-30"), "not held again after a commit that failed");
	ck_staging_open_end(s, a, 1);
	CHECK(committable("checkpoint-30"), "held after the last close");
}

static void test_disk(struct ck_staging *s)
{
	struct ck_staged_dir *d, *leak;
	char p[600];
	struct stat sb;
	uint64_t ino;

	CHECK(ck_staging_mkdir(s, "new", NULL, 0750) == 0, "mkdir of a series (and STORE/staging)");
	CHECK(stat(pathf(p, sizeof(p), "%s/staging/new", store), &sb) == 0 && S_ISDIR(sb.st_mode), "no series dir");
	CHECK(ck_staging_mkdir(s, "run", "checkpoint-9", 0700) == 0, "mkdir of a directory in a new series");
	CHECK(stat(pathf(p, sizeof(p), "%s/staging/run/checkpoint-9", store), &sb) == 0 &&
	      (sb.st_mode & 0777) == 0700, "mode of the new directory");
	CHECK(ck_staging_mkdir(s, "run", "checkpoint-9", 0700) == -EEXIST, "mkdir twice");
	SETUP(ck_staging_get(s, 0, "run", NULL, NULL, &ino) == 0);
	CHECK(ck_staging_opendir(s, ino, &d) == 0 && ck_staged_dir_stream(d), "opendir");
	ck_staging_closedir(s, d);
	CHECK(ck_staging_opendir(s, ino, &leak) == 0, "opendir");   /* closed by ck_staging_free */
	SETUP(ck_staging_get(s, 0, "run", "nothing", NULL, &ino) == 0);
	CHECK(ck_staging_opendir(s, ino, &d) == -ENOENT, "opendir of nothing");
}

/* Makes name in directory node dir through the *at calls: a file, or a
 * directory when is_dir; its node. */
static uint64_t make(struct ck_staging *s, uint64_t dir, const char *name, int is_dir)
{
	struct ck_staged_at at;
	struct stat st;
	uint64_t ino = 0;

	SETUP(ck_staging_at(s, dir, name, &at) == 0);
	if (is_dir)
		SETUP(mkdirat(at.dir, at.name, 0755) == 0);
	else
		close(openat(at.dir, at.name, O_CREAT | O_EXCL | O_WRONLY, 0644));
	SETUP(fstatat(at.dir, at.name, &st, AT_SYMLINK_NOFOLLOW) == 0);
	ck_staging_at_free(&at);
	SETUP(ck_staging_get(s, dir, NULL, name, &st, &ino) == 0);
	return ino;
}

static void test_links(struct ck_staging *s)
{
	uint64_t top, a, b, again;
	struct ck_staged_at at;
	struct stat st;

	SETUP(ck_staging_mkdir(s, "links", "tmp-1", 0755) == 0);
	SETUP(ck_staging_get(s, 0, "links", "tmp-1", NULL, &top) == 0);
	a = make(s, top, "a", 0);
	SETUP(ck_staging_at(s, top, "b", &at) == 0);
	CHECK(ck_staged_link(s, a, &at) == 0, "link");
	ck_staging_at_free(&at);
	CHECK(ck_staging_linked(s, a, top, "b") == 0, "the new name recorded");
	SETUP(ck_staging_get(s, top, NULL, "b", NULL, &b) == 0);
	CHECK(b == a, "a link is another node");
	CHECK(ck_staged_stat(s, a, &st) == 0 && st.st_nlink == 2, "links: %lu", (unsigned long)st.st_nlink);
	/* rename(2) of one link over the other does nothing. */
	ck_staging_moved(s, top, NULL, "a", top, "b", 0);
	CHECK(path_is(s, a, NULL, "links/tmp-1/a"), "a rename of a link over its twin moved it");
	/* One name goes: the other still names the node. */
	SETUP(ck_staging_at(s, top, "a", &at) == 0 && unlinkat(at.dir, at.name, 0) == 0);
	ck_staging_at_free(&at);
	ck_staging_removed(s, top, NULL, "a");
	CHECK(path_is(s, a, NULL, "links/tmp-1/b"), "the other name after an unlink");
	/* A link made before the table knew the file: found by its identity. */
	SETUP(ck_staging_at(s, top, "c", &at) == 0);
	SETUP(linkat(at.dir, "b", at.dir, "c", 0) == 0);
	SETUP(fstatat(at.dir, "c", &st, AT_SYMLINK_NOFOLLOW) == 0);
	ck_staging_at_free(&at);
	CHECK(ck_staging_get(s, top, NULL, "c", &st, &again) == 0 && again == a, "a link found by lookup is another node");
	/* An exchange swaps the names. */
	b = make(s, top, "x", 0);
	ck_staging_moved(s, top, NULL, "x", top, "c", 1);
	CHECK(path_is(s, b, NULL, "links/tmp-1/c"), "exchange: the source");
	CHECK(ck_staging_get(s, top, NULL, "x", NULL, &again) == 0 && again == a, "exchange: the destination");
}

/* A file whose names are gone is still reached through its open handle. */
static void test_held(struct ck_staging *s)
{
	uint64_t top, f;
	struct ck_staged_set trunc = { .what = CK_SET_SIZE, .size = 3 };
	struct ck_cred root = { 0, 0, NULL, 0 };
	struct ck_staged_at at;
	struct stat st;
	int fd;

	SETUP(ck_staging_mkdir(s, "held", "tmp-1", 0755) == 0);
	SETUP(ck_staging_get(s, 0, "held", "tmp-1", NULL, &top) == 0);
	f = make(s, top, "f", 0);
	SETUP(ck_staging_open_begin(s, f, 1) == 0);
	fd = ck_staged_open(s, f, O_RDWR);
	SETUP(fd >= 0 && write(fd, "hello", 5) == 5);
	ck_staging_hold(s, f, fd);
	SETUP(ck_staging_at(s, top, "f", &at) == 0 && unlinkat(at.dir, at.name, 0) == 0);
	ck_staging_at_free(&at);
	ck_staging_removed(s, top, NULL, "f");
	CHECK(ck_staged_stat(s, f, &st) == 0 && st.st_size == 5 && st.st_nlink == 0, "stat of an unlinked open file");
	CHECK(ck_staged_setattr(s, f, -1, &root, &trunc) == 0 && ck_staged_stat(s, f, &st) == 0 && st.st_size == 3,
	      "truncate of an unlinked open file");
	CHECK(ck_staged_setxattr(s, f, "user.k", "v", 1, 0) == 0 && ck_staged_getxattr(s, f, "user.k", NULL, 0) == 1,
	      "xattrs of an unlinked open file");
	close(fd);
	CHECK(ck_staging_open_end(s, f, 1) == 0, "handles left");
	CHECK(ck_staged_stat(s, f, &st) == -ESTALE, "stat without a name or a handle");
}

/* Paths longer than one system call takes; a symbolic link on the way is
 * never followed. */
static void test_long_and_symlinks(struct ck_staging *s)
{
	char name[201], *p = NULL;
	uint64_t dir, f;
	struct ck_staged_at at;
	struct stat st;

	memset(name, 'd', 200);
	name[200] = '\0';
	SETUP(ck_staging_mkdir(s, "deep", "tmp-1", 0755) == 0);
	SETUP(ck_staging_get(s, 0, "deep", "tmp-1", NULL, &dir) == 0);
	for (int i = 0; i < 25; i++)
		dir = make(s, dir, name, 1);
	f = make(s, dir, "f", 0);
	CHECK(ck_staging_path(s, f, NULL, &p) == 0 && strlen(p) > 5000, "path of %zu bytes", p ? strlen(p) : 0);
	free(p);
	CHECK(ck_staged_stat(s, f, &st) == 0 && S_ISREG(st.st_mode), "stat 25 levels down");

	/* A directory replaced by a symbolic link behind the table's back. */
	SETUP(ck_staging_mkdir(s, "sym", "tmp-1", 0755) == 0);
	SETUP(ck_staging_get(s, 0, "sym", "tmp-1", NULL, &dir) == 0);
	dir = make(s, dir, "sub", 1);
	f = make(s, dir, "f", 0);
	SETUP(ck_staging_top_at(s, "sym", "tmp-1", &at) == 0);
	SETUP(unlinkat(at.dir, "tmp-1/sub/f", 0) == 0 && unlinkat(at.dir, "tmp-1/sub", AT_REMOVEDIR) == 0);
	SETUP(symlinkat("/etc", at.dir, "tmp-1/sub") == 0);
	ck_staging_at_free(&at);
	CHECK(ck_staging_at(s, f, NULL, &at) < 0, "a symbolic link was followed to the node's directory");
	ck_staging_at_free(&at);
}

int main(void)
{
	struct ck_staging *s;
	char cmd[400];
	const char *t = getenv("TMPDIR");

	pathf(tmp, sizeof(tmp), "%s/t_writer_staging.XXXXXX", t && *t ? t : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(mkdir(store, 0755) == 0);
	SETUP(ck_staging_new(store, &s) == 0);
	test_nodes(s);
	test_claims(s);
	test_disk(s);
	test_writers(s);
	test_links(s);
	test_held(s);
	test_long_and_symlinks(s);
	ck_staging_free(s);
	SETUP(run_command(pathf(cmd, sizeof(cmd), "rm -rf '%s'", tmp), NULL) == 0);
	return test_result();
}
