/* Staged commits through the store's API, without torch: a staged
 * directory of real fixture files commits into STORE/data; torn ones (a
 * short safetensors, incomplete DCP directories, a fifo) are
 * quarantined with a REASON line per problem and the series is unchanged;
 * names without a step and committed names are refused with the staged
 * directory left alone; a commit cut short after its rename (simulated),
 * leftover temporary manifests and a quarantined directory without its
 * REASON are put right by the next writable open; two committers of one
 * directory (two daemons, two nodes) commit it exactly once; a commit waits
 * for writers of the directory elsewhere (its writers lock). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckptfs/store.h"
#include "testutil.h"

static char tmp[256];
static char store[300];
static const char *fixture;   /* a valid safetensors file */

/* A pickle (protocol 2) of {'relative_path': '__0_0.distcp'}: what a DCP
 * .metadata says of the data file holding a tensor. */

/* Whether STORE/rel exists. */
static int exists(const char *rel)
{
	char p[1024];
	struct stat sb;

	return lstat(pathf(p, sizeof(p), "%s/%s", store, rel), &sb) == 0;
}

/* STORE/staging/run/<name>/ with model.safetensors (cut by `cut` bytes) and config.json. */
static void stage(const char *name, size_t cut)
{
	char dir[512], p[600];
	size_t n;
	uint8_t *data = read_file(fixture, &n);

	SETUP(data && n > cut);
	pathf(dir, sizeof(dir), "%s/staging/run/%s", store, name);
	pathf(p, sizeof(p), "mkdir -p '%s'", dir);
	SETUP(run_command(p, NULL) == 0);
	write_bytes(pathf(p, sizeof(p), "%s/model.safetensors", dir), data, n - cut);
	write_bytes(pathf(p, sizeof(p), "%s/config.json", dir), "{}\n", 3);
	free(data);
}

static size_t count_checkpoints(struct ck_store *st, const char *last)
{
	struct ck_ckpt_info *c;
	size_t n;

	if (ck_store_list_checkpoints(st, "run", &c, &n) < 0)
		return (size_t)-1;
	CHECK(!last || (n && strcmp(c[n - 1].name, last) == 0), "newest is %s, expected %s", n ? c[n - 1].name : "-",
	      last);
	ck_ckpt_info_free(c, n);
	return n;
}

/* Commits run/name; expects rc, and for -EBADMSG a quarantine whose REASON holds why. */
static void commit(struct ck_store *st, const char *name, const char *final, int want, const char *why)
{
	struct ck_quarantine_info *q;
	struct ck_error err = { { 0 } };
	char rel[512];
	size_t n, i;
	int rc = ck_store_commit_staged(st, "run", name, final, NULL, NULL, &err);
	int found = 0;

	CHECK(rc == want, "commit %s: %d (%s), expected %d", name, rc, err.msg, want);
	if (want != -EBADMSG)
		return;
	CHECK(strstr(err.msg, why) != NULL, "commit %s: error '%s' does not say '%s'", name, err.msg, why);
	CHECK(!exists(pathf(rel, sizeof(rel), "staging/run/%s", name)), "%s still staged after its quarantine", name);
	SETUP(ck_store_list_quarantine(st, &q, &n) == 0);
	for (i = 0; i < n; i++) {
		if (strncmp(q[i].name, name, strlen(name)) == 0 && q[i].name[strlen(name)] == '.') {
			found = 1;
			CHECK(strstr(q[i].reason, why) != NULL, "REASON of %s: '%s' lacks '%s'", name, q[i].reason, why);
		}
	}
	CHECK(found, "%s is not in the quarantine", name);
	ck_quarantine_info_free(q, n);
}

