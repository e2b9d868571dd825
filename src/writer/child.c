/* Commit and deletion children.
 *
 * The store's commit and deletion write the index, which needs the store
 * open writable.  The view already holds the LMDB environment open
 * read-only in this process, and LMDB forbids opening one environment
 * twice in a process (its POSIX locks are per process: the second open
 * would take itself for the only user and reset the reader table).  So
 * they run in a child, as `ckptctl commit` would, and report through its
 * exit status.  The fork happens with the view's composite builds held
 * off and no file being parsed (ckw_indexer_fork): their threads could
 * hold an allocator lock the child would then wait for.
 *
 * A forked child of this multithreaded process allocates with the
 * parent's allocator state as it was at the fork; glibc's malloc takes
 * its locks around fork(), but AddressSanitizer's (GCC 12) does not, and
 * a child forked while a worker held one of its locks hung at its first
 * malloc.  In builds with ASan the child therefore execs the program's
 * own binary in a helper mode right away, calling nothing that allocates
 * between fork and exec (argv is built beforehand):
 *
 *   PROGRAM --commit-helper STORE SERIES STAGED FINAL [WAIT_MS]
 *   PROGRAM --delete-helper STORE SERIES NAME
 *
 * exit with the positive errno of the operation (0 on success).  The
 * helper commits without the parses kept from the last closes, so a
 * commit there re-reads its files.  It keeps the daemon's claim on
 * mount.lock, as a forked child shares it: a daemon killed
 * mid-commit leaves its child to finish alone, and the next writable
 * mount must wait for it (mountclaim.c) rather than recover the store
 * while that commit still moves files.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs/ingest.h"
#include "ckptfs/log.h"
#include "ckptfs/refs.h"
#include "ckptfs/store.h"
#include "child.h"
#include "indexer.h"

/* AddressSanitizer builds exec the helper (docs/design.md): GCC says so
 * with __SANITIZE_ADDRESS__, clang 14 only through __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define CHILD_EXECS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHILD_EXECS 1
#endif
#endif
#ifndef CHILD_EXECS
#define CHILD_EXECS 0
#endif

/* The child exits with an errno below this; from here on statuses read as
 * a kill (the crash test hook exits 137 "as kill -9 would"), and a reply
 * must never carry them as an errno. */
#define CHILD_KILLED 128

static int exit_code(int rc)
{
	return rc < 0 && -rc < CHILD_KILLED ? -rc : rc ? EIO : 0;
}

static void log_commit(const char *series, const char *staged, const char *final, int rc,
		       const struct ck_error *err)
{
	if (rc == -EBADMSG)
		ck_warn("%s/%s: not committed, moved to the quarantine: %s", series, staged, err->msg);
	else if (rc == -EALREADY || rc == -EBUSY)
		ck_info("%s/%s: %s", series, staged, err->msg);   /* another node's business */
	else if (rc)
		ck_warn("%s/%s: commit as %s failed: %s", series, staged, final,
			err->msg[0] ? err->msg : strerror(-rc));
	else
		ck_info("%s/%s: committed as %s", series, staged, final);
}

static void log_delete(const char *series, const char *name, int rc, const struct ck_error *err)
{
	if (rc < 0)
		ck_warn("%s/%s: cannot delete: %s", series, name, err->msg[0] ? err->msg : strerror(-rc));
	else
		ck_info("%s/%s: deleted", series, name);
}

int ck_writer_helper_wanted(int argc, char **argv)
{
	return argc > 1 && (strcmp(argv[1], "--commit-helper") == 0 || strcmp(argv[1], "--delete-helper") == 0);
}

static int commit_staged(const char *store, const char *series, const char *staged, const char *final,
			 unsigned wait_ms, struct ckw_indexer *ix)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc = ck_store_open(store, 0, &st, &err);

	if (rc == 0) {
		/* Files parsed at their last close are not read again. */
		rc = ck_store_commit_staged_with(st, series, staged, final, NULL, NULL,
						 ix ? ckw_indexer_find_in_child : NULL, ix, wait_ms, &err);
		ck_store_close(st);
	}
	log_commit(series, staged, final, rc, &err);
	return rc;
}

static int delete_checkpoint(const char *store, const char *series, const char *name)
{
	struct ck_error err = { { 0 } };
	int rc = ck_delete_checkpoint(store, series, name, NULL, NULL, NULL, NULL, NULL, &err);

	log_delete(series, name, rc, &err);
	return rc;
}

