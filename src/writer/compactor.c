/* Background compaction of a writable mount (compactor.h).
 *
 * ck_store_compact() writes the index, so it needs the store open
 * writable, which this process cannot do while the view holds it (see
 * child.c).  It runs in a child: `ckptctl compact STORE --keep-raw 1`,
 * the ckptctl installed beside this executable, exec'd right after the
 * fork (argv is built beforehand, so the child calls nothing but execv:
 * a fork of this busy multithreaded process may copy locks that other
 * threads held, which an allocator without fork handlers, such as
 * AddressSanitizer's, would then wait on forever).  Without a ckptctl
 * there, the forked child compacts itself, as child.c's child commits.
 * The unmount sends the child SIGTERM, and SIGKILL if it has not ended
 * within a few seconds: compaction is crash-safe at every point, and the
 * next round packs what it did not.  Compaction holds STORE/commit.lock
 * while it writes, so a commit through the mount meanwhile waits for it;
 * readers are never blocked.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs/log.h"
#include "ckptfs/packstore.h"
#include "ckptfs/store.h"
#include "ckptfs/ticker.h"
#include "compactor.h"

struct ckw_compactor {
	struct ck_writer *w;
	struct ck_ticker ticker;
	uint64_t compacted_gen;     /* ck_view_generation() at the last compaction */
	int have_gen;
	pthread_mutex_t lock;       /* child, stopping */
	pid_t child;                /* compaction under way, or 0 */
	int stopping;
	char *ctl;                  /* the ckptctl beside this executable, or NULL */
	char *argv[9];              /* its command line, built before any fork */
	char keep_raw[16];
};

/* The child exits with an errno below this (as child.c's children do). */
#define CHILD_KILLED 128
/* How long the unmount waits for a compaction told to stop. */
#define STOP_GRACE_MS 5000

static volatile int child_stop;

static void on_sigterm(int sig)
{
	(void)sig;
	child_stop = 1;
}

static int compact_in_child(const char *store)
{
	struct ck_compact_opts opts = { .keep_raw = CKW_COMPACT_KEEP_RAW, .stop = &child_stop };
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

/* The ckptctl beside this executable (allocated), or NULL. */
static char *sibling_ckptctl(void)
{
	char exe[PATH_MAX], *slash, *ctl;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return NULL;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	if (asprintf(&ctl, "%s/ckptctl", exe) < 0)
		return NULL;
	if (access(ctl, X_OK) != 0) {
		free(ctl);
		return NULL;
	}
	return ctl;
}

/* 0 when the child succeeded, -EINTR when it was killed (what it committed
 * stays, the rest waits for the next round), or -errno / -EIO. */
static int wait_child(pid_t pid, int execd)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) >= CHILD_KILLED)
		return -EINTR;
	if (execd && WEXITSTATUS(status)) {
		ck_warn("compaction: ckptctl compact exited %d", WEXITSTATUS(status));
		return -EIO;
	}
	return -WEXITSTATUS(status);
}

int ckw_compact_now(struct ckw_compactor *c)
{
	uint64_t gen = ck_view_generation(c->w->view);
	pid_t pid;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (c->stopping) {
		pthread_mutex_unlock(&c->lock);
		return -ECANCELED;
	}
	pid = fork();
	if (pid == 0) {
		if (c->ctl) {
			execv(c->ctl, c->argv);
			_exit(127);
		}
		rc = compact_in_child(c->w->store);
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
	rc = wait_child(pid, c->ctl != NULL);
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
	ck_writer_catch_up(c->w);
	ckw_notify_names(c->w, NULL, NULL, NULL);
	return rc;
}

static void compact_tick(void *arg)
{
	struct ckw_compactor *c = arg;

	if (c->have_gen && ck_view_generation(c->w->view) == c->compacted_gen)
		return;   /* nothing committed since */
	ckw_compact_now(c);
}

int ckw_compactor_start(struct ckw_compactor **out, struct ck_writer *w, unsigned secs)
{
	struct ckw_compactor *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->w = w;
	c->ctl = sibling_ckptctl();
	if (c->ctl) {
		char *const argv[] = { c->ctl, "compact", w->store, "--keep-raw", c->keep_raw, "-q", NULL };
		/* The child keeps a shared store's index where this process does. */
		char *const argv_dir[] = { c->ctl, "--index-dir", (char *)ck_store_index_base(), "compact", w->store,
					   "--keep-raw", c->keep_raw, "-q", NULL };

		snprintf(c->keep_raw, sizeof(c->keep_raw), "%u", CKW_COMPACT_KEEP_RAW);
		if (ck_store_index_base())
			memcpy(c->argv, argv_dir, sizeof(argv_dir));
		else
			memcpy(c->argv, argv, sizeof(argv));
	}
	pthread_mutex_init(&c->lock, NULL);
	rc = ck_ticker_start(&c->ticker, secs, compact_tick, c);
	if (rc) {
		pthread_mutex_destroy(&c->lock);
		free(c->ctl);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Whether the child is still running after waiting up to ms. */
static int child_running(struct ckw_compactor *c, int ms)
{
	struct timespec tick = { 0, 50 * 1000 * 1000 };
	int running = 1;

	for (int waited = 0;; waited += 50) {
		pthread_mutex_lock(&c->lock);
		running = c->child > 0;
		pthread_mutex_unlock(&c->lock);
		if (!running || waited >= ms)
			return running;
		nanosleep(&tick, NULL);
	}
}

void ckw_compactor_stop(struct ckw_compactor *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = 1;
	if (c->child > 0)
		kill(c->child, SIGTERM);
	pthread_mutex_unlock(&c->lock);
	if (child_running(c, STOP_GRACE_MS)) {
		pthread_mutex_lock(&c->lock);
		if (c->child > 0) {
			ck_warn("compaction did not stop within %d s of SIGTERM: killing it", STOP_GRACE_MS / 1000);
			kill(c->child, SIGKILL);
		}
		pthread_mutex_unlock(&c->lock);
	}
	ck_ticker_stop(&c->ticker);
	pthread_mutex_destroy(&c->lock);
	free(c->ctl);
	free(c);
}