static void test_commit_and_quarantine(struct ck_store *st)
{
	struct ck_error err = { { 0 } };
	struct ck_ckpt_info *c;
	struct ck_file_info *f;
	char p[600], *path;
	size_t n, i;

	path = ck_store_staging_path(st, "run", "x");
	CHECK(path && strcmp(path, pathf(p, sizeof(p), "%s/staging/run/x", store)) == 0, "staging path %s", path);
	free(path);
	errno = 0;
	CHECK(!ck_store_staging_path(st, "run", "..") && errno == EINVAL, "'..' made a staging path");
	CHECK(!ck_store_staging_path(st, "a/b", NULL) && errno == EINVAL, "'a/b' made a staging path");

	stage("tmp-5", 0);
	commit(st, "tmp-5", "checkpoint-5", 0, NULL);
	CHECK(exists("data/run/checkpoint-5/model.safetensors"), "checkpoint-5 not in data/");
	CHECK(!exists("staging/run/tmp-5"), "tmp-5 still staged");
	CHECK(exists("manifests/run/checkpoint-5.manifest"), "no manifest");
	SETUP(ck_store_find_checkpoint(st, "run", "checkpoint-5", &c) == 0);
	CHECK(c->step == 5 && strstr(c->src_path, "/data/run/checkpoint-5"), "checkpoint-5: step %lld from %s",
	      (long long)c->step, c->src_path);
	SETUP(ck_store_list_files(st, c->id, &f, &n) == 0);
	CHECK(n == 2, "%zu files", n);
	for (i = 0; i < n; i++) {
		CHECK(strstr(f[i].src_path, "/data/run/checkpoint-5/"), "file at %s", f[i].src_path);
		CHECK(f[i].kind != CK_FILE_BAD, "%s: %s", f[i].relpath, f[i].error);
		CHECK(ck_file_check(&f[i], &err) == 0, "%s", err.msg);
	}
	ck_file_info_free(f, n);
	ck_ckpt_info_free(c, 1);

	stage("checkpoint-6", 10);
	commit(st, "checkpoint-6", NULL, -EBADMSG, "model.safetensors: ");

	stage("checkpoint-7", 0);
	write_bytes(pathf(p, sizeof(p), "%s/staging/run/checkpoint-7/__0_0.distcp", store), "data", 4);
	commit(st, "checkpoint-7", NULL, -EBADMSG, "__0_0.distcp: DCP data file without a .metadata");

	stage("checkpoint-8", 0);
	SETUP(mkdir(pathf(p, sizeof(p), "%s/staging/run/checkpoint-8/dcp", store), 0755) == 0);
	{
		const char *src = getenv("CKPT_SRCDIR") ? getenv("CKPT_SRCDIR") : ".";
		uint8_t *md = read_file(pathf(p, sizeof(p), "%s/tests/unit/data/dcp/layout24-2rank-step20.metadata", src),
					&n);

		SETUP(md);
		write_bytes(pathf(p, sizeof(p), "%s/staging/run/checkpoint-8/dcp/.metadata", store), md, n);
		free(md);
	}
	commit(st, "checkpoint-8", NULL, -EBADMSG, "dcp/.metadata: 'optim.param_groups.0.lr' is stored in "
						   "__0_0.distcp, which is not there");

	stage("checkpoint-9", 0);
	write_bytes(pathf(p, sizeof(p), "%s/staging/run/checkpoint-9/.metadata", store), "\x80\x02}q", 4);
	commit(st, "checkpoint-9", NULL, -EBADMSG, ".metadata: not a valid DCP .metadata: pickle: ");

	stage("checkpoint-10", 0);
	SETUP(mkfifo(pathf(p, sizeof(p), "%s/staging/run/checkpoint-10/pipe", store), 0644) == 0);
	commit(st, "checkpoint-10", NULL, -EBADMSG, "pipe: a special file");
	CHECK(count_checkpoints(st, "checkpoint-5") == 1, "torn checkpoints were listed");

	/* A complete DCP directory commits. */
	stage("checkpoint-11", 0);
	for (int k = 0; k < 2; k++) {
		static const char *const names[2] = { ".metadata", "__0_0.distcp" };
		const char *src = getenv("CKPT_SRCDIR") ? getenv("CKPT_SRCDIR") : ".";
		uint8_t *b = read_file(pathf(p, sizeof(p), "%s/tests/unit/data/dcp/one-tensor/%s", src, names[k]), &n);

		SETUP(b);
		write_bytes(pathf(p, sizeof(p), "%s/staging/run/checkpoint-11/%s", store, names[k]), b, n);
		free(b);
	}
	commit(st, "checkpoint-11", NULL, 0, NULL);
	CHECK(count_checkpoints(st, "checkpoint-11") == 2, "checkpoint-11 not listed");
}

