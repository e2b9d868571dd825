/* The GPU health watcher in the daemon (-o health=nvml): a thin adapter
 * over include/ckptfs/health.h.  A ticker thread samples every
 * health_interval seconds; the series' histories come from the view
 * (ck_health_view_history); health.json is an entry of the control
 * directory and the flag a series file (include/ckptfs/ctldir.h), both
 * rendered at each open.  Commits through the mount clear a
 * series' flag at once (ckfs_health_committed, from the writer's committed
 * callback in notify.c); the tick also sees commits it was not told of. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/clock.h"
#include "ckptfs/ctldir.h"
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

/* A file of the bytes render gave, or render's error (-ENOENT: none now). */
static int as_file(struct ck_view *v, int rc, struct ck_buf *b, struct ck_vfile **out)
{
	if (!rc)
		rc = ck_vfile_from_bytes(v, "json", b->data, b->len, out);
	ck_buf_free(b);
	return rc;
}

static int health_json_file(void *ctx, struct ck_view *v, struct ck_vfile **out)
{
	struct ckfs_health *hr = ctx;
	struct ck_buf b = CK_BUF_INIT;

	return as_file(v, ck_health_json(hr->h, &b), &b, out);
}

static int flag_file(void *ctx, const char *series, struct ck_view *v, struct ck_vfile **out)
{
	struct ckfs_health *hr = ctx;
	struct ck_buf b = CK_BUF_INIT;

	return as_file(v, ck_health_flag(hr->h, series, &b), &b, out);
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
	o.history = ck_health_view_history;
	o.history_ctx = fs->view;
	rc = ck_health_new(&o, &hr->h);
	if (!rc)
		rc = ck_ctl_register_file(fs->ctl, "health.json", health_json_file, hr);
	if (!rc)
		rc = ck_ctl_register_series_file(fs->ctl, ck_health_flag_name(hr->h), flag_file, hr);
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
