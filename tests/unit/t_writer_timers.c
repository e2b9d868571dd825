/* The writer's timers without a mount, with short times and no assertion
 * about speed: the marker grace fires once a directory has rested for the
 * grace time (its newest mtime, a future one included, moves the
 * deadline), never for a directory gone, once for a directory armed
 * twice, and after its first() callback; the idle scan commits exactly the
 * directories with a step, a file, nothing open and an old enough newest
 * mtime; a running writer commits an HF marker after its grace once the
 * last file is closed, and at start commits what markers completed while
 * no daemon ran. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckptfs/clock.h"
#include "ckptfs/writer.h"
#include "t_writer_util.h"
#include "testutil.h"
#include "writer/grace.h"
#include "writer/idle.h"
#include "writer/tree_age.h"

#define GRACE_S 0.3
#define GRACE_NS ((int64_t)(GRACE_S * 1e9))

static struct tw_env env;

/* What the grace thread reported. */
static struct {
	pthread_mutex_t lock;
	int first;              /* first() calls */
	int first_before_quiet; /* no quiet() before the first first() */
	char fired[16][64];
	int64_t rested_ns[16];  /* now minus the newest mtime when it fired */
	int nfired;
} seen = { .lock = PTHREAD_MUTEX_INITIALIZER, .first_before_quiet = 1 };

static void grace_first(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&seen.lock);
	seen.first++;
	pthread_mutex_unlock(&seen.lock);
}

static void grace_quiet(void *arg, const char *series, const char *dir)
{
	char rel[600], p[1024];
	int64_t newest = 0;
	size_t files;

	(void)arg;
	pathf(rel, sizeof(rel), "staging/%s/%s", series, dir);
	ckw_tree_newest(tw_path(&env, p, sizeof(p), rel), &newest, &files);
	pthread_mutex_lock(&seen.lock);
	if (!seen.first)
		seen.first_before_quiet = 0;
	if (seen.nfired < 16) {
		snprintf(seen.fired[seen.nfired], sizeof(seen.fired[0]), "%s/%s", series, dir);
		seen.rested_ns[seen.nfired] = ck_now_ns() - newest;
		seen.nfired++;
	}
	pthread_mutex_unlock(&seen.lock);
}

/* How often name fired, and the least rest it fired after. */
static int fired(const char *name, int64_t *rested)
{
	int count = 0;

	pthread_mutex_lock(&seen.lock);
	for (int i = 0; i < seen.nfired; i++) {
		if (strcmp(seen.fired[i], name) == 0) {
			if (!count || seen.rested_ns[i] < *rested)
				*rested = seen.rested_ns[i];
			count++;
		}
	}
	pthread_mutex_unlock(&seen.lock);
	return count;
}

static int d2_fired(void *arg)
{
	int64_t rested;

	(void)arg;
	return fired("run/d2", &rested) > 0;
}

static void test_grace(void)
{
	const struct ckw_grace_ops ops = { NULL, grace_first, grace_quiet };
	struct ck_staging *s;
	struct ckw_grace *g;
	int64_t rested = 0;

	SETUP(ck_staging_new(env.store, &s) == 0);
	tw_mkdirs(&env, "staging/run/d1");
	tw_text(&env, "staging/run/d1/a", "a");
	tw_age(&env, "staging/run/d1", -3600);
	tw_mkdirs(&env, "staging/run/d2");
	tw_text(&env, "staging/run/d2/a", "a");
	/* Written "in the future": the deadline follows the newest mtime. */
	tw_age(&env, "staging/run/d2", 2);
	SETUP(ckw_grace_start(&g, s, GRACE_S, &ops) == 0);
	ckw_grace_schedule(g, "run", "gone");
	ckw_grace_schedule(g, "run", "d1");
	ckw_grace_schedule(g, "run", "d1");
	ckw_grace_schedule(g, "run", "d2");
	CHECK(tw_wait_for(d2_fired, NULL), "run/d2 never fired");
	CHECK(fired("run/d2", &rested) == 1 && rested >= GRACE_NS,
	      "run/d2 fired after %lld ns of rest, less than the grace", (long long)rested);
	CHECK(fired("run/d1", &rested) == 1 && rested >= GRACE_NS, "run/d1 fired %d times", fired("run/d1", &rested));
	CHECK(fired("run/gone", &rested) == 0, "a directory that is not there fired");
	pthread_mutex_lock(&seen.lock);
	CHECK(seen.first == 1 && seen.first_before_quiet, "first() ran %d times, before quiet(): %d", seen.first,
	      seen.first_before_quiet);
	pthread_mutex_unlock(&seen.lock);
	/* Stopped with a deadline armed: freed, never fired (d1 is not at
	 * rest now, however slowly this runs). */
	tw_age(&env, "staging/run/d1", 3600);
	ckw_grace_schedule(g, "run", "d1");
	ckw_grace_stop(g);
	CHECK(fired("run/d1", &rested) == 1, "a stopped grace fired");
	ckw_grace_schedule(NULL, "run", "d1");
	ck_staging_free(s);
}

static struct ck_writer *open_writer(double grace)
{
	struct ck_writer_opts opts = { .markers = CK_MARK_ALL, .marker_grace = grace };
	struct ck_writer_notify notify = tw_notify(&env);
	struct ck_writer *w;

	SETUP(ck_writer_open(env.store, env.view, &opts, &notify, -1, &w) == 0);
	return w;
}