static void test_refusals(struct ck_store *st)
{
	stage("latest", 0);
	commit(st, "latest", NULL, -EINVAL, NULL);
	commit(st, "latest", "checkpoint-5", -EEXIST, NULL);
	commit(st, "latest", "checkpoint-", -EINVAL, NULL);
	commit(st, "nothing", "checkpoint-12", -ENOENT, NULL);
	CHECK(exists("staging/run/latest/model.safetensors"), "a refused commit moved the staged dir");
	commit(st, "latest", "checkpoint-12", 0, NULL);
}

/* A committer of run/NAME as FINAL in a child process, which exits 0 when
 * the commit returned want (pause: it waits at "validated" until the
 * file the hook makes is removed). */
static pid_t committer(const char *name, const char *final, int want, const char *pause)
{
	pid_t pid = fork();

	SETUP(pid >= 0);
	if (pid == 0) {
		struct ck_error err = { { 0 } };
		struct ck_store *mine;
		int rc;

		if (pause) {
			setenv("CKPT_TEST_PAUSE_AT", "validated", 1);
			setenv("CKPT_TEST_PAUSE_FILE", pause, 1);
		}
		if (ck_store_open(store, 0, &mine, &err) < 0)
			_exit(2);
		rc = ck_store_commit_staged(mine, "run", name, final, NULL, NULL, &err);
		ck_store_close(mine);
		if (rc != want)
			fprintf(stderr, "commit of %s: %d (%s), expected %d\n", name, rc, err.msg, want);
		_exit(rc == want ? 0 : 1);
	}
	return pid;
}

