/* Commits of staged directories into a real store through the writer
 * API, without FUSE: a rename commit, a torn file quarantined, EBUSY while
 * claimed, commits under their own name (not without a step, not with a
 * file open), every kind of completion marker and the switch that turns
 * one off, the last close of another file completing a marked directory,
 * a series' stored step pattern, the listing of in-progress directories,
 * and a deletion.  Other nodes: a commit another node did first is done,
 * an idle commit of a directory written elsewhere waits, and a directory
 * committed elsewhere is found at once.  The view follows each commit at
 * once. */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/error.h"
#include "ckptfs/store.h"
#include "ckptfs/writer.h"
#include "t_writer_util.h"
#include "testutil.h"

static struct tw_env env;

static struct ck_writer *open_writer(unsigned markers, char **files, size_t nfiles)
{
	struct ck_writer_opts opts = { .markers = markers, .marker_files = files, .nmarker_files = nfiles,
				       .marker_grace = 1 };
	struct ck_writer_notify notify = tw_notify(&env);
	struct ck_writer *w;

	SETUP(ck_writer_open(env.store, env.view, &opts, &notify, -1, &w) == 0);
	return w;
}

/* STORE/staging/SERIES/DIR with one valid safetensors file. */
static void stage(const char *series, const char *dir)
{
	char rel[600];

	tw_mkdirs(&env, pathf(rel, sizeof(rel), "staging/%s/%s", series, dir));
	tw_safetensors(&env, pathf(rel, sizeof(rel), "staging/%s/%s/model.safetensors", series, dir), 0);
	tw_text(&env, pathf(rel, sizeof(rel), "staging/%s/%s/config.json", series, dir), "{}\n");
}

static void marker_check(struct ck_writer *w, const char *rel)
{
	char p[1024];

	ck_writer_marker_check(w, tw_path(&env, p, sizeof(p), rel));
}

static int committed(const char *series, const char *name)
{
	char path[600], rel[600];

	pathf(path, sizeof(path), "%s/%s", series, name);
	return tw_in_view(&env, path) && tw_exists(&env, pathf(rel, sizeof(rel), "data/%s/%s", series, name)) &&
	       !tw_exists(&env, pathf(rel, sizeof(rel), "staging/%s/%s", series, name));
}

static int quarantined(const char *series, const char *name)
{
	char cmd[1200];
	char *out = run_output(pathf(cmd, sizeof(cmd), "ls '%s/quarantine/%s' 2>/dev/null | grep '^%s\\.'",
				     env.store, series, name));
	int found = out != NULL;

	free(out);
	return found;
}

