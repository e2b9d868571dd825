/* A periodic background thread (src/writer/ticker.c): the mount's refresh,
 * idle-commit and compaction loops.
 *
 * Thread rules: start and stop are called by the thread that owns the
 * ticker, stop once per successful start; tick runs on the ticker's own
 * thread, never twice at once, and stop waits for a tick under way.
 */
#ifndef CKPTFS_TICKER_H
#define CKPTFS_TICKER_H

#include <pthread.h>

struct ck_ticker {
	unsigned secs;
	void (*tick)(void *arg);
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stop;
	int running;
};

/* Starts a thread that calls tick(arg) every secs seconds (the first call
 * secs seconds from now).  t need not be initialised.  0 or -errno from
 * pthread_create (then t is not running). */
int ck_ticker_start(struct ck_ticker *t, unsigned secs, void (*tick)(void *arg), void *arg);
/* Wakes the thread at once, waits for a tick under way and joins it.
 * Does nothing on a ticker that is not running (zeroed, or failed to
 * start). */
void ck_ticker_stop(struct ck_ticker *t);

#endif
