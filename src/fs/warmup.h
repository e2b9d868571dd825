/* Builds the newest checkpoints' composites once the mount is live
 * (warmup.c, -o warmup), checking those served as saved of at most
 * verify_max bytes (ck_view_warm_newest), then preloads them (preload.h).
 * Thread rules: start and stop by main.c; stop ends the build or the
 * preload early and joins the thread. */
#ifndef CKPTFS_FS_WARMUP_H
#define CKPTFS_FS_WARMUP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ckptfs/view.h"
#include "mount.h"

struct ckfs_warmup {
	struct ckfs *fs;
	uint64_t verify_max;
	atomic_int stop;
	pthread_t thread;
	int running;
};

int ckfs_warmup_start(struct ckfs_warmup *w, struct ckfs *fs, uint64_t verify_max);
/* Tells the thread to stop at its next file or piece, without waiting:
 * the preload may be waiting on the mount itself (its lookups, its pushes
 * into pages a read has locked), which only the unmount ends once the
 * request loop is gone; join it with ckfs_warmup_stop after unmounting. */
void ckfs_warmup_cancel(struct ckfs_warmup *w);
/* Stops and joins the thread.  Safe on a zeroed or failed w. */
void ckfs_warmup_stop(struct ckfs_warmup *w);
/* What the warm-ups check ahead: files up to the passthrough limit when
 * passthrough is on (their first open would hash them), else none. */
uint64_t ckfs_warm_verify_max(const struct ckfs *fs);

#endif
