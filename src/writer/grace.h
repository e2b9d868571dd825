/* Marker grace (grace.c): a directory completed by a marker that promises
 * nothing (trainer_state.json, user-named files) commits once nothing
 * under it changed for the grace time.  Each schedule (re)arms the
 * directory's deadline; when it passes and the newest mtime under the
 * directory is older than the grace time, quiet() is called, else the
 * deadline moves to that mtime plus the grace time.  A directory gone
 * meanwhile is dropped.  One thread sleeps until the earliest deadline.
 *
 * Thread rules: schedule from any thread; start and stop by the owner.
 * The callbacks run on the grace thread, one at a time, with no lock held.
 */
#ifndef CKPTFS_WRITER_GRACE_H
#define CKPTFS_WRITER_GRACE_H

#include "ckptfs/writer_staging.h"

struct ckw_grace;

struct ckw_grace_ops {
	void *arg;
	/* Once, first thing on the new thread (the rescan at start). */
	void (*first)(void *arg);
	/* STORE/staging/<series>/<dir> rested for the grace time: commit it. */
	void (*quiet)(void *arg, const char *series, const char *dir);
};

/* Starts the thread; directories are found in s (kept, not owned).  ops
 * is copied.  0, -ENOMEM or -errno from pthread_create. */
int ckw_grace_start(struct ckw_grace **out, struct ck_staging *s, double grace_secs,
		    const struct ckw_grace_ops *ops);
/* (Re)arms series/dir for grace seconds from now; a later deadline it had
 * stays.  NULL g is accepted (nothing happens).  Out of memory, logged:
 * the next close in the directory arms it again. */
void ckw_grace_schedule(struct ckw_grace *g, const char *series, const char *dir);
/* Stops the thread (a callback under way finishes first), drops what is
 * armed and frees g.  NULL is accepted. */
void ckw_grace_stop(struct ckw_grace *g);

#endif