int ck_writer_helper_main(int argc, char **argv)
{
	ck_log_init("ckptfs", 0, CK_LOG_INFO);
	if (strcmp(argv[1], "--commit-helper") == 0 && (argc == 6 || argc == 7))
		return exit_code(commit_staged(argv[2], argv[3], argv[4], argv[5],
					       argc == 7 ? (unsigned)strtoul(argv[6], NULL, 10) : CK_WRITERS_COMMIT_WAIT_MS,
					       NULL));
	if (strcmp(argv[1], "--delete-helper") == 0 && argc == 5)
		return exit_code(delete_checkpoint(argv[2], argv[3], argv[4]));
	return EINVAL;
}

/* fork + execv of /proc/self/exe with "OP STORE A B [C [D]]": the parent
 * gets the pid, or -1 with errno. */
static pid_t spawn_helper(struct ck_writer *w, const char *op, const char *a, const char *b, const char *c,
			  const char *d)
{
	char self[PATH_MAX];
	const char *argv[8] = { "ckptfs", op, w->store, a, b, c, c ? d : NULL, NULL };
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0)
		return -1;
	self[n] = 0;
	pid = fork();
	if (pid == 0) {
		/* Only this child's descriptor loses FD_CLOEXEC (fcntl is async-signal-safe). */
		if (w->mount_lock >= 0 && fcntl(w->mount_lock, F_SETFD, 0) < 0)
			_exit(EIO);
		execv(self, (char *const *)argv);
		_exit(EIO);   /* no helper: the commit failed */
	}
	return pid;
}

/* First thing in a forked child: every descriptor but stdio and the mount
 * lock goes.  A flock belongs to the open file, which lives while any
 * process holds a descriptor of it: a copy kept here of one the parent
 * held locked at the fork (the index lock during a refresh, the writers
 * lock of a directory written meanwhile) would keep that lock after the
 * parent gave it up, and this child, opening the store, would wait for its
 * own copy.  The FUSE device goes too: a daemon killed during a commit
 * leaves no mount hanging on its child. */
static void close_inherited(int keep)
{
	if (keep > 3)
		close_range(3, (unsigned)keep - 1, 0);
	close_range(keep >= 3 ? (unsigned)keep + 1 : 3, ~0U, 0);
}

/* fork() with the indexer's table frozen and no composite build running. */
static pid_t fork_child(struct ck_writer *w)
{
	pid_t pid;

	ck_view_pause_builds(w->view);
	pid = ckw_indexer_fork(w->indexer);
	if (pid != 0)
		ck_view_resume_builds(w->view);
	return pid;
}

/* The child's wait status; 0 or -errno of waitpid. */
static int wait_child(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

int ckw_commit_in_child(struct ck_writer *w, const char *series, const char *staged, const char *final,
			unsigned wait_ms)
{
	char *dir = ck_staging_top_path(w->staging, series, staged);
	char wait_arg[16];
	int status, rc;
	pid_t pid;

	if (!dir)
		return -ENOMEM;
	snprintf(wait_arg, sizeof(wait_arg), "%u", wait_ms);
	/* A parse under way is finished rather than done twice. */
	ckw_indexer_wait(w->indexer, dir);
	pid = CHILD_EXECS ? spawn_helper(w, "--commit-helper", series, staged, final, wait_arg) : fork_child(w);
	if (pid < 0) {
		rc = -errno;
		free(dir);
		return rc;
	}
	if (pid == 0) {
		close_inherited(w->mount_lock);
		rc = commit_staged(w->store, series, staged, final, wait_ms, w->indexer);
		/* _exit: the child must not run the parent's atexit work. */
		_exit(exit_code(rc));
	}
	rc = wait_child(pid, &status);
	if (rc) {
		free(dir);
		return rc;
	}
	/* Committed or quarantined, the directory left; else it stays in
	 * progress and its files are parsed again at their next close. */
	ckw_indexer_forget(w->indexer, dir);
	free(dir);
	if (!WIFEXITED(status) || WEXITSTATUS(status) >= CHILD_KILLED)
		return -EIO;	/* killed mid-commit: recovery finishes it at the next writable open */
	rc = WEXITSTATUS(status);
	if (rc == EBADMSG)
		return -EIO;
	return -rc;
}

int ck_writer_delete(struct ck_writer *w, const char *series, const char *name)
{
	int status, rc;
	pid_t pid;

	pid = CHILD_EXECS ? spawn_helper(w, "--delete-helper", series, name, NULL, NULL) : fork_child(w);
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close_inherited(w->mount_lock);
		rc = delete_checkpoint(w->store, series, name);
		/* _exit: the child must not run the parent's atexit work. */
		_exit(rc < 0 && -rc < 256 ? -rc : rc ? EIO : 0);
	}
	rc = wait_child(pid, &status);
	if (rc)
		return rc;
	if (!WIFEXITED(status))
		return -EIO;   /* killed: the next writable open rolls the deletion forward */
	return -WEXITSTATUS(status);
}
