/* Following the store while mounted: checkpoints imported (later: committed)
 * after the mount appear without a remount.  A thread wakes every
 * refresh_secs, lets the view add what is new, and tells the kernel which
 * directories changed so cached attributes and listings are dropped.
 * Names the kernel looked up and did not find are not cached (lookup
 * answers ENOENT without a negative entry), so new names resolve at once. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ckptfs.h"
#include "delete.h"

#define MAX_CHANGED 64

struct forget_ctx {
	struct fuse_session *se;
	uint64_t root_ino;
};

static void forget_one(void *arg, uint64_t parent, const char *name)
{
	struct forget_ctx *f = arg;
	uint64_t ino = parent == f->root_ino ? FUSE_ROOT_ID : parent == FUSE_ROOT_ID ? f->root_ino : parent;
	int rc = fuse_lowlevel_notify_inval_entry(f->se, ino, name, strlen(name));

	if (rc && rc != -ENOENT)
		ck_debug("refresh: forgetting %s: %s", name, strerror(-rc));
}

void ckfs_forget_hidden(struct ck_view *view, struct fuse_session *se, uint64_t root_ino)
{
	struct forget_ctx f = { se, root_ino };

	ck_view_drain_hidden(view, forget_one, &f);
}

static void refresh_tick(void *arg)
{
	struct ckfs_refresher *r = arg;
	uint64_t changed[MAX_CHANGED];
	size_t n = 0;
	int rc;

	rc = ck_view_refresh(r->view, changed, MAX_CHANGED, &n);
	if (rc)
		ck_warn("refresh: cannot read the index: %s", strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		/* FUSE's root is always 1 (see swap_root_ino in ops.c). */
		uint64_t ino = changed[i] == r->root_ino ? FUSE_ROOT_ID :
			       changed[i] == FUSE_ROOT_ID ? r->root_ino : changed[i];

		rc = fuse_lowlevel_notify_inval_inode(r->se, ino, 0, 0);
		if (rc && rc != -ENOENT)
			ck_debug("refresh: invalidating inode %llu: %s", (unsigned long long)ino,
				 strerror(-rc));
	}
	/* Deleted checkpoints: the kernel must forget their names too. */
	ckfs_forget_hidden(r->view, r->se, r->root_ino);
	/* A new newest checkpoint, found here or committed through the mount
	 * since: its composites are built before a reader opens them (the
	 * warm-up at mount built the others; built ones cost nothing). */
	if (r->warm && ck_view_generation(r->view) != r->warmed_gen) {
		r->warmed_gen = ck_view_generation(r->view);
		rc = ck_view_warm_newest(r->view, &r->stop, r->warm_verify_max, NULL, NULL);
		if (rc)
			ck_debug("refresh: warm-up: %s", strerror(-rc));
	}
}

int ckfs_refresher_start(struct ckfs_refresher *r, struct ck_view *view, struct fuse_session *se,
			 uint64_t root_ino, unsigned secs, int warm, uint64_t warm_verify_max)
{
	memset(r, 0, sizeof(*r));
	r->view = view;
	r->se = se;
	r->root_ino = root_ino;
	r->warm = warm;
	r->warm_verify_max = warm_verify_max;
	r->warmed_gen = ck_view_generation(view);   /* the mount's warm-up covers these */
	atomic_init(&r->stop, 0);
	return ckfs_ticker_start(&r->ticker, secs, refresh_tick, r);
}

void ckfs_refresher_stop(struct ckfs_refresher *r)
{
	atomic_store(&r->stop, 1);   /* a warm-up under way ends at its next file */
	ckfs_ticker_stop(&r->ticker);
}
