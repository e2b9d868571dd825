/* The watcher of one mount (include/ckptfs/health.h): windows of samples
 * per GPU, the risk, and the emergency flag of each series written through
 * the mount, with the paper's gap rule.
 *
 * The gap rule needs the series' save interval, which the daemon is not
 * told: it is the median time between the series' committed checkpoints
 * (newest file mtimes), leaving out the emergency checkpoints this watcher
 * asked for, so that emergency saves never shrink the interval they are
 * measured against.  docs/design.md, "GPU health", has the whole rule. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckptfs/health.h"
#include "ckptfs/json.h"
#include "ckptfs/log.h"

#define INTERVAL_GAPS 8   /* newest regular gaps the median is taken over */

enum source_state {
	SRC_NOT_LOADED,     /* before the first tick */
	SRC_OK,
	SRC_UNAVAILABLE,    /* no library or no GPU: idle for good */
	SRC_FAILING,        /* every GPU failed the newest round: asked again at each tick */
};

struct gpu_state {
	struct ck_gpu_sample win[CK_HEALTH_WINDOW];
	size_t n;
	uint64_t samples;
	struct ck_risk risk;
	char name[96];
	char uuid[96];
	char error[128];    /* why the newest read failed; "" when it did not */
};

struct series_state {
	char *name;
	int flagged;
	uint64_t flag_id;
	struct ck_buf reason;       /* the flag file: JSON */
	int has_base;               /* the newest checkpoint when the flag went up */
	int64_t base_step;
	unsigned answered;          /* flags cleared by a commit */
	int64_t *emergency;         /* steps of those commits */
	size_t nemergency;
	/* The last decision, for health.json. */
	int has_newest;
	int64_t newest_step;
	double since_s, interval_s, interval_steps;   /* NaN: unknown */
	const char *held;           /* why the last flag the risk asked for did not go up */
	int64_t held_ns;            /* and when */
};

struct ck_health {
	pthread_mutex_t lock;
	char *nvml_lib;
	char *flag_name;
	unsigned interval_secs;
	double threshold, gap;
	ck_health_history_fn history;
	void *history_ctx;

	struct ck_nvml *nv;         /* used by the ticking thread only */
	enum source_state state;
	char state_msg[512];
	char driver[80];
	struct gpu_state *gpus;
	unsigned ngpus;
	uint64_t rounds;
	int64_t last_ns;
	int alert;                  /* the newest round reached the threshold */
	unsigned alert_gpu;
	struct series_state *series;
	size_t nseries;
	uint64_t next_flag_id;
};

void ck_health_defaults(struct ck_health_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->interval_secs = 10;
	o->threshold = 0.95;
	o->gap = 0.25;
	o->flag_name = CK_HEALTH_FLAG_NAME;
}

