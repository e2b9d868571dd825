/* Idle commits (idle.h). */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "ckptfs/ticker.h"
#include "idle.h"
#include "tree_age.h"

struct ckw_idler {
	struct ck_writer *w;
	unsigned secs;
	struct ck_ticker ticker;
};

static void check_dir(struct ck_writer *w, unsigned secs, const char *series, const char *name, int fd)
{
	int64_t newest = 0;
	size_t files = 0;
	int64_t step;
	int rc;

	if (ck_writer_step_of(w, series, name, &step) != 0) {
		close(fd);
		return;
	}
	if (ckw_tree_newest_fd(fd, &newest, &files) || files == 0 ||
	    ck_now_ns() - newest < (int64_t)secs * 1000000000)
		return;
	rc = ck_writer_commit_dir(w, series, name, CK_WRITER_CLOSED | CK_WRITER_AT_REST);
	if (rc && rc != -EAGAIN && rc != -EBUSY)   /* EBUSY: written on another node; the next tick looks again */
		ck_warn("%s/%s: idle commit: %s", series, name, strerror(-rc));
}

static void check_series(struct ck_writer *w, unsigned secs, int top, const char *series)
{
	int fd = openat(top, series, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		int sub;

		if (de->d_name[0] == '.')
			continue;	/* dot names are temporary by convention */
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			check_dir(w, secs, series, de->d_name, sub);
	}
	closedir(d);
}

void ckw_idle_scan(struct ck_writer *w, unsigned secs)
{
	char *top = ck_staging_top_path(w->staging, "", NULL);
	struct dirent *de;
	DIR *d = top ? opendir(top) : NULL;

	free(top);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			check_series(w, secs, dirfd(d), de->d_name);
	closedir(d);
}

static void idle_tick(void *arg)
{
	struct ckw_idler *r = arg;

	ckw_idle_scan(r->w, r->secs);
}

int ckw_idler_start(struct ckw_idler **out, struct ck_writer *w, unsigned secs)
{
	struct ckw_idler *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->w = w;
	r->secs = secs;
	/* Checked every second; secs is how long a directory must be quiet. */
	rc = ck_ticker_start(&r->ticker, 1, idle_tick, r);
	if (rc) {
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void ckw_idler_stop(struct ckw_idler *r)
{
	if (!r)
		return;
	ck_ticker_stop(&r->ticker);
	free(r);
}
