/* The daemon's side of the packed store (compactor.c).
 *
 * A writable mount compacts the store in the background (-o compact=SEC):
 * every SEC seconds, when the view gained a checkpoint since the last
 * compaction, `ckptctl compact` runs in a child process (the view holds
 * the store's LMDB environment open read-only, and one process must not
 * open it twice: see commit.c), and the view then follows what was
 * packed.  Reads of packed files go through the view (read.c), with the
 * decoded-chunk cache sized by -o cache_size=MiB.
 */
#ifndef CKPTFS_FS_PACKS_H
#define CKPTFS_FS_PACKS_H

#include <signal.h>
#include <sys/types.h>

#include "ckptfs.h"

/* Raw files kept by the background compaction: the newest checkpoint of
 * each series (it stays raw anyway: users resume from it). */
#define CKFS_COMPACT_KEEP_RAW 1

struct ckfs_compactor {
	struct ckfs *fs;
	struct ckfs_ticker ticker;
	uint64_t compacted_gen;     /* ck_view_generation() at the last compaction */
	int have_gen;
	pthread_mutex_t lock;       /* child, stopping */
	pid_t child;                /* compaction under way, or 0 */
	int stopping;
	char *ctl;                  /* the ckptctl beside this executable, or NULL */
	char *argv[9];              /* its command line, built before any fork */
	char keep_raw[16];
};

/* Starts the thread (secs > 0).  0 or -errno. */
int ckfs_compactor_start(struct ckfs_compactor *c, struct ckfs *fs, unsigned secs);
/* Asks a compaction under way to stop between files, waits for it, and
 * joins the thread.  Safe on a compactor never started (zeroed). */
void ckfs_compactor_stop(struct ckfs_compactor *c);
/* One compaction now, in a child, then the view follows (the thread's
 * tick; also for tests).  0, or -errno (logged). */
int ckfs_compact_now(struct ckfs_compactor *c);

#endif
