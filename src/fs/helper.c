/* Commit and deletion children that exec a fresh ckptfs (sanitizer builds).
 *
 * The daemon runs a commit or a deletion in a child process (commit.c,
 * delete.c: its view holds the store's LMDB environment, which one
 * process must not open twice).  A forked child of this multithreaded
 * process allocates with the parent's allocator state as it was at the
 * fork; glibc's malloc takes its locks around fork(), but
 * AddressSanitizer's (GCC 12) does not, and a child forked while a worker
 * held one of its locks hung at its first malloc.  In builds with ASan
 * the child therefore execs the daemon's own binary in a helper mode
 * right away, calling nothing that allocates between fork and exec (argv
 * is built beforehand), as the background compactor execs ckptctl.  The
 * helper commits without the parses kept from the last closes, so a
 * commit there re-reads its files.
 *
 * The helper keeps the daemon's claim on STORE/mount.lock, as a forked
 * child shares it: a daemon killed mid-commit leaves its child to finish
 * alone, and the next writable mount must wait for it (mountclaim.c)
 * rather than recover the store while that commit still moves files.
 *
 *   ckptfs --commit-helper STORE SERIES STAGED FINAL
 *   ckptfs --delete-helper STORE SERIES NAME
 *
 * exit with the positive errno of the operation (0 on success).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs.h"
#include "ckptfs/refs.h"
#include "ckptfs/store.h"

int ckfs_helper_wanted(int argc, char **argv)
{
	return argc > 1 && (strcmp(argv[1], "--commit-helper") == 0 || strcmp(argv[1], "--delete-helper") == 0);
}

static int exit_code(int rc)
{
	return rc < 0 && -rc < 128 ? -rc : rc ? EIO : 0;
}

int ckfs_helper_main(int argc, char **argv)
{
	struct ck_error err = { { 0 } };
	int rc;

	ck_log_init("ckptfs", 0, CK_LOG_INFO);
	if (strcmp(argv[1], "--commit-helper") == 0 && argc == 6) {
		struct ck_store *st;

		rc = ck_store_open(argv[2], 0, &st, &err);
		if (rc == 0) {
			rc = ck_store_commit_staged_with(st, argv[3], argv[4], argv[5], NULL, NULL, NULL, NULL,
							 &err);
			ck_store_close(st);
		}
		ckfs_log_commit(argv[3], argv[4], argv[5], rc, &err);
		return exit_code(rc);
	}
	if (strcmp(argv[1], "--delete-helper") == 0 && argc == 5) {
		rc = ck_delete_checkpoint(argv[2], argv[3], argv[4], NULL, NULL, NULL, NULL, NULL, &err);
		ckfs_log_delete(argv[3], argv[4], rc, &err);
		return exit_code(rc);
	}
	return EINVAL;
}

pid_t ckfs_spawn_helper(struct ckfs *fs, const char *op, const char *a, const char *b, const char *c)
{
	char self[PATH_MAX];
	const char *argv[7] = { "ckptfs", op, fs->cfg->store, a, b, c, NULL };
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0)
		return -1;
	self[n] = 0;
	pid = fork();
	if (pid == 0) {
		/* Only this child's descriptor loses FD_CLOEXEC (fcntl is async-signal-safe). */
		if (fs->mount_lock >= 0 && fcntl(fs->mount_lock, F_SETFD, 0) < 0)
			_exit(EIO);
		execv(self, (char *const *)argv);
		_exit(EIO);   /* no helper: the commit failed */
	}
	return pid;
}