static int plain_name(const char *s)
{
	return s && *s && strlen(s) <= 255 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

int ck_health_new(const struct ck_health_opts *o, struct ck_health **out)
{
	struct ck_health *h;
	const char *flag = o->flag_name ? o->flag_name : CK_HEALTH_FLAG_NAME;

	*out = NULL;
	if (!(o->threshold > 0 && o->threshold <= 1) || !(o->gap >= 0 && o->gap <= 1) || !plain_name(flag))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	h->flag_name = strdup(flag);
	h->nvml_lib = strdup(o->nvml_lib ? o->nvml_lib : CK_NVML_LIBRARY);
	if (!h->flag_name || !h->nvml_lib) {
		ck_health_free(h);
		return -ENOMEM;
	}
	h->interval_secs = o->interval_secs;
	h->threshold = o->threshold;
	h->gap = o->gap;
	h->history = o->history;
	h->history_ctx = o->history_ctx;
	h->next_flag_id = 1;
	*out = h;
	return 0;
}

void ck_health_free(struct ck_health *h)
{
	if (!h)
		return;
	ck_nvml_close(h->nv);
	for (size_t i = 0; i < h->nseries; i++) {
		free(h->series[i].name);
		free(h->series[i].emergency);
		ck_buf_free(&h->series[i].reason);
	}
	free(h->series);
	free(h->gpus);
	free(h->flag_name);
	free(h->nvml_lib);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

const char *ck_health_flag_name(const struct ck_health *h)
{
	return h->flag_name;
}

/* ---- JSON pieces ---- */

/* An ISO 8601 UTC time with milliseconds, as a JSON string. */
static void jw_time(struct jw *w, int64_t ns)
{
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;
	char text[40], full[48];

	if (!gmtime_r(&secs, &tm) || !strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm)) {
		jw_null(w);
		return;
	}
	snprintf(full, sizeof(full), "%s.%03dZ", text, (int)(ns % 1000000000 / 1000000));
	jw_str(w, full);
}

static void jw_factors(struct jw *w, const struct ck_risk *r)
{
	jw_begin_obj(w);
	for (int i = 0; i < CK_RISK_NFACTORS; i++) {
		jw_key(w, ck_risk_names[i]);
		jw_double(w, r->factor[i]);
	}
	jw_end_obj(w);
}

/* ---- series ---- */

static struct series_state *find_series(struct ck_health *h, const char *name)
{
	for (size_t i = 0; i < h->nseries; i++)
		if (strcmp(h->series[i].name, name) == 0)
			return &h->series[i];
	return NULL;
}

int ck_health_watch(struct ck_health *h, const char *series)
{
	struct series_state *s;
	int rc = 0;

	pthread_mutex_lock(&h->lock);
	if (!find_series(h, series)) {
		s = realloc(h->series, (h->nseries + 1) * sizeof(*s));
		if (!s) {
			rc = -ENOMEM;
		} else {
			h->series = s;
			s = &h->series[h->nseries];
			memset(s, 0, sizeof(*s));
			s->name = strdup(series);
			s->since_s = s->interval_s = s->interval_steps = NAN;
			if (s->name)
				h->nseries++;
			else
				rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static void clear_flag(struct series_state *s, int64_t step)
{
	int64_t *e = realloc(s->emergency, (s->nemergency + 1) * sizeof(*e));

	if (e) {
		s->emergency = e;
		e[s->nemergency++] = step;
	}
	s->flagged = 0;
	s->answered++;
	ck_buf_free(&s->reason);
}

static int answers_flag(const struct series_state *s, int64_t step)
{
	return s->flagged && (!s->has_base || step > s->base_step);
}

int ck_health_committed(struct ck_health *h, const char *series, int64_t step)
{
	struct series_state *s;
	int cleared = 0;

	if (ck_health_watch(h, series))
		return 0;
	pthread_mutex_lock(&h->lock);
	s = find_series(h, series);
	if (s && answers_flag(s, step)) {
		clear_flag(s, step);
		cleared = 1;
		ck_info("GPU health: %s/%s cleared: step %lld committed", series, h->flag_name, (long long)step);
	}
	pthread_mutex_unlock(&h->lock);
	return cleared;
}

static int by_step(const void *a, const void *b)
{
	const struct ck_health_ckpt *x = a, *y = b;

	return (x->step > y->step) - (x->step < y->step);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int is_emergency(const struct series_state *s, int64_t step)
{
	for (size_t i = 0; i < s->nemergency; i++)
		if (s->emergency[i] == step)
			return 1;
	return 0;
}

/* The save interval (s and steps) from the newest INTERVAL_GAPS gaps
 * between regular checkpoints (hist sorted by step); NaN when fewer than
 * two regular checkpoints. */
static void save_interval(const struct series_state *s, const struct ck_health_ckpt *hist, size_t n,
			  double *secs, double *steps)
{
	double t[INTERVAL_GAPS], st[INTERVAL_GAPS];
	size_t m = 0;
	const struct ck_health_ckpt *later = NULL;

	for (size_t i = n; i-- > 0 && m < INTERVAL_GAPS;) {
		if (is_emergency(s, hist[i].step))
			continue;
		if (later && later->time_ns > hist[i].time_ns) {
			t[m] = (double)(later->time_ns - hist[i].time_ns) / 1e9;
			st[m] = (double)(later->step - hist[i].step);
			m++;
		}
		later = &hist[i];
	}
	*secs = median(t, m);
	*steps = median(st, m);
}

static int render_reason(struct ck_health *h, struct series_state *s, int64_t now_ns)
{
	const struct gpu_state *g = &h->gpus[h->alert_gpu];
	struct jw w = { .b = CK_BUF_INIT };
	int rc;

	jw_begin_obj(&w);
	jw_key(&w, "reason");
	jw_str(&w, "gpu_risk");
	jw_key(&w, "series");
	jw_str(&w, s->name);
	jw_key(&w, "id");
	jw_uint(&w, s->flag_id);
	jw_key(&w, "raised");
	jw_time(&w, now_ns);
	jw_key(&w, "raised_ns");
	jw_int(&w, now_ns);
	jw_key(&w, "gpu");
	jw_uint(&w, h->alert_gpu);
	jw_key(&w, "name");
	jw_str(&w, g->name);
	jw_key(&w, "uuid");
	jw_str(&w, g->uuid);
	jw_key(&w, "score");
	jw_double(&w, g->risk.score);
	jw_key(&w, "threshold");
	jw_double(&w, h->threshold);
	jw_key(&w, "factors");
	jw_factors(&w, &g->risk);
	jw_key(&w, "newest_step");
	if (s->has_newest)
		jw_int(&w, s->newest_step);
	else
		jw_null(&w);
	jw_key(&w, "since_newest_s");
	jw_double(&w, s->since_s);
	jw_key(&w, "interval_s");
	jw_double(&w, s->interval_s);
	jw_key(&w, "interval_steps");
	jw_double(&w, s->interval_steps);
	jw_key(&w, "gap");
	jw_double(&w, h->gap);
	jw_end_obj(&w);
	rc = jw_error(&w);
	if (!rc)
		rc = ck_buf_putc(&w.b, '\n');
	if (rc) {
		jw_free(&w);
		return rc;
	}
	ck_buf_free(&s->reason);
	s->reason = w.b;
	return 0;
}

/* Raises or clears the flag of s, whose committed checkpoints are hist
 * (sorted).  Returns 1 when the flag changed. */
static int decide(struct ck_health *h, struct series_state *s, const struct ck_health_ckpt *hist, size_t n,
		  int64_t now_ns)
{
	int changed = 0;

	s->has_newest = n > 0;
	s->newest_step = n ? hist[n - 1].step : 0;
	s->since_s = n ? (double)(now_ns - hist[n - 1].time_ns) / 1e9 : NAN;
	save_interval(s, hist, n, &s->interval_s, &s->interval_steps);
	if (n && answers_flag(s, hist[n - 1].step)) {
		/* A commit the mount did not report (or reported before the
		 * flag): it answers the flag all the same. */
		clear_flag(s, hist[n - 1].step);
		save_interval(s, hist, n, &s->interval_s, &s->interval_steps);
		changed = 1;
	}
	if (s->flagged || !h->alert)
		return changed;
	if (isnan(s->interval_s) && s->answered) {
		/* One emergency checkpoint answered, and still no interval to
		 * measure the next against: wait for a regular one. */
		s->held = "no save interval yet: an emergency checkpoint was taken";
		s->held_ns = now_ns;
		return changed;
	}
	if (!isnan(s->interval_s) && s->since_s < h->gap * s->interval_s) {
		s->held = "within the gap: the newest checkpoint is recent";
		s->held_ns = now_ns;
		return changed;
	}
	s->flag_id = h->next_flag_id++;
	s->has_base = n > 0;
	s->base_step = s->newest_step;
	if (render_reason(h, s, now_ns)) {
		ck_buf_free(&s->reason);
		return changed;
	}
	s->flagged = 1;
	s->held = NULL;
	ck_warn("GPU health: GPU %u risk %.3f >= %.3f: %s/%s raised", h->alert_gpu, h->gpus[h->alert_gpu].risk.score,
		h->threshold, s->name, h->flag_name);
	return 1;
}

/* ---- sampling ---- */

/* Every GPU failed this round: NVML stays loaded and is asked again at the
 * next round (a driver hiccup passes; a GPU gone shows as its error). */
static void source_failing(struct ck_health *h, const char *why)
{
	if (h->state != SRC_FAILING)
		ck_err("GPU health: NVML failed: %s; the mount goes on, NVML is asked again every round", why);
	h->state = SRC_FAILING;
	snprintf(h->state_msg, sizeof(h->state_msg), "%s", why);
}

/* Loads NVML when it is not loaded: 0 when it is there to sample. */
static int load_source(struct ck_health *h)
{
	struct ck_error err = { { 0 } };
	struct gpu_state *gpus;
	unsigned n;
	int rc;

	if (h->nv)
		return 0;
	if (h->state == SRC_UNAVAILABLE)
		return -ENODEV;
	rc = ck_nvml_open(h->nvml_lib, &h->nv, &err);
	pthread_mutex_lock(&h->lock);
	if (rc) {
		if (h->state == SRC_NOT_LOADED) {
			ck_warn("GPU health: no NVML (%s): GPU health watching is off, the mount works as before",
				err.msg);
			h->state = SRC_UNAVAILABLE;
			snprintf(h->state_msg, sizeof(h->state_msg), "%s", err.msg);
		}
		pthread_mutex_unlock(&h->lock);
		return rc;
	}
	n = ck_nvml_count(h->nv);
	if (n != h->ngpus) {
		gpus = calloc(n, sizeof(*gpus));
		if (!gpus) {
			pthread_mutex_unlock(&h->lock);
			ck_nvml_close(h->nv);
			h->nv = NULL;
			return -ENOMEM;
		}
		free(h->gpus);
		h->gpus = gpus;
		h->ngpus = n;
	}
	for (unsigned i = 0; i < n; i++) {
		struct gpu_state *g = &h->gpus[i];

		if (strcmp(g->uuid, ck_nvml_uuid(h->nv, i)) != 0) {
			memset(g, 0, sizeof(*g));   /* another GPU at this index: a new window */
			snprintf(g->uuid, sizeof(g->uuid), "%s", ck_nvml_uuid(h->nv, i));
		}
		snprintf(g->name, sizeof(g->name), "%s", ck_nvml_name(h->nv, i));
	}
	snprintf(h->driver, sizeof(h->driver), "%s", ck_nvml_driver(h->nv));
	ck_info("GPU health: watching %u GPU(s) through NVML (driver %s)", n, h->driver[0] ? h->driver : "?");
	h->state = SRC_OK;
	h->state_msg[0] = '\0';
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static void push_sample(struct gpu_state *g, const struct ck_gpu_sample *s)
{
	if (g->n == CK_HEALTH_WINDOW) {
		memmove(g->win, g->win + 1, (CK_HEALTH_WINDOW - 1) * sizeof(*g->win));
		g->n--;
	}
	g->win[g->n++] = *s;
	g->samples++;
	ck_risk_compute(g->win, g->n, &g->risk);
}

/* Samples every GPU into its window; sets h->alert.  0, or -errno when
 * there was nothing to sample. */
static int sample_round(struct ck_health *h, int64_t now_ns)
{
	struct ck_gpu_sample *s;
	char (*why)[128];
	int *rc, any_ok = 0;
	unsigned n;

	if (load_source(h))
		return -ENODEV;
	n = ck_nvml_count(h->nv);
	s = calloc(n, sizeof(*s));
	rc = calloc(n, sizeof(*rc));
	why = calloc(n, sizeof(*why));
	if (!s || !rc || !why) {
		free(s);
		free(rc);
		free(why);
		return -ENOMEM;
	}
	ck_nvml_sample(h->nv, now_ns, s, rc, why);
	pthread_mutex_lock(&h->lock);
	h->rounds++;
	h->last_ns = now_ns;
	h->alert = 0;
	for (unsigned i = 0; i < n; i++) {
		struct gpu_state *g = &h->gpus[i];

		if (rc[i]) {
			if (!g->error[0])
				ck_err("GPU health: GPU %u: %s", i, why[i]);
			snprintf(g->error, sizeof(g->error), "%s", why[i]);
			continue;
		}
		if (g->error[0])
			ck_warn("GPU health: GPU %u reads again", i);
		g->error[0] = '\0';
		any_ok = 1;
		push_sample(g, &s[i]);
		if (g->risk.score >= h->threshold && (!h->alert || g->risk.score > h->gpus[h->alert_gpu].risk.score)) {
			h->alert = 1;
			h->alert_gpu = i;
		}
	}
	if (!any_ok) {
		source_failing(h, why[0]);
	} else if (h->state == SRC_FAILING) {
		ck_warn("GPU health: NVML works again");
		h->state = SRC_OK;
		h->state_msg[0] = '\0';
	}
	pthread_mutex_unlock(&h->lock);
	free(s);
	free(rc);
	free(why);
	return any_ok ? 0 : -EIO;
}

int ck_health_tick(struct ck_health *h, int64_t now_ns)
{
	char **names = NULL;
	size_t n = 0;
	int changed = 0;

	if (sample_round(h, now_ns))
		return 0;
	/* The series' histories are read without the lock: lookups of the
	 * flags go on meanwhile. */
	pthread_mutex_lock(&h->lock);
	names = calloc(h->nseries ? h->nseries : 1, sizeof(*names));
	for (size_t i = 0; names && i < h->nseries; i++, n++)
		if (!(names[i] = strdup(h->series[i].name)))
			break;
	pthread_mutex_unlock(&h->lock);
	for (size_t i = 0; i < n; i++) {
		struct ck_health_ckpt *hist = NULL;
		size_t nh = 0;
		struct series_state *s;

		if (h->history && h->history(h->history_ctx, names[i], &hist, &nh)) {
			free(hist);
			continue;
		}
		if (nh)
			qsort(hist, nh, sizeof(*hist), by_step);
		pthread_mutex_lock(&h->lock);
		s = find_series(h, names[i]);
		if (s)
			changed += decide(h, s, hist, nh, now_ns);
		pthread_mutex_unlock(&h->lock);
		free(hist);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return changed;
}

/* ---- what the mount shows ---- */

int ck_health_flag(struct ck_health *h, const char *series, struct ck_buf *out)
{
	struct series_state *s;
	int rc = -ENOENT;

	pthread_mutex_lock(&h->lock);
	s = find_series(h, series);
	if (s && s->flagged)
		rc = ck_buf_put(out, s->reason.data, s->reason.len);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static const char *state_name(enum source_state st)
{
	switch (st) {
	case SRC_NOT_LOADED:
		return "starting";
	case SRC_OK:
		return "ok";
	case SRC_UNAVAILABLE:
		return "unavailable";
	case SRC_FAILING:
		return "failing";
	}
	return "?";
}

static void jw_metrics(struct jw *w, const struct ck_gpu_sample *s)
{
	jw_begin_obj(w);
	jw_key(w, "temperature_c");
	jw_double(w, s->temp_c);
	jw_key(w, "power_w");
	jw_double(w, s->power_w);
	jw_key(w, "utilization_gpu");
	jw_double(w, s->util_gpu);
	jw_key(w, "utilization_memory");
	jw_double(w, s->util_mem);
	jw_key(w, "memory_used");
	jw_int(w, s->mem_used);
	jw_key(w, "memory_total");
	jw_int(w, s->mem_total);
	jw_key(w, "memory_used_pct");
	jw_double(w, s->mem_total > 0 && s->mem_used >= 0 ? 100.0 * (double)s->mem_used / (double)s->mem_total : NAN);
	jw_key(w, "errors");
	jw_uint(w, s->errors);
	jw_key(w, "xid_events");
	jw_uint(w, s->xid_events);
	jw_key(w, "last_xid");
	jw_uint(w, s->last_xid);
	jw_key(w, "ecc_uncorrected");
	jw_int(w, s->ecc_uncorrected);
	jw_key(w, "ecc_corrected");
	jw_int(w, s->ecc_corrected);
	jw_end_obj(w);
}

static void jw_gpu(struct jw *w, const struct gpu_state *g, unsigned i)
{
	jw_begin_obj(w);
	jw_key(w, "index");
	jw_uint(w, i);
	jw_key(w, "name");
	jw_str(w, g->name);
	jw_key(w, "uuid");
	jw_str(w, g->uuid);
	jw_key(w, "samples");
	jw_uint(w, g->samples);
	jw_key(w, "window");
	jw_uint(w, g->n);
	if (g->n) {
		const struct ck_gpu_sample *s = &g->win[g->n - 1];

		jw_key(w, "time");
		jw_time(w, s->time_ns);
		jw_key(w, "time_ns");
		jw_int(w, s->time_ns);
		jw_key(w, "metrics");
		jw_metrics(w, s);
		jw_key(w, "factors");
		jw_factors(w, &g->risk);
		jw_key(w, "score");
		jw_double(w, g->risk.score);
	}
	jw_key(w, "error");
	if (g->error[0])
		jw_str(w, g->error);
	else
		jw_null(w);
	jw_end_obj(w);
}

static void jw_series(struct jw *w, const struct series_state *s)
{
	jw_begin_obj(w);
	jw_key(w, "name");
	jw_str(w, s->name);
	jw_key(w, "flag");
	jw_bool(w, s->flagged);
	jw_key(w, "newest_step");
	if (s->has_newest)
		jw_int(w, s->newest_step);
	else
		jw_null(w);
	jw_key(w, "since_newest_s");
	jw_double(w, s->since_s);
	jw_key(w, "interval_s");
	jw_double(w, s->interval_s);
	jw_key(w, "emergency_checkpoints");
	jw_uint(w, s->answered);
	jw_key(w, "held");
	if (s->held)
		jw_str(w, s->held);
	else
		jw_null(w);
	jw_key(w, "held_time");
	if (s->held)
		jw_time(w, s->held_ns);
	else
		jw_null(w);
	jw_end_obj(w);
}

int ck_health_json(struct ck_health *h, struct ck_buf *out)
{
	struct jw w = { .b = CK_BUF_INIT };
	int rc;

	pthread_mutex_lock(&h->lock);
	jw_begin_obj(&w);
	jw_key(&w, "source");
	jw_str(&w, "nvml");
	jw_key(&w, "state");
	jw_str(&w, state_name(h->state));
	jw_key(&w, "error");
	if (h->state_msg[0])
		jw_str(&w, h->state_msg);
	else
		jw_null(&w);
	jw_key(&w, "driver");
	jw_str(&w, h->driver);
	jw_key(&w, "interval_s");
	jw_uint(&w, h->interval_secs);
	jw_key(&w, "window");
	jw_uint(&w, CK_HEALTH_WINDOW);
	jw_key(&w, "threshold");
	jw_double(&w, h->threshold);
	jw_key(&w, "gap");
	jw_double(&w, h->gap);
	jw_key(&w, "weights");
	jw_begin_obj(&w);
	for (int i = 0; i < CK_RISK_NFACTORS; i++) {
		jw_key(&w, ck_risk_names[i]);
		jw_double(&w, ck_risk_weights[i]);
	}
	jw_end_obj(&w);
	jw_key(&w, "rounds");
	jw_uint(&w, h->rounds);
	jw_key(&w, "time");
	if (h->rounds)
		jw_time(&w, h->last_ns);
	else
		jw_null(&w);
	jw_key(&w, "time_ns");
	jw_int(&w, h->last_ns);
	jw_key(&w, "gpus");
	jw_begin_arr(&w);
	for (unsigned i = 0; i < h->ngpus; i++)
		jw_gpu(&w, &h->gpus[i], i);
	jw_end_arr(&w);
	jw_key(&w, "series");
	jw_begin_arr(&w);
	for (size_t i = 0; i < h->nseries; i++)
		jw_series(&w, &h->series[i]);
	jw_end_arr(&w);
	jw_end_obj(&w);
	pthread_mutex_unlock(&h->lock);
	rc = jw_error(&w);
	if (!rc)
		rc = ck_buf_put(out, w.b.data, w.b.len);
	if (!rc)
		rc = ck_buf_putc(out, '\n');
	jw_free(&w);
	return rc;
}
