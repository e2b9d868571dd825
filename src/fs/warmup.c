/* -o warmup: once the mount serves, one thread builds the composites of
 * every series' newest checkpoint (ck_view_warm_newest), so that a trainer
 * starting up to resume finds them built when it opens them.  Builds are
 * cached and serialized by the view: an open that arrives during the
 * warm-up waits at most for the build under way, and never builds twice. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ckptfs/log.h"
#include "preload.h"
#include "warmup.h"

static void *warmup_main(void *arg)
{
	struct ckfs_warmup *w = arg;
	struct ckfs_preload *p = NULL;
	int rc;

	/* At the daemon's own priority, not behind it: an open waits for the
	 * build of its file under way, and the preload is the work the first
	 * load's requests would otherwise wait for (at nice 10 on a busy
	 * machine it was still pushing when the load began: docs/bench.md). */
	ckfs_preload_begin(w->fs, &w->stop, &p);
	rc = ck_view_warm_newest(w->fs->view, &w->stop, w->verify_max, p ? ckfs_preload_file : NULL, p);
	if (rc)
		ck_debug("warm-up: %s", strerror(-rc));
	ckfs_preload_end(p);
	return NULL;
}

uint64_t ckfs_warm_verify_max(const struct ckfs *fs)
{
	return fs->passthrough.on ? fs->passthrough.max_size : 0;
}

int ckfs_warmup_start(struct ckfs_warmup *w, struct ckfs *fs, uint64_t verify_max)
{
	int rc;

	memset(w, 0, sizeof(*w));
	w->fs = fs;
	w->verify_max = verify_max;
	atomic_init(&w->stop, 0);
	rc = pthread_create(&w->thread, NULL, warmup_main, w);
	if (rc)
		return -rc;
	w->running = 1;
	return 0;
}

void ckfs_warmup_cancel(struct ckfs_warmup *w)
{
	if (w->running)
		atomic_store(&w->stop, 1);
}

void ckfs_warmup_stop(struct ckfs_warmup *w)
{
	if (!w->running)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->thread, NULL);
	w->running = 0;
}