static int exited_0(pid_t pid)
{
	int status = 0;

	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Two committers of one directory (two daemons, two nodes): the first
 * validates run/twice and waits there (the test hook) holding its writers
 * lock; the second, started then, waits for the lock, and finds it
 * committed (-EALREADY).  The series has it once. */
static void test_commit_once(struct ck_store *st)
{
	char pause[600];
	size_t before = count_checkpoints(st, NULL);
	pid_t first, second;

	stage("twice", 0);
	pathf(pause, sizeof(pause), "%s/pause", tmp);
	first = committer("twice", "checkpoint-40", 0, pause);
	for (int i = 0; i < 600 && access(pause, F_OK) < 0; i++)
		usleep(50000);
	CHECK(access(pause, F_OK) == 0, "the first committer never reached its pause");
	second = committer("twice", "checkpoint-40", -EALREADY, NULL);
	usleep(300000);
	CHECK(exists("staging/run/twice"), "the second committer did not wait for the first");
	unlink(pause);
	CHECK(exited_0(first), "the first committer did not commit");
	CHECK(exited_0(second), "the second committer did not find the directory committed (-EALREADY)");
	CHECK(count_checkpoints(st, "checkpoint-40") == before + 1, "checkpoint-40 not committed once");
	CHECK(!exists("writers/run/twice"), "the writers lock of a committed directory is left");
}

/* Writers on other nodes (ck_writers_*): a commit waits for every shared
 * holder of the directory's writers lock and gives up with -EBUSY,
 * leaving it staged; a writer cannot take the lock while a commit holds
 * it, and a wait for the commit ends only when it gives the lock up; a
 * sweep removes only free locks of directories no longer staged. */
static void test_writers(struct ck_store *st)
{
	struct ck_error err = { { 0 } };
	int a, b, ex, fd;

	stage("shared", 0);
	SETUP(ck_writers_share(store, "run", "shared", &a, &err) == 0);
	CHECK(ck_writers_share(store, "run", "shared", &b, &err) == 0, "two writers: %s", err.msg);
	CHECK(ck_store_commit_staged_with(st, "run", "shared", "checkpoint-41", NULL, NULL, NULL, NULL, 100, &err) ==
	      -EBUSY, "committed while files are open for writing elsewhere");
	CHECK(strstr(err.msg, "open for writing"), "the refusal says: %s", err.msg);
	CHECK(exists("staging/run/shared/model.safetensors"), "a refused commit moved the directory");
	ck_writers_unlock(a);
	CHECK(ck_writers_exclusive(store, "run", "shared", 0, &ex, &err) == -EBUSY, "exclusive with a writer left");
	ck_writers_unlock(b);
	commit(st, "shared", "checkpoint-41", 0, NULL);
	CHECK(!exists("writers/run/shared"), "the writers lock outlived its directory");

	stage("committing", 0);
	SETUP(ck_writers_exclusive(store, "run", "committing", 0, &ex, &err) == 0);
	CHECK(ck_writers_share(store, "run", "committing", &fd, &err) == -EBUSY,
	      "a writer took the lock of a directory being committed");
	CHECK(ck_writers_exclusive(store, "run", "committing", 0, &fd, &err) == -EBUSY, "two commits at once");
	CHECK(ck_writers_wait(store, "run", "committing", 50) == -EBUSY, "a wait ended while a commit held the lock");
	ck_writers_unlock(ex);
	CHECK(ck_writers_share(store, "run", "committing", &fd, &err) == 0, "no writer after the commit: %s",
	      err.msg);
	CHECK(ck_writers_wait(store, "run", "committing", 0) == 0, "a writer's shared lock held up a wait");
	ck_writers_unlock(fd);
	CHECK(ck_writers_wait(store, "run", "never", 0) == 0, "a wait for a directory nobody locked");
	CHECK(!exists("writers/run/never"), "a wait made a lock file");

	/* Left behind by processes killed after their commit. */
	SETUP(ck_writers_share(store, "run", "gone", &fd, &err) == 0);
	ck_writers_unlock(fd);
	SETUP(ck_writers_share(store, "run", "held", &fd, &err) == 0);
	CHECK(exists("writers/run/gone") && exists("writers/run/held"), "no lock files");
	ck_writers_sweep(store);
	CHECK(!exists("writers/run/gone"), "a free lock of a directory not staged was kept");
	CHECK(exists("writers/run/held"), "a held lock was swept");
	CHECK(exists("writers/run/committing"), "the lock of a staged directory was swept");
	ck_writers_unlock(fd);
	CHECK(ck_writers_share(store, "run", "bad/name", &fd, &err) == -EINVAL, "a path as a directory name");
}

static void test_recovery(void)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char a[600], b[600];

	/* A commit that stopped right after its rename. */
	stage("checkpoint-20", 0);
	SETUP(rename(pathf(a, sizeof(a), "%s/staging/run/checkpoint-20", store),
		     pathf(b, sizeof(b), "%s/data/run/checkpoint-20", store)) == 0);
	write_bytes(pathf(a, sizeof(a), "%s/manifests/run/checkpoint-20.manifest.tmp.4242", store), "torn", 4);
	SETUP(mkdir(pathf(a, sizeof(a), "%s/quarantine/run/torn.20260101T000000Z", store), 0755) == 0);

	SETUP(ck_store_open(store, 1, &st, &err) == 0);
	CHECK(count_checkpoints(st, "checkpoint-12") == 3, "a read-only open recovered");
	CHECK(ck_store_recover(st, NULL, NULL, &err) == -EROFS, "recovery in a read-only store");
	CHECK(ck_store_commit_staged(st, "run", "x", "checkpoint-30", NULL, NULL, &err) == -EROFS,
	      "commit in a read-only store");
	ck_store_close(st);

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	CHECK(count_checkpoints(st, "checkpoint-20") == 4, "checkpoint-20 not recovered");
	CHECK(exists("manifests/run/checkpoint-20.manifest"), "no manifest after recovery");
	CHECK(!exists("manifests/run/checkpoint-20.manifest.tmp.4242"), "temporary manifest left");
	CHECK(exists("quarantine/run/torn.20260101T000000Z/REASON"), "no REASON after recovery");
	CHECK(ck_store_recover(st, NULL, NULL, &err) == 0, "a second recovery found work: %s", err.msg);
	ck_store_close(st);
}

int main(void)
{
	const char *fixtures = test_fixtures();
	static char fx[512];
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char cmd[600];

	fixture = fixtures ? pathf(fx, sizeof(fx), "%s/safetensors/burn_mnist.safetensors", fixtures) : NULL;
	if (!fixture || access(fixture, R_OK) != 0) {
		printf("SKIP: no fixture %s\n", fixture ? fixture : "(CKPT_FIXTURES unset)");
		return 77;
	}
	pathf(tmp, sizeof(tmp), "%s/t_commit_staged.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(ck_store_init(store, &err) == 0);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	test_commit_and_quarantine(st);
	test_refusals(st);
	ck_store_close(st);
	test_recovery();
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	test_commit_once(st);
	test_writers(st);
	ck_store_close(st);
	SETUP(run_command(pathf(cmd, sizeof(cmd), "rm -rf '%s'", tmp), NULL) == 0);
	return test_result();
}
