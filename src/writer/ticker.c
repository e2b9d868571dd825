/* A periodic background thread (include/ckptfs/ticker.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "ckptfs/ticker.h"

static void *ticker_main(void *arg)
{
	struct ck_ticker *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += t->secs;
		while (!t->stop && pthread_cond_timedwait(&t->wake, &t->lock, &until) != ETIMEDOUT)
			;
		if (t->stop)
			break;
		pthread_mutex_unlock(&t->lock);
		t->tick(t->arg);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int ck_ticker_start(struct ck_ticker *t, unsigned secs, void (*tick)(void *arg), void *arg)
{
	int rc;

	memset(t, 0, sizeof(*t));
	t->secs = secs;
	t->tick = tick;
	t->arg = arg;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	rc = pthread_create(&t->thread, NULL, ticker_main, t);
	if (rc) {
		pthread_cond_destroy(&t->wake);
		pthread_mutex_destroy(&t->lock);
		return -rc;
	}
	t->running = 1;
	return 0;
}

void ck_ticker_stop(struct ck_ticker *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = 1;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	t->running = 0;
}