static void test_rename_commits(struct ck_writer *w)
{
	struct ck_staging *s = ck_writer_staging(w);
	uint64_t top;
	int status = 0;
	pid_t pid;
	char *p;

	stage("run", "tmp-5");
	SETUP(ck_staging_get(s, 0, "run", "tmp-5", NULL, &top) == 0);
	env.inodes_calls = env.names_calls = 0;
	CHECK(ck_writer_commit_now(w, "run", "tmp-5", "checkpoint-5") == 0, "commit of tmp-5");
	CHECK(committed("run", "checkpoint-5"), "checkpoint-5 is not in the view and data/");
	CHECK(!tw_exists(&env, "staging/run/tmp-5"), "tmp-5 still staged");
	CHECK(ck_staging_path(s, top, NULL, &p) == -ESTALE, "the committed directory kept its node");
	CHECK(env.inodes_calls > 0, "the view's changes were not notified");
	CHECK(env.names_calls == 0, "a rename commit notified names before its reply");

	/* A file that does not parse: quarantined, -EIO, the series unchanged. */
	stage("run", "tmp-6");
	tw_safetensors(&env, "staging/run/tmp-6/model.safetensors", 3);
	CHECK(ck_writer_commit_now(w, "run", "tmp-6", "checkpoint-6") == -EIO, "commit of a torn file");
	CHECK(quarantined("run", "tmp-6") && !tw_exists(&env, "staging/run/tmp-6"), "tmp-6 not quarantined");
	CHECK(!tw_in_view(&env, "run/checkpoint-6"), "a torn checkpoint is in the view");

	/* Claimed by another commit: EBUSY, nothing moved. */
	stage("run", "tmp-7");
	SETUP(ck_staging_get(s, 0, "run", "tmp-7", NULL, &top) == 0);
	SETUP(ck_staging_claim(s, "run", "tmp-7", 0) == 0);
	CHECK(ck_writer_commit_now(w, "run", "tmp-7", "checkpoint-7") == -EBUSY, "commit of a claimed dir");
	CHECK(tw_exists(&env, "staging/run/tmp-7/model.safetensors"), "a refused commit moved the dir");
	ck_staging_unclaim(s, "run", "tmp-7");
	/* The store's refusals come back as they are. */
	CHECK(ck_writer_commit_now(w, "run", "tmp-7", "checkpoint-5") == -EEXIST, "committed twice");
	CHECK(ck_writer_commit_now(w, "run", "tmp-7", "latest") == -EINVAL, "a name without a step");
	CHECK(ck_writer_commit_now(w, "run", "nothing", "checkpoint-8") == -ENOENT, "no such directory");
	CHECK(ck_writer_commit_now(w, "run", "tmp-7", "checkpoint-7") == 0, "commit after the claim");
	CHECK(committed("run", "checkpoint-7"), "checkpoint-7");

	/* Committed by another node meanwhile (here another process): done,
	 * and the view shows it. */
	stage("run", "tmp-9");
	SETUP(ck_staging_get(s, 0, "run", "tmp-9", NULL, &top) == 0);
	pid = fork();
	SETUP(pid >= 0);
	if (pid == 0) {
		struct ck_error err = { { 0 } };
		struct ck_store *other;

		_exit(ck_store_open(env.store, 0, &other, &err) == 0 &&
		      ck_store_commit_staged(other, "run", "tmp-9", "checkpoint-9", NULL, NULL, &err) == 0 ? 0 : 1);
	}
	SETUP(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(ck_writer_commit_now(w, "run", "tmp-9", "checkpoint-9") == 0, "a commit another node did first");
	CHECK(committed("run", "checkpoint-9"), "checkpoint-9 is not in the view");
	CHECK(ck_staging_path(s, top, NULL, &p) == -ESTALE, "the directory committed elsewhere kept its node");
}

/* A directory this mount saw in progress, committed by another node: the
 * lookup that misses it catches the view up at once. */
static void test_moved_elsewhere(struct ck_writer *w)
{
	struct ck_staging *s = ck_writer_staging(w);
	int status = 0;
	uint64_t top;
	pid_t pid;

	stage("run", "checkpoint-12");
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-12", NULL, &top) == 0);
	CHECK(ck_writer_moved_elsewhere(w, "run", "checkpoint-12") == 0, "still staged, but moved elsewhere");
	CHECK(ck_writer_moved_elsewhere(w, "run", "checkpoint-404") == 0, "never seen, but moved elsewhere");
	pid = fork();
	SETUP(pid >= 0);
	if (pid == 0) {
		struct ck_error err = { { 0 } };
		struct ck_store *other;

		_exit(ck_store_open(env.store, 0, &other, &err) == 0 &&
		      ck_store_commit_staged(other, "run", "checkpoint-12", NULL, NULL, NULL, &err) == 0 ? 0 : 1);
	}
	SETUP(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!tw_in_view(&env, "run/checkpoint-12"), "the view caught up by itself");
	CHECK(ck_writer_moved_elsewhere(w, "run", "checkpoint-12") == 1, "a commit elsewhere not noticed");
	CHECK(tw_in_view(&env, "run/checkpoint-12"), "the view did not catch up");
	CHECK(ck_writer_moved_elsewhere(w, "run", "checkpoint-12") == 0, "noticed twice");
}

/* SIGKILL to this process's children (a commit child stuck for good). */
static void kill_children(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	while (d && (e = readdir(d)) != NULL) {
		char path[300];
		long pid;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		f = fopen(pathf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name), "r");
		while (f && fscanf(f, "%ld", &pid) == 1)
			kill((pid_t)pid, SIGKILL);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
}

struct bg_commit {
	struct ck_writer *w;
	int rc;
};

static void *commit_tmp_14(void *arg)
{
	struct bg_commit *c = arg;

	c->rc = ck_writer_commit_now(c->w, "run", "tmp-14", "checkpoint-14");
	return NULL;
}

/* A lock this process holds when the commit child is forked (a refresh of
 * the view holding the index lock) is the parent's alone: once given up,
 * the child, whose store open takes it exclusive, goes on. */
static void test_fork_keeps_no_lock(struct ck_writer *w)
{
	struct bg_commit c = { w, 1 };
	struct timespec until;
	char path[600];
	pthread_t t;
	int fd;

	stage("run", "tmp-14");
	fd = open(pathf(path, sizeof(path), "%s/index.lock", env.store), O_RDWR | O_CLOEXEC);
	SETUP(fd >= 0 && flock(fd, LOCK_SH) == 0);
	SETUP(pthread_create(&t, NULL, commit_tmp_14, &c) == 0);
	usleep(300000);
	close(fd);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	if (pthread_timedjoin_np(t, NULL, &until) != 0) {
		CHECK(0, "the commit child waited for a lock its parent gave up");
		kill_children();
		exit(test_result());   /* the thread is stuck in waitpid */
	}
	CHECK(c.rc == 0 && committed("run", "checkpoint-14"), "commit with a lock held at the fork: %d", c.rc);
}

static void test_own_name_commits(struct ck_writer *w)
{
	struct ck_staging *s = ck_writer_staging(w);
	uint64_t top, file;

	stage("run", "checkpoint-8");
	env.names_calls = 0;
	CHECK(ck_writer_commit_dir(w, "run", "checkpoint-8", CK_WRITER_CLOSED) == 0, "commit_dir");
	CHECK(committed("run", "checkpoint-8"), "checkpoint-8");
	CHECK(env.names_calls == 1 && !strcmp(env.names_series, "run") && !strcmp(env.names_old, "checkpoint-8") &&
	      !strcmp(env.names_new, "checkpoint-8"), "names notified: %u, %s %s %s", env.names_calls,
	      env.names_series, env.names_old, env.names_new);
	/* At rest here, written on another node: not now, and at once. */
	stage("run", "checkpoint-13");
	{
		struct ck_error err = { { 0 } };
		int other;

		SETUP(ck_writers_share(env.store, "run", "checkpoint-13", &other, &err) == 0);
		CHECK(ck_writer_commit_dir(w, "run", "checkpoint-13", CK_WRITER_CLOSED | CK_WRITER_AT_REST) == -EBUSY,
		      "an idle commit of a directory written elsewhere");
		CHECK(tw_exists(&env, "staging/run/checkpoint-13/model.safetensors"), "it moved all the same");
		ck_writers_unlock(other);
		CHECK(ck_writer_commit_dir(w, "run", "checkpoint-13", CK_WRITER_CLOSED | CK_WRITER_AT_REST) == 0,
		      "an idle commit once nobody writes");
		CHECK(committed("run", "checkpoint-13"), "checkpoint-13");
	}
	stage("run", "tmp-9");
	CHECK(ck_writer_commit_dir(w, "run", "tmp-9", CK_WRITER_CLOSED) == -EAGAIN, "commit_dir without a step");
	CHECK(ck_writer_commit_dir(w, "run", "checkpoint-404", CK_WRITER_CLOSED) == -EAGAIN, "commit_dir of nothing");
	tw_text(&env, "staging/run/checkpoint-10", "a file");
	CHECK(ck_writer_commit_dir(w, "run", "checkpoint-10", CK_WRITER_CLOSED) == -EAGAIN, "commit_dir of a file");

	/* A file open in it: not now; a rename commit would not wait. */
	stage("run", "checkpoint-11");
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-11", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "model.safetensors", NULL, &file) == 0);
	SETUP(ck_staging_open_begin(s, file, 1) == 0);
	CHECK(ck_writer_commit_dir(w, "run", "checkpoint-11", CK_WRITER_CLOSED) == -EAGAIN, "commit_dir with a file open");
	CHECK(!ck_staging_busy(s, file), "a refused commit left its claim");
	CHECK(ck_writer_commit_dir(w, "run", "checkpoint-11", 0) == 0, "commit_dir that need not wait");
	CHECK(committed("run", "checkpoint-11"), "checkpoint-11");
	ck_staging_open_end(s, file, 1);
}

static void test_markers(void)
{
	char *files[] = { "DONE" };
	struct ck_writer *w = open_writer(CK_MARK_ALL, files, 1), *off;
	struct ck_staging *s = ck_writer_staging(w);
	uint64_t top, file;

	/* DCP: .metadata, also by its rename from .metadata.tmp (the caller
	 * asks after the rename). */
	tw_dcp(&env, "staging/run/checkpoint-20");
	marker_check(w, "staging/run/checkpoint-20/.metadata");
	CHECK(committed("run", "checkpoint-20"), "DCP .metadata did not commit");

	/* Hugging Face and user-named markers, before the grace thread
	 * starts: at once. */
	stage("run", "checkpoint-21");
	tw_text(&env, "staging/run/checkpoint-21/trainer_state.json", "{}");
	marker_check(w, "staging/run/checkpoint-21/trainer_state.json");
	CHECK(committed("run", "checkpoint-21"), "trainer_state.json did not commit");
	stage("run", "checkpoint-22");
	tw_text(&env, "staging/run/checkpoint-22/DONE", "");
	marker_check(w, "staging/run/checkpoint-22/DONE");
	CHECK(committed("run", "checkpoint-22"), "the user-named marker did not commit");
	stage("run", "checkpoint-23");
	tw_text(&env, "staging/run/checkpoint-23/NOTDONE", "");
	marker_check(w, "staging/run/checkpoint-23/NOTDONE");
	CHECK(!committed("run", "checkpoint-23") && tw_exists(&env, "staging/run/checkpoint-23"),
	      "a file that is no marker committed");

	/* Megatron and DeepSpeed: the series marker names the directory. */
	stage("mega", "iter_0000031");
	tw_text(&env, "staging/mega/" CK_MARKER_MEGATRON, "31\n");
	marker_check(w, "staging/mega/" CK_MARKER_MEGATRON);
	CHECK(committed("mega", "iter_0000031"), "Megatron's marker did not commit");
	stage("mega", "release");
	tw_text(&env, "staging/mega/" CK_MARKER_MEGATRON, "release\n");
	marker_check(w, "staging/mega/" CK_MARKER_MEGATRON);
	CHECK(tw_exists(&env, "staging/mega/release"), "Megatron's release was committed");
	stage("ds", "global_step32");
	tw_text(&env, "staging/ds/latest", "global_step32");
	marker_check(w, "staging/ds/latest");
	CHECK(committed("ds", "global_step32"), "DeepSpeed's marker did not commit");
	/* A directory whose series marker landed first commits at its last file. */
	stage("ds", "global_step33");
	tw_text(&env, "staging/ds/latest", "global_step33\n");
	marker_check(w, "staging/ds/global_step33/config.json");
	CHECK(committed("ds", "global_step33"), "a directory named by the series marker did not commit");

	/* The marker is there, another file still open: its last close commits. */
	tw_dcp(&env, "staging/run/checkpoint-24");
	tw_safetensors(&env, "staging/run/checkpoint-24/model.safetensors", 0);
	SETUP(ck_staging_get(s, 0, "run", "checkpoint-24", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "model.safetensors", NULL, &file) == 0);
	SETUP(ck_staging_open_begin(s, file, 1) == 0);
	marker_check(w, "staging/run/checkpoint-24/.metadata");
	CHECK(!committed("run", "checkpoint-24"), "committed with a file open");
	ck_writer_released(w, file, 1, ck_staging_open_end(s, file, 1));
	CHECK(committed("run", "checkpoint-24"), "the last close did not commit");

	/* Markers not chosen are files like any other. */
	off = open_writer(CK_MARK_HF, NULL, 0);
	tw_dcp(&env, "staging/run/checkpoint-25");
	marker_check(off, "staging/run/checkpoint-25/.metadata");
	CHECK(!committed("run", "checkpoint-25"), "DCP committed though not chosen");
	stage("mega2", "iter_0000026");
	tw_text(&env, "staging/mega2/" CK_MARKER_MEGATRON, "26");
	marker_check(off, "staging/mega2/" CK_MARKER_MEGATRON);
	CHECK(!committed("mega2", "iter_0000026"), "Megatron committed though not chosen");
	stage("run", "checkpoint-27");
	tw_text(&env, "staging/run/checkpoint-27/DONE", "");
	marker_check(off, "staging/run/checkpoint-27/DONE");
	CHECK(!committed("run", "checkpoint-27"), "a user marker committed though not chosen");
	/* Outside STORE/staging nothing happens. */
	ck_writer_marker_check(off, "/etc/passwd");
	ck_writer_close(off);
	ck_writer_close(w);
}

static char *state_of(struct ck_writer *w, const char *rel)
{
	struct ck_buf b = CK_BUF_INIT;
	char p[1024];

	SETUP(ck_writer_file_state(w, tw_path(&env, p, sizeof(p), rel), &b) == 0 && ck_buf_putc(&b, '\0') == 0);
	return (char *)ck_buf_steal(&b, NULL);
}

static int parsed(void *arg)
{
	char *st = state_of(arg, "staging/run/tmp-30/model.safetensors");
	int done = strcmp(st, "in progress: parsed: safetensors, 1 tensors") == 0;

	free(st);
	return done;
}

/* Files are queued for their parse at the last close of a handle that
 * wrote, and only then; series markers never. */
static void test_parse_at_close(struct ck_writer *w)
{
	struct ck_staging *s = ck_writer_staging(w);
	uint64_t top, file, marker;
	char *st;

	stage("run", "tmp-30");
	tw_text(&env, "staging/run/latest", "tmp-30");
	SETUP(ck_staging_get(s, 0, "run", "tmp-30", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "model.safetensors", NULL, &file) == 0);
	SETUP(ck_staging_get(s, 0, "run", "latest", NULL, &marker) == 0);
	SETUP(ck_staging_open_begin(s, file, 1) == 0 && ck_staging_open_begin(s, file, 1) == 0);
	ck_writer_released(w, file, 1, ck_staging_open_end(s, file, 1));
	st = state_of(w, "staging/run/tmp-30/model.safetensors");
	CHECK(!strcmp(st, "in progress: being written"), "queued with a handle open: %s", st);
	free(st);
	ck_writer_released(w, file, 0, 0);	/* a reader's close */
	st = state_of(w, "staging/run/tmp-30/model.safetensors");
	CHECK(!strcmp(st, "in progress: being written"), "queued by a reader's close: %s", st);
	free(st);
	ck_writer_released(w, marker, 1, 0);
	st = state_of(w, "staging/run/latest");
	CHECK(!strcmp(st, "in progress: being written"), "a series marker queued: %s", st);
	free(st);
	ck_writer_released(w, file, 1, ck_staging_open_end(s, file, 1));
	CHECK(tw_wait_for(parsed, w), "never parsed after its last close");
	CHECK(tw_exists(&env, "staging/run/tmp-30"), "a temporary name committed");
}

static void test_stored_pattern(struct ck_writer *w)
{
	int64_t step = -1;
	char *final = NULL;

	CHECK(ck_writer_step_of(w, "pat", "ep7", &step) == 0 && step == 7, "ep7 under pat's pattern");
	CHECK(ck_writer_step_of(w, "pat", "checkpoint-7", &step) == -EINVAL, "the pattern replaces the built-ins");
	CHECK(ck_writer_step_of(w, "run", "checkpoint-7", &step) == 0 && step == 7, "built-ins elsewhere");
	CHECK(ck_writer_step_of(w, "new-series", "ep7", &step) == -EINVAL, "a new series has the built-ins");
	CHECK(ck_writer_is_commit_rename(w, "pat", "checkpoint-3", "ep3"), "pat: checkpoint-3 -> ep3 commits");
	CHECK(!ck_writer_is_commit_rename(w, "pat", "tmp", "checkpoint-3"), "pat: tmp -> checkpoint-3");
	CHECK(!ck_writer_is_commit_rename(w, "run", "checkpoint-3", "ep3"), "run: checkpoint-3 -> ep3");
	CHECK(ck_writer_commit_target(w, "pat", "tmp", "ep4", 3, &final) == 0 && !strcmp(final, "ep4"), "target");
	free(final);
	CHECK(ck_writer_commit_target(w, "pat", "tmp", "checkpoint-4", 12, &final) == -EINVAL, "pattern target");

	stage("pat", "tmp-x");
	CHECK(ck_writer_commit_now(w, "pat", "tmp-x", "ep2") == 0, "commit under the stored pattern");
	CHECK(committed("pat", "ep2"), "pat/ep2");
	stage("pat", "ep3");
	CHECK(ck_writer_commit_dir(w, "pat", "ep3", CK_WRITER_CLOSED) == 0, "commit_dir under the stored pattern");
	CHECK(committed("pat", "ep3"), "pat/ep3");
}

static int has(char **v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], name))
			return 1;
	return 0;
}