static void stage(const char *dir, int64_t age_s)
{
	char rel[600];

	tw_mkdirs(&env, pathf(rel, sizeof(rel), "staging/run/%s", dir));
	tw_safetensors(&env, pathf(rel, sizeof(rel), "staging/run/%s/model.safetensors", dir), 0);
	tw_age(&env, pathf(rel, sizeof(rel), "staging/run/%s", dir), age_s);
}

static int in_view(const char *name)
{
	char path[300];

	return tw_in_view(&env, pathf(path, sizeof(path), "run/%s", name));
}

static void test_idle_scan(void)
{
	struct ck_writer *w = open_writer(0);
	struct ck_staging *s = ck_writer_staging(w);
	uint64_t top, file;

	stage("checkpoint-10", -3600);
	tw_mkdirs(&env, "staging/run/checkpoint-11");	/* no file */
	tw_age(&env, "staging/run/checkpoint-11", -3600);
	stage("tmp-12", -3600);		/* no step */
	stage(".checkpoint-13", -3600);	/* a dot name */
	stage("checkpoint-14", 3600);	/* written "later": not at rest */
	stage("checkpoint-15", -3600);	/* a file open */
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-15", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "model.safetensors", NULL, &file) == 0);
	SETUP(ck_staging_open_begin(s, file, 0) == 0);
	tw_mkdirs(&env, "staging/run/checkpoint-16/sub");	/* its file a level down */
	tw_safetensors(&env, "staging/run/checkpoint-16/sub/model.safetensors", 0);
	tw_age(&env, "staging/run/checkpoint-16", -3600);
	ckw_idle_scan(w, 60);
	CHECK(in_view("checkpoint-10") && in_view("checkpoint-16"), "idle directories did not commit");
	CHECK(!tw_exists(&env, "staging/run/checkpoint-10") && !tw_exists(&env, "staging/run/checkpoint-16"),
	      "committed directories are still staged");
	CHECK(tw_exists(&env, "staging/run/checkpoint-11") && tw_exists(&env, "staging/run/tmp-12") &&
	      tw_exists(&env, "staging/run/.checkpoint-13") && tw_exists(&env, "staging/run/checkpoint-14") &&
	      tw_exists(&env, "staging/run/checkpoint-15"), "a directory not at rest was committed");
	/* The rest must be as long as asked. */
	stage("checkpoint-17", -100);
	ckw_idle_scan(w, 1000);
	CHECK(!in_view("checkpoint-17"), "committed after less rest than asked");
	ckw_idle_scan(w, 60);
	CHECK(in_view("checkpoint-17"), "checkpoint-17 did not commit once at rest");
	/* Closed: it commits. */
	ck_staging_open_end(s, file, 0);
	ckw_idle_scan(w, 60);
	CHECK(in_view("checkpoint-15"), "checkpoint-15 did not commit once closed");
	ck_writer_close(w);
}

static int committed_18(void *arg)
{
	(void)arg;
	return in_view("checkpoint-18");
}

static int committed_at_start(void *arg)
{
	(void)arg;
	return in_view("checkpoint-19") && tw_in_view(&env, "mega/iter_0000020");
}

static void test_running_writer(void)
{
	struct ck_writer *w;
	struct ck_staging *s;
	struct timespec pause = { 0, (long)(3 * GRACE_NS) };
	uint64_t top, file;
	char p[1024];

	/* Markers that landed while no daemon ran. */
	tw_dcp(&env, "staging/run/checkpoint-19");
	tw_mkdirs(&env, "staging/mega/iter_0000020");
	tw_safetensors(&env, "staging/mega/iter_0000020/model.safetensors", 0);
	tw_text(&env, "staging/mega/" CK_MARKER_MEGATRON, "20\n");
	w = open_writer(GRACE_S);
	s = ck_writer_staging(w);
	ck_writer_start(w);
	CHECK(tw_wait_for(committed_at_start, NULL), "the rescan at start did not commit");

	/* trainer_state.json with a file still open: no commit, however long. */
	stage("checkpoint-18", 0);
	tw_text(&env, "staging/run/checkpoint-18/trainer_state.json", "{}");
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-18", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "model.safetensors", NULL, &file) == 0);
	SETUP(ck_staging_open_begin(s, file, 1) == 0);
	ck_writer_marker_check(w, tw_path(&env, p, sizeof(p), "staging/run/checkpoint-18/trainer_state.json"));
	CHECK(tw_exists(&env, "staging/run/checkpoint-18"), "committed at once despite the grace");
	nanosleep(&pause, NULL);
	CHECK(!in_view("checkpoint-18"), "committed with a file open");
	/* Its last close: committed after the grace. */
	ck_writer_released(w, file, 1, ck_staging_open_end(s, file, 1));
	CHECK(tw_wait_for(committed_18, NULL), "checkpoint-18 never committed");
	ck_writer_stop(w);
	ck_writer_close(w);
}

int main(int argc, char **argv)
{
	/* Sanitizer builds run commits in this binary's helper mode. */
	if (ck_writer_helper_wanted(argc, argv))
		return ck_writer_helper_main(argc, argv);
	tw_init(&env, "t_writer_timers");
	tw_open_view(&env);
	test_grace();
	test_idle_scan();
	test_running_writer();
	tw_cleanup(&env);
	return test_result();
}
