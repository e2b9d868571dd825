/* Background compaction of a writable mount (-o compact=SEC, packs.h).
 *
 * ck_store_compact() writes the index, so it needs the store open
 * writable, which this process cannot do while the view holds it (see
 * commit.c): it runs in a forked child that reports through its exit
 * status, and SIGTERM asks it to stop between files (the unmount does).
 * Compaction holds STORE/commit.lock while it writes, so a commit through
 * the mount meanwhile waits for it; readers are never blocked.  A child
 * killed at any point leaves a consistent store (the compaction is
 * crash-safe), and the next round packs what it did not.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs/packstore.h"
#include "ckptfs/store.h"
#include "packs.h"

/* The child exits with an errno below this (as commit.c's child does). */
#define CHILD_KILLED 128

static volatile int child_stop;

static void on_sigterm(int sig)
{
	(void)sig;
	child_stop = 1;
}

static int compact_in_child(const char *store)
{
	struct ck_compact_opts opts = { .keep_raw = CKFS_COMPACT_KEEP_RAW, .stop = &child_stop };
	struct ck_compact_stats stats = { 0 };
	struct ck_error err = { { 0 } };
	struct sigaction sa = { .sa_handler = on_sigterm };
	struct ck_store *st;
	int rc;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	rc = ck_store_open(store, 0, &st, &err);
	if (!rc) {
		rc = ck_store_compact(st, &opts, NULL, NULL, &stats, &err);
		ck_store_close(st);
	}
	if (rc) {
		ck_warn("compaction failed: %s", err.msg[0] ? err.msg : strerror(-rc));
	} else if (stats.files) {
		ck_info("compaction: %llu file versions, %.1f MB packed into %.1f MB "
			"(%llu chunks deduplicated, %llu as deltas), %.1f MB of raw files removed, %.1f s",
			(unsigned long long)stats.files, stats.logical_bytes / 1e6, stats.stored_bytes / 1e6,
			(unsigned long long)stats.dedup_chunks, (unsigned long long)stats.delta_chunks,
			stats.raw_removed_bytes / 1e6, stats.seconds);
	}
	return rc;
}

static int wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) >= CHILD_KILLED)
		return -EINTR;   /* killed: what it committed stays, the rest waits for the next round */
	return -WEXITSTATUS(status);
}

int ckfs_compact_now(struct ckfs_compactor *c)
{
	uint64_t gen = ck_view_generation(c->fs->view);
	pid_t pid;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (c->stopping) {
		pthread_mutex_unlock(&c->lock);
		return -ECANCELED;
	}
	pid = fork();
	if (pid == 0) {
		rc = compact_in_child(c->fs->cfg->store);
		/* _exit: the child must not run the parent's atexit work. */
		_exit(rc < 0 && -rc < CHILD_KILLED ? -rc : rc ? EIO : 0);
	}
	if (pid > 0)
		c->child = pid;
	pthread_mutex_unlock(&c->lock);
	if (pid < 0) {
		rc = -errno;
		ck_warn("compaction: cannot fork: %s", strerror(-rc));
		return rc;
	}
	rc = wait_child(pid);
	pthread_mutex_lock(&c->lock);
	c->child = 0;
	pthread_mutex_unlock(&c->lock);
	if (rc == 0) {
		c->compacted_gen = gen;
		c->have_gen = 1;
	} else if (rc == -EINTR) {
		ck_warn("compaction stopped before it was done");
	}
	/* Whatever the child committed: the view reads it from the packs
	 * from now on (their raw files may be gone). */
	ckfs_after_commit(c->fs, 0, NULL, NULL);
	return rc;
}

static void compact_tick(void *arg)
{
	struct ckfs_compactor *c = arg;

	if (c->have_gen && ck_view_generation(c->fs->view) == c->compacted_gen)
		return;   /* nothing committed since */
	ckfs_compact_now(c);
}

int ckfs_compactor_start(struct ckfs_compactor *c, struct ckfs *fs, unsigned secs)
{
	int rc;

	memset(c, 0, sizeof(*c));
	c->fs = fs;
	pthread_mutex_init(&c->lock, NULL);
	rc = ckfs_ticker_start(&c->ticker, secs, compact_tick, c);
	if (rc) {
		pthread_mutex_destroy(&c->lock);
		c->fs = NULL;
	}
	return rc;
}

void ckfs_compactor_stop(struct ckfs_compactor *c)
{
	if (!c->fs)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = 1;
	if (c->child > 0)
		kill(c->child, SIGTERM);
	pthread_mutex_unlock(&c->lock);
	ckfs_ticker_stop(&c->ticker);
	pthread_mutex_destroy(&c->lock);
	c->fs = NULL;
}