static void test_staged_names(struct ck_writer *w)
{
	struct ck_staging *s = ck_writer_staging(w);
	const struct ck_vnode *dir;
	uint64_t top;
	char **names;
	size_t n;

	stage("run", "checkpoint-40");
	tw_mkdirs(&env, "staging/run/.hidden");
	tw_mkdirs(&env, "staging/fresh/tmp");
	SETUP(ck_view_resolve(env.view, "run", &dir) == 0);
	SETUP(ck_writer_staged_names(w, "run", dir, &names, &n) == 0);
	CHECK(has(names, n, "checkpoint-40") && has(names, n, "tmp-9"), "in-progress directories missing");
	CHECK(!has(names, n, ".hidden") && !has(names, n, "checkpoint-10") && !has(names, n, "checkpoint-5"),
	      "a dot name, a file or a committed checkpoint listed");
	ck_strv_free(names, n);
	/* Moved out by a commit, not in the view yet: still listed. */
	SETUP(ck_staging_get(s, 0, "run", "moving", NULL, &top) == 0);
	SETUP(ck_staging_claim(s, "run", "moving", 0) == 0);
	SETUP(ck_writer_staged_names(w, "run", dir, &names, &n) == 0);
	CHECK(has(names, n, "moving"), "a directory being committed vanished from the listing");
	ck_strv_free(names, n);
	ck_staging_unclaim(s, "run", "moving");
	/* The root: series being written that the view does not have. */
	SETUP(ck_writer_staged_names(w, NULL, ck_view_root(env.view), &names, &n) == 0);
	CHECK(has(names, n, "fresh") && !has(names, n, "run"), "series listed at the root");
	ck_strv_free(names, n);
	SETUP(ck_writer_staged_names(w, "fresh", NULL, &names, &n) == 0);
	CHECK(n == 1 && has(names, n, "tmp"), "a series with no view directory");
	ck_strv_free(names, n);
}

