/* The GPU health watcher in the daemon (-o health=nvml): a thin adapter
 * over include/ckptfs/health.h.  A ticker thread samples every
 * health_interval seconds; the series' histories come from the view (each
 * committed checkpoint's step and newest file mtime); health.json and the
 * flags are control files (control.c).  Commits through the mount clear a
 * series' flag at once (ckfs_health_committed, from the writer's committed
 * callback in notify.c); the tick also sees commits it was not told of. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/clock.h"
#include "ckptfs/ctl.h"
#include "ckptfs/health.h"
#include "ckptfs/log.h"
#include "ckptfs/ticker.h"
#include "ckptfs/writer.h"
#include "health.h"
#include "mount.h"

struct ckfs_health {
	struct ck_health *h;
	struct ck_ticker ticker;
	struct ckfs *fs;
};

/* Committed checkpoints of series from the view: those with a step. */
static int view_history(void *ctx, const char *series, struct ck_health_ckpt **out, size_t *n)
{
	struct ckfs *fs = ctx;
	const struct ck_vnode *dir, **kids = NULL;
	struct ck_health_ckpt *c;
	size_t nk = 0, m = 0;
	uint64_t changes;
	int rc;

	*out = NULL;
	*n = 0;
	rc = ck_view_lookup(fs->view, ck_view_root(fs->view), series, &dir);
	if (rc == -ENOENT)
		return 0;   /* nothing committed yet */
	if (rc == 0)
		rc = ck_view_children(fs->view, dir, &kids, &nk, &changes);
	if (rc)
		return rc;
	c = calloc(nk ? nk : 1, sizeof(*c));
	if (!c) {
		free(kids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nk; i++) {
		struct ck_buf step = CK_BUF_INIT;
		struct ck_vattr a;

		if (ck_view_getxattr(fs->view, kids[i], "user.ckptfs.step", &step) == 0 &&
		    ck_buf_putc(&step, '\0') == 0 && ck_view_getattr(fs->view, kids[i], &a) == 0) {
			c[m].step = strtoll((const char *)step.data, NULL, 10);
			c[m].time_ns = a.mtime_ns;
			m++;
		}
		ck_buf_free(&step);
	}
	free(kids);
	*out = c;
	*n = m;
	return 0;
}

static int render_json(void *ctx, const char *series, struct ck_buf *out)
{
	struct ckfs_health *hr = ctx;

	(void)series;
	return ck_health_json(hr->h, out);
}

static int render_flag(void *ctx, const char *series, struct ck_buf *out)
{
	struct ckfs_health *hr = ctx;

	return ck_health_flag(hr->h, series, out);
}

static void health_tick(void *arg)
{
	struct ckfs_health *hr = arg;

	ck_health_tick(hr->h, ck_now_ns());
}

int ckfs_health_setup(struct ckfs *fs)
{
	const struct ckfs_config *cfg = fs->cfg;
	struct ck_health_opts o;
	struct ckfs_health *hr;
	int rc;

	if (!cfg->health)
		return 0;
	hr = calloc(1, sizeof(*hr));
	if (!hr)
		return -ENOMEM;
	ck_health_defaults(&o);
	o.interval_secs = cfg->health_interval;
	o.threshold = cfg->risk_threshold;
	o.gap = cfg->emergency_gap;
	if (cfg->emergency_flag)
		o.flag_name = cfg->emergency_flag;
	o.history = view_history;
	o.history_ctx = fs;
	rc = ck_health_new(&o, &hr->h);
	if (!rc)
		rc = ck_ctl_add(fs->ctl, "health.json", 0, render_json, hr);
	if (!rc)
		rc = ck_ctl_add(fs->ctl, ck_health_flag_name(hr->h), 1, render_flag, hr);
	if (rc) {
		ck_health_free(hr->h);
		free(hr);
		return rc;
	}
	hr->fs = fs;
	fs->health = hr;
	return 0;
}

void ckfs_health_start(struct ckfs *fs)
{
	struct ckfs_health *hr = fs->health;

	if (!hr)
		return;
	/* The first sample at once: a machine without NVML says so at mount. */
	health_tick(hr);
	if (ck_ticker_start(&hr->ticker, fs->cfg->health_interval, health_tick, hr))
		ck_warn("cannot start the GPU health thread: no more samples after the first");
}

void ckfs_health_stop(struct ckfs *fs)
{
	if (fs->health)
		ck_ticker_stop(&fs->health->ticker);
}

void ckfs_health_wrote(struct ckfs *fs, const char *series)
{
	if (fs->health && ck_health_watch(fs->health->h, series))
		ck_warn("GPU health: out of memory: %s gets no emergency flag", series);
}

void ckfs_health_committed(struct ckfs *fs, const char *series, const char *name)
{
	int64_t step;

	if (fs->health && fs->writer && ck_writer_step_of(fs->writer, series, name, &step) == 0)
		ck_health_committed(fs->health->h, series, step);
}

void ckfs_health_free(struct ckfs *fs)
{
	if (!fs->health)
		return;
	ck_health_free(fs->health->h);
	free(fs->health);
	fs->health = NULL;
}
