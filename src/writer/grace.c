/* Marker grace: commits that wait for a directory to be quiet (grace.h).
 *
 * trainer_state.json is the last file recent transformers write, but
 * older ones write rng_state.pth after it; a user-named marker carries no
 * promise either.  So such a marker arms a timer: once nothing in the
 * directory is open and nothing under it changed for -o marker_grace
 * seconds, it commits.  Another close in the directory re-arms it; a file
 * still open makes the commit wait for its last close (the marker check
 * runs again then).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "grace.h"
#include "tree_age.h"

struct pending {
	char *series, *dir;
	int64_t due_ns;
	struct pending *next;
};

struct ckw_grace {
	struct ck_staging *staging;
	struct ckw_grace_ops ops;
	int64_t grace_ns;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct pending *list;
	int stop;
};

static void pending_free(struct pending *p)
{
	free(p->series);
	free(p->dir);
	free(p);
}

/* Arms or re-arms series/dir for due_ns, lock held. */
static void arm(struct ckw_grace *g, const char *series, const char *dir, int64_t due_ns)
{
	struct pending *p;

	for (p = g->list; p; p = p->next) {
		if (strcmp(p->series, series) == 0 && strcmp(p->dir, dir) == 0) {
			if (due_ns > p->due_ns)
				p->due_ns = due_ns;
			pthread_cond_signal(&g->wake);
			return;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->series = strdup(series)) || !(p->dir = strdup(dir))) {
		if (p)
			pending_free(p);
		ck_warn("%s/%s: out of memory: its marker commit waits for the next close", series, dir);
		return;
	}
	p->due_ns = due_ns;
	p->next = g->list;
	g->list = p;
	pthread_cond_signal(&g->wake);
}

void ckw_grace_schedule(struct ckw_grace *g, const char *series, const char *dir)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	arm(g, series, dir, ck_now_ns() + g->grace_ns);
	pthread_mutex_unlock(&g->lock);
}

/* A deadline passed: commit, or wait longer if the directory changed. */
static void expire(struct ckw_grace *g, struct pending *p)
{
	char *path = ck_staging_top_path(g->staging, p->series, p->dir);
	int64_t newest;
	size_t files;

	if (!path || ckw_tree_newest(path, &newest, &files) != 0) {
		free(path);
		return;	/* gone: committed, renamed or removed meanwhile */
	}
	free(path);
	if (ck_now_ns() - newest < g->grace_ns) {
		pthread_mutex_lock(&g->lock);
		arm(g, p->series, p->dir, newest + g->grace_ns);
		pthread_mutex_unlock(&g->lock);
		return;
	}
	g->ops.quiet(g->ops.arg, p->series, p->dir);
}

static void *grace_main(void *arg)
{
	struct ckw_grace *g = arg;

	if (g->ops.first)
		g->ops.first(g->ops.arg);
	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		struct pending *p, **link, *due = NULL;
		int64_t now = ck_now_ns(), first = INT64_MAX;

		for (link = &g->list; (p = *link) != NULL;) {
			if (p->due_ns <= now) {
				*link = p->next;
				p->next = due;
				due = p;
			} else {
				if (p->due_ns < first)
					first = p->due_ns;
				link = &p->next;
			}
		}
		if (due) {
			pthread_mutex_unlock(&g->lock);
			while (due) {
				p = due;
				due = p->next;
				expire(g, p);
				pending_free(p);
			}
			pthread_mutex_lock(&g->lock);
		} else if (first == INT64_MAX) {
			pthread_cond_wait(&g->wake, &g->lock);
		} else {
			struct timespec until = { .tv_sec = first / 1000000000, .tv_nsec = first % 1000000000 };

			pthread_cond_timedwait(&g->wake, &g->lock, &until);
		}
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int ckw_grace_start(struct ckw_grace **out, struct ck_staging *s, double grace_secs,
		    const struct ckw_grace_ops *ops)
{
	struct ckw_grace *g = calloc(1, sizeof(*g));
	int rc;

	if (!g)
		return -ENOMEM;
	g->staging = s;
	g->ops = *ops;
	g->grace_ns = (int64_t)(grace_secs * 1e9);
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->wake, NULL);
	rc = pthread_create(&g->thread, NULL, grace_main, g);
	if (rc) {
		pthread_cond_destroy(&g->wake);
		pthread_mutex_destroy(&g->lock);
		free(g);
		return -rc;
	}
	*out = g;
	return 0;
}

void ckw_grace_stop(struct ckw_grace *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = 1;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	while (g->list) {
		struct pending *p = g->list;

		g->list = p->next;
		pending_free(p);
	}
	pthread_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->lock);
	free(g);
}
