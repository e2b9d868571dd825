/* Following the store while mounted: checkpoints imported (later: committed)
 * after the mount appear without a remount.  A thread wakes every
 * refresh_secs, lets the view add what is new, and tells the kernel which
 * directories changed so cached attributes and listings are dropped.
 * Names the kernel looked up and did not find are not cached (lookup
 * answers ENOENT without a negative entry), so new names resolve at once. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "ckptfs.h"

#define MAX_CHANGED 64

static void *refresh_main(void *arg)
{
	struct ckfs_refresher *r = arg;
	uint64_t changed[MAX_CHANGED];

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct timespec until;
		size_t n = 0;
		int rc;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += r->secs;
		while (!r->stop && pthread_cond_timedwait(&r->wake, &r->lock, &until) != ETIMEDOUT)
			;
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->lock);
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
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int ckfs_refresher_start(struct ckfs_refresher *r, struct ck_view *view, struct fuse_session *se,
			 uint64_t root_ino, unsigned secs)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->view = view;
	r->se = se;
	r->root_ino = root_ino;
	r->secs = secs;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	rc = pthread_create(&r->thread, NULL, refresh_main, r);
	if (rc) {
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		return -rc;
	}
	r->running = 1;
	return 0;
}

void ckfs_refresher_stop(struct ckfs_refresher *r)
{
	if (!r->running)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	r->running = 0;
}
