/* Follows the store while mounted (refresh.c): every refresh_secs a thread
 * asks the view for new series and checkpoints and tells the kernel which
 * directories changed; with warm set, it then builds the composites of a
 * new newest checkpoint (imported, or committed through the mount) before
 * a reader asks.  Thread rules: start and stop by main.c. */
#ifndef CKPTFS_FS_REFRESH_H
#define CKPTFS_FS_REFRESH_H

#include <stdatomic.h>
#include <stdint.h>

#include "ckptfs/ticker.h"
#include "mount.h"

struct ckfs_refresher {
	struct ckfs *fs;
	int warm;
	uint64_t warm_verify_max;   /* see ck_view_warm_newest */
	uint64_t warmed_gen;    /* ck_view_generation when last warmed */
	atomic_int stop;
	struct ck_ticker ticker;
};

/* Starts the thread (secs > 0): 0 or -errno. */
int ckfs_refresher_start(struct ckfs_refresher *r, struct ckfs *fs, unsigned secs, int warm,
			 uint64_t warm_verify_max);
/* Stops it (a warm-up under way ends at its next file); safe on a zeroed r. */
void ckfs_refresher_stop(struct ckfs_refresher *r);

#endif