static void test_delete(struct ck_writer *w)
{
	CHECK(ck_writer_delete(w, "run", "checkpoint-5") == 0, "delete");
	ck_writer_catch_up(w);
	CHECK(!tw_in_view(&env, "run/checkpoint-5"), "a deleted checkpoint stays in the view");
	CHECK(tw_in_view(&env, "run/checkpoint-7"), "the deletion took another checkpoint");
	CHECK(ck_writer_delete(w, "run", "checkpoint-5") == -ENOENT, "deleted twice");
}

static void test_helper_mode(void)
{
	char *commit[] = { "ckptfs", "--commit-helper", "S", "A", "B", "C", NULL };
	char *bad[] = { "ckptfs", "--commit-helper", "S", NULL };
	char *mount[] = { "ckptfs", "/store", "/mnt", NULL };

	CHECK(ck_writer_helper_wanted(6, commit), "a commit helper's command line");
	CHECK(!ck_writer_helper_wanted(3, mount) && !ck_writer_helper_wanted(1, mount), "a mount's command line");
	CHECK(ck_writer_helper_main(3, bad) == EINVAL, "a helper with too few arguments");
}

/* A series "pat" imported with its own step pattern, before the view opens. */
static void import_pattern_series(void)
{
	struct ck_import_opts opts = { .series = "pat", .step_pattern = "^ep([0-9]+)$" };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char src[600];

	tw_mkdirs(&env, "../src/ep1");
	tw_safetensors(&env, "../src/ep1/model.safetensors", 0);
	SETUP(ck_store_open(env.store, 0, &st, &err) == 0);
	SETUP(ck_store_import(st, pathf(src, sizeof(src), "%s/src", env.tmp), &opts, NULL, NULL, &err) == 1);
	ck_store_close(st);
}

int main(int argc, char **argv)
{
	struct ck_writer *w;

	/* Sanitizer builds run commits in this binary's helper mode. */
	if (ck_writer_helper_wanted(argc, argv))
		return ck_writer_helper_main(argc, argv);
	tw_init(&env, "t_writer_commit");
	import_pattern_series();
	tw_open_view(&env);
	w = open_writer(CK_MARK_ALL, NULL, 0);
	test_rename_commits(w);
	test_moved_elsewhere(w);
	test_fork_keeps_no_lock(w);
	test_own_name_commits(w);
	test_parse_at_close(w);
	test_stored_pattern(w);
	test_staged_names(w);
	test_delete(w);
	ck_writer_close(w);
	test_markers();
	test_helper_mode();
	tw_cleanup(&env);
	return test_result();
}
