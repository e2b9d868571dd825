/* Following the store while mounted (refresh.h): checkpoints imported
 * or deleted by another process after the mount show without a remount.
 * A thread wakes every refresh_secs, lets the view add what is new, and
 * tells the kernel which directories changed so cached attributes and
 * listings are dropped.
 * Names the kernel looked up and did not find are not cached (lookup
 * answers ENOENT without a negative entry), so new names resolve at once. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ckptfs/log.h"
#include "notify.h"
#include "refresh.h"

#define MAX_CHANGED 64

static void refresh_tick(void *arg)
{
	struct ckfs_refresher *r = arg;
	struct ck_view *view = r->fs->view;
	uint64_t changed[MAX_CHANGED];
	size_t n = 0;
	int rc;

	rc = ck_view_refresh(view, changed, MAX_CHANGED, &n);
	if (rc)
		ck_warn("refresh: cannot read the index: %s", strerror(-rc));
	ckfs_inval_inodes(r->fs, changed, n);
	/* Deleted checkpoints: the kernel must forget their names too. */
	ckfs_forget_hidden(r->fs);
	/* A new newest checkpoint, found here or committed through the mount
	 * since: its composites are built before a reader opens them (the
	 * warm-up at mount built the others; built ones cost nothing). */
	if (r->warm && ck_view_generation(view) != r->warmed_gen) {
		r->warmed_gen = ck_view_generation(view);
		rc = ck_view_warm_newest(view, &r->stop, r->warm_verify_max, NULL, NULL);
		if (rc)
			ck_debug("refresh: warm-up: %s", strerror(-rc));
	}
}

int ckfs_refresher_start(struct ckfs_refresher *r, struct ckfs *fs, unsigned secs, int warm,
			 uint64_t warm_verify_max)
{
	memset(r, 0, sizeof(*r));
	r->fs = fs;
	r->warm = warm;
	r->warm_verify_max = warm_verify_max;
	r->warmed_gen = ck_view_generation(fs->view);   /* the mount's warm-up covers these */
	atomic_init(&r->stop, 0);
	return ck_ticker_start(&r->ticker, secs, refresh_tick, r);
}

void ckfs_refresher_stop(struct ckfs_refresher *r)
{
	atomic_store(&r->stop, 1);   /* a warm-up under way ends at its next file */
	ck_ticker_stop(&r->ticker);
}
