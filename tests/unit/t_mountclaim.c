/* mount.lock: one writable mount per store and node (ck_store_mount_claim).
 *
 * A holder whose mount point is mounted keeps others out (EBUSY, the
 * message naming its pid), and ck_store_mount_owner names it.  A holder
 * whose mount is gone (a daemon tearing down after its unmount, or the
 * commit child of a killed one) is waited for: the claim succeeds once it
 * lets go.  A released claim can be taken again at once.  On a shared
 * filesystem each node (each node-local index) has a claim of its own.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs/error.h"
#include "ckptfs/store.h"
#include "testutil.h"

/* Forks a holder of the store's claim for mountpoint; returns once it holds
 * it.  The holder lets go (exits) when *release is written to, or at once
 * after hold_ms milliseconds when hold_ms > 0. */
static pid_t hold_claim(const char *store, const char *mountpoint, int hold_ms, int *release)
{
	int ready[2], go[2];
	pid_t pid;
	char c = 0;

	SETUP(pipe(ready) == 0 && pipe(go) == 0);
	pid = fork();
	SETUP(pid >= 0);
	if (pid == 0) {
		struct ck_error err = { { 0 } };
		int fd;

		close(ready[0]);
		close(go[1]);
		if (ck_store_mount_claim(store, mountpoint, &fd, &err) != 0) {
			fprintf(stderr, "holder: %s\n", err.msg);
			_exit(1);
		}
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		if (hold_ms > 0)
			usleep((useconds_t)hold_ms * 1000);
		else if (read(go[0], &c, 1) < 0)
			_exit(1);
		ck_store_mount_release(fd);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	SETUP(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	*release = go[1];
	return pid;
}

static void check_exit(pid_t pid, const char *what)
{
	int status;

	SETUP(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: holder status %#x", what, status);
}

int main(void)
{
	char store[] = "/tmp/t_mountclaim.XXXXXX";
	char path[4096], base[4096];
	struct ck_error err = { { 0 } };
	char *owner = NULL;
	long pid_seen = 0;
	int fd = -1, release, rc;
	pid_t holder;

	SETUP(mkdtemp(store));
	pathf(path, sizeof(path), "%s/store", store);
	SETUP(ck_store_init(path, &err) == 0);

	/* A live mount ("/" is always mounted) keeps a second claim out. */
	holder = hold_claim(path, "/", 0, &release);
	rc = ck_store_mount_claim(path, "/elsewhere", &fd, &err);
	CHECK(rc == -EBUSY, "claim over a live mount: %d", rc);
	CHECK(fd == -1, "a refused claim handed out fd %d", fd);
	CHECK(strstr(err.msg, "already mounted writable") && strstr(err.msg, " at /"),
	      "refusal message: %s", err.msg);
	rc = ck_store_mount_owner(path, &pid_seen, &owner);
	CHECK(rc == 1 && pid_seen == holder && owner && strcmp(owner, "/") == 0,
	      "owner: rc %d pid %ld (holder %d) at %s", rc, pid_seen, (int)holder, owner ? owner : "(none)");
	free(owner);
	owner = NULL;
	SETUP(write(release, "x", 1) == 1);
	close(release);
	check_exit(holder, "live holder");

	/* Released: taken at once, and no owner once given back. */
	memset(&err, 0, sizeof(err));
	rc = ck_store_mount_claim(path, "/first", &fd, &err);
	CHECK(rc == 0 && fd >= 0, "claim after a release: %d %s", rc, err.msg);
	ck_store_mount_release(fd);
	rc = ck_store_mount_owner(path, &pid_seen, &owner);
	CHECK(rc == 0 && !owner, "owner after a release: %d", rc);
	free(owner);

	/* A holder whose mount is gone is ending: the claim waits for it. */
	holder = hold_claim(path, "/t_mountclaim-not-mounted", 300, &release);
	close(release);
	memset(&err, 0, sizeof(err));
	fd = -1;
	rc = ck_store_mount_claim(path, "/second", &fd, &err);
	CHECK(rc == 0 && fd >= 0, "claim after an unmounted holder: %d %s", rc, err.msg);
	check_exit(holder, "ending holder");
	rc = ck_store_mount_owner(path, &pid_seen, &owner);
	CHECK(rc == 1 && pid_seen == getpid() && owner && strcmp(owner, "/second") == 0,
	      "owner after the wait: rc %d pid %ld at %s", rc, pid_seen, owner ? owner : "(none)");
	free(owner);
	ck_store_mount_release(fd);

	/* On a shared filesystem the claim is the node's, beside its index:
	 * another node (another index) mounts writable too, a second mount
	 * with the same index is refused, and the store itself holds none. */
	setenv("CKPT_TEST_SHARED_FS", "1", 1);
	SETUP(ck_store_set_index_base(pathf(base, sizeof(base), "%s/node-a", store)) == 0);
	holder = hold_claim(path, "/", 0, &release);
	SETUP(ck_store_set_index_base(pathf(base, sizeof(base), "%s/node-b", store)) == 0);
	memset(&err, 0, sizeof(err));
	rc = ck_store_mount_claim(path, "/", &fd, &err);
	CHECK(rc == 0 && fd >= 0, "node B's claim beside node A's: %d %s", rc, err.msg);
	rc = ck_store_mount_owner(path, &pid_seen, &owner);
	CHECK(rc == 1 && pid_seen == getpid(), "node B's owner: rc %d pid %ld", rc, pid_seen);
	free(owner);
	owner = NULL;
	ck_store_mount_release(fd);
	SETUP(ck_store_set_index_base(pathf(base, sizeof(base), "%s/node-a", store)) == 0);
	rc = ck_store_mount_claim(path, "/elsewhere", &fd, &err);
	CHECK(rc == -EBUSY, "a second writable mount with node A's index: %d", rc);
	rc = ck_store_mount_owner(path, &pid_seen, &owner);
	CHECK(rc == 1 && pid_seen == holder, "node A's owner: rc %d pid %ld", rc, pid_seen);
	free(owner);
	SETUP(write(release, "x", 1) == 1);
	close(release);
	check_exit(holder, "node A's holder");
	unsetenv("CKPT_TEST_SHARED_FS");

	{
		char cmd[4200];

		pathf(cmd, sizeof(cmd), "rm -rf '%s'", store);
		SETUP(system(cmd) == 0);
	}
	return test_result();
}
