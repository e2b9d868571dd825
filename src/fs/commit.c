/* Committing an in-progress directory from the mount.
 *
 * The store's commit (ck_store_commit_staged) writes the index, which needs
 * the store open writable.  The view already holds the LMDB environment
 * open read-only in this process, and LMDB forbids opening one
 * environment twice in a process (its POSIX locks are per process: the
 * second open would take itself for the only user and reset the reader
 * table).  So the commit runs in a forked child, as `ckptctl commit`
 * would, and reports through its exit status.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs.h"
#include "ckptfs/store.h"
#include "delete.h"

pid_t ckfs_fork(struct ckfs *fs)
{
	pid_t pid;

	ck_view_pause_builds(fs->view);
	pid = ckfs_indexer_fork(fs->indexer);
	if (pid != 0)
		ck_view_resume_builds(fs->view);
	return pid;
}

void ckfs_log_commit(const char *series, const char *staged, const char *final, int rc,
		     const struct ck_error *err)
{
	if (rc == -EBADMSG)
		ck_warn("%s/%s: not committed, moved to the quarantine: %s", series, staged, err->msg);
	else if (rc)
		ck_warn("%s/%s: commit as %s failed: %s", series, staged, final,
			err->msg[0] ? err->msg : strerror(-rc));
	else
		ck_info("%s/%s: committed as %s", series, staged, final);
}

static int commit_in_child(struct ckfs *fs, const char *series, const char *staged, const char *final)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc = ck_store_open(fs->cfg->store, 0, &st, &err);

	if (rc == 0) {
		/* Files parsed at their last close are not read again. */
		rc = ck_store_commit_staged_with(st, series, staged, final, NULL, NULL,
						 ckfs_indexer_find_in_child, fs->indexer, &err);
		ck_store_close(st);
	}
	ckfs_log_commit(series, staged, final, rc, &err);
	return rc;
}

/* The child exits with an errno below this; from here on statuses read as
 * a kill (the crash test hook exits 137 "as kill -9 would"), and a reply
 * must never carry them as an errno. */
#define CHILD_KILLED 128

int ckfs_commit(struct ckfs *fs, const char *series, const char *staged, const char *final)
{
	char *dir = ckfs_staging_top_path(fs->staging, series, staged);
	int status, rc;
	pid_t pid;

	if (!dir)
		return -ENOMEM;
	/* A parse under way is finished rather than done twice. */
	ckfs_indexer_wait(fs->indexer, dir);
	pid = CKFS_CHILD_EXECS ? ckfs_spawn_helper(fs, "--commit-helper", series, staged, final) : ckfs_fork(fs);
	if (pid < 0) {
		free(dir);
		return -errno;
	}
	if (pid == 0) {
		rc = commit_in_child(fs, series, staged, final);
		/* _exit: the child must not run the parent's atexit work. */
		_exit(rc < 0 && -rc < CHILD_KILLED ? -rc : rc ? EIO : 0);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			free(dir);
			return -errno;
		}
	}
	/* Committed or quarantined, the directory left; else it stays in
	 * progress and its files are parsed again at their next close. */
	ckfs_indexer_forget(fs->indexer, dir);
	free(dir);
	if (!WIFEXITED(status) || WEXITSTATUS(status) >= CHILD_KILLED)
		return -EIO;	/* killed mid-commit: recovery finishes it at the next writable open */
	rc = WEXITSTATUS(status);
	if (rc == EBADMSG)
		return -EIO;
	if (rc == 0)
		ckfs_health_committed(fs, series, final);   /* answers the series' emergency flag */
	return -rc;
}

static void inval_entry(struct ckfs *fs, fuse_ino_t dir, const char *name)
{
	int rc;

	if (!name)
		return;
	rc = fuse_lowlevel_notify_inval_entry(fs->se, dir, name, strlen(name));
	if (rc && rc != -ENOENT)
		ck_debug("invalidating %s: %s", name, strerror(-rc));
}

void ckfs_view_catch_up(struct ckfs *fs)
{
	uint64_t changed[64];
	size_t n = 0;
	int rc = ck_view_refresh(fs->view, changed, 64, &n);

	if (rc)
		ck_warn("after a commit: cannot read the index: %s", strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		/* The view's root is FUSE's 1 (see swap_root_ino in ops.c). */
		uint64_t ino = changed[i] == fs->root_ino ? FUSE_ROOT_ID :
			       changed[i] == FUSE_ROOT_ID ? fs->root_ino : changed[i];

		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
	}
}

void ckfs_inval_commit_names(struct ckfs *fs, fuse_ino_t dir, const char *old_name, const char *new_name)
{
	ckfs_forget_hidden(fs->view, fs->se, fs->root_ino);	/* a reloaded series' old name */
	if (!dir)
		return;	/* a new series: the root changed in the catch-up */
	inval_entry(fs, dir, old_name);
	if (!old_name || strcmp(old_name, new_name) != 0)
		inval_entry(fs, dir, new_name);
	fuse_lowlevel_notify_inval_inode(fs->se, dir, 0, 0);
}

void ckfs_after_commit(struct ckfs *fs, fuse_ino_t dir, const char *old_name, const char *new_name)
{
	ckfs_view_catch_up(fs);
	ckfs_inval_commit_names(fs, dir, old_name, new_name);
}
