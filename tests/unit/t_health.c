/* The GPU health watcher (src/health/) driven by the fake NVML
 * (tests/nvml/libnvidia-ml.so.1) replaying traces: the risk factors by
 * hand, a quiet trace, a thermal ramp, an XID error, a power swing and a
 * failing GPU, each raising the flag in the very round whose sample
 * crosses the threshold with the score the model gives; the gap rule
 * against a series' history; NVML missing, failing to start and failing
 * mid-run. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/health.h"
#include "ckptfs/json.h"
#include "ckptfs/log.h"
#include "testutil.h"

#define SEC 1000000000LL
#define T0 (1700000000LL * SEC)
#define STEP_S 10               /* the rounds' interval in these tests */

static char fake_lib[4096];
static char trace_path[4096];
static int trace_no;

/* A healthy, busy GPU: 60 C, 300 W, 95 % busy, 60000 of 81559 MiB used. */
#define HEALTHY "name=FakeH100 temp=60 power=300 util=95 memutil=40 used=60000 total=81559"

/* Writes a new trace file (a new path: the fake starts it from scratch). */
static void write_trace(const char *text)
{
	FILE *f;

	snprintf(trace_path, sizeof(trace_path), "%s/t_health.%d.%d.trace", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid(), ++trace_no);
	f = fopen(trace_path, "w");
	SETUP(f != NULL);
	fputs(text, f);
	fclose(f);
	setenv("CKPT_FAKE_NVML_TRACE", trace_path, 1);
}

static void append_trace(const char *text)
{
	FILE *f = fopen(trace_path, "a");

	SETUP(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* A trace of n healthy rows of gpu 0 then text. */
static void healthy_then(int n, const char *text)
{
	struct ck_buf b = CK_BUF_INIT;

	for (int i = 0; i < n; i++)
		SETUP(ck_buf_printf(&b, "gpu=0 %s\n", HEALTHY) == 0);
	SETUP(ck_buf_puts(&b, text) == 0 && ck_buf_putc(&b, '\0') == 0);
	write_trace((const char *)b.data);
	ck_buf_free(&b);
}

/* ---- a series history the tests set ---- */

struct history {
	struct ck_health_ckpt c[32];
	size_t n;
};

static int history_fn(void *ctx, const char *series, struct ck_health_ckpt **out, size_t *n)
{
	struct history *h = ctx;

	(void)series;
	*out = malloc((h->n ? h->n : 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	memcpy(*out, h->c, h->n * sizeof(**out));
	*n = h->n;
	return 0;
}

static void add_ckpt(struct history *h, int64_t step, int64_t t_s)
{
	h->c[h->n].step = step;
	h->c[h->n].time_ns = T0 + t_s * SEC;
	h->n++;
}

static struct ck_health *watcher(double threshold, struct history *hist)
{
	struct ck_health_opts o;
	struct ck_health *h;

	ck_health_defaults(&o);
	o.nvml_lib = fake_lib;
	o.interval_secs = STEP_S;
	o.threshold = threshold;
	o.history = history_fn;
	o.history_ctx = hist;
	SETUP(ck_health_new(&o, &h) == 0);
	SETUP(ck_health_watch(h, "run") == 0);
	return h;
}

/* ---- reading what the watcher publishes ---- */

static struct js_doc *parse(struct ck_buf *b)
{
	struct ck_error err = { { 0 } };
	struct js_doc *doc = NULL;

	CHECK(js_parse((const char *)b->data, b->len, &doc, &err) == 0, "bad JSON: %s: %.*s", err.msg,
	      (int)b->len, (const char *)b->data);
	return doc;
}

static double num(const struct js_value *v)
{
	return v && v->kind == JS_NUMBER ? strtod(v->str, NULL) : NAN;
}

/* health.json's gpus[gpu].key (score) or .factors.key / .metrics.key. */
static double gpu_value(struct ck_health *h, unsigned gpu, const char *group, const char *key)
{
	struct ck_buf b = CK_BUF_INIT;
	struct js_doc *doc;
	const struct js_value *g, *v = NULL;
	double x = NAN;

	SETUP(ck_health_json(h, &b) == 0);
	doc = parse(&b);
	if (doc) {
		g = js_get(js_root(doc), "gpus");
		if (g && g->kind == JS_ARRAY && gpu < g->n) {
			v = group ? js_get(g->vals[gpu], group) : g->vals[gpu];
			x = num(v ? js_get(v, key) : NULL);
		}
		js_free(doc);
	}
	ck_buf_free(&b);
	return x;
}

static char *state_of(struct ck_health *h)
{
	struct ck_buf b = CK_BUF_INIT;
	struct js_doc *doc;
	const struct js_value *v;
	char *s = NULL;

	SETUP(ck_health_json(h, &b) == 0);
	doc = parse(&b);
	if (doc) {
		v = js_get(js_root(doc), "state");
		s = strdup(v && v->kind == JS_STRING ? v->str : "?");
		js_free(doc);
	}
	ck_buf_free(&b);
	return s;
}

static int flagged(struct ck_health *h)
{
	struct ck_buf b = CK_BUF_INIT;
	int rc = ck_health_flag(h, "run", &b);

	ck_buf_free(&b);
	return rc == 0;
}

/* The flag's reason: its score and the GPU. */
static double flag_score(struct ck_health *h, const char *key)
{
	struct ck_buf b = CK_BUF_INIT;
	struct js_doc *doc;
	double x = NAN;

	if (ck_health_flag(h, "run", &b) == 0 && (doc = parse(&b))) {
		x = num(js_get(js_root(doc), key));
		js_free(doc);
	}
	ck_buf_free(&b);
	return x;
}

#define NEAR(a, b) (fabs((a) - (b)) < 1e-12)

/* ---- the model by hand ---- */

static void test_factors(void)
{
	struct ck_gpu_sample w[CK_HEALTH_WINDOW];
	struct ck_risk r;

	memset(w, 0, sizeof(w));
	for (int i = 0; i < CK_HEALTH_WINDOW; i++) {
		w[i].time_ns = T0 + i * STEP_S * SEC;
		w[i].temp_c = 60;
		w[i].power_w = 300;
		w[i].util_gpu = 90;
		w[i].mem_used = 80;
		w[i].mem_total = 100;
		w[i].ecc_uncorrected = w[i].ecc_corrected = -1;
	}
	ck_risk_compute(w, 1, &r);
	CHECK(r.score == 0, "one healthy sample: score %g", r.score);
	/* Newest sample: 79 C, 90 % memory, 270 W (a 10 % change), 72 % busy,
	 * and 4 degrees over the last 5 intervals (50 s): 4.8 C/min. */
	w[59].temp_c = 79;
	w[54].temp_c = 75;
	w[59].mem_used = 90;
	w[59].power_w = 270;
	w[59].util_gpu = 72;
	ck_risk_compute(w, CK_HEALTH_WINDOW, &r);
	CHECK(NEAR(r.factor[CK_RISK_TEMPERATURE], 9.0 / 15), "temperature %.17g", r.factor[CK_RISK_TEMPERATURE]);
	CHECK(NEAR(r.factor[CK_RISK_MEMORY], 0.5), "memory %.17g", r.factor[CK_RISK_MEMORY]);
	CHECK(r.factor[CK_RISK_ERRORS] == 0, "errors %g", r.factor[CK_RISK_ERRORS]);
	CHECK(NEAR(r.factor[CK_RISK_POWER], 10.0 / 15), "power %.17g", r.factor[CK_RISK_POWER]);
	/* Baseline: the 55 samples before the newest 5, 90 % busy: 18 points. */
	CHECK(NEAR(r.factor[CK_RISK_UTIL_DROP], 18.0 / 30), "utilization drop %.17g", r.factor[CK_RISK_UTIL_DROP]);
	CHECK(NEAR(r.factor[CK_RISK_TEMP_RISE], (4.0 / (50.0 / 60)) / 5), "temp rise %.17g",
	      r.factor[CK_RISK_TEMP_RISE]);
	CHECK(NEAR(r.score, 0.25 * 9 / 15 + 0.15 * 0.5 + 0.10 * 10 / 15 + 0.15 * 18 / 30 + 0.10 * 4.8 / 5),
	      "score %.17g", r.score);
	/* Short histories: no power change with one sample, no utilization
	 * drop under 10, no rise under 6; an idle GPU has no drop to see. */
	ck_risk_compute(w + 55, 5, &r);
	CHECK(r.factor[CK_RISK_UTIL_DROP] == 0 && r.factor[CK_RISK_TEMP_RISE] == 0, "short window");
	for (int i = 0; i < CK_HEALTH_WINDOW; i++)
		w[i].util_gpu = 40;
	w[59].util_gpu = 0;
	ck_risk_compute(w, CK_HEALTH_WINDOW, &r);
	CHECK(r.factor[CK_RISK_UTIL_DROP] == 0, "idle baseline: drop %g", r.factor[CK_RISK_UTIL_DROP]);
	/* Missing readings count as no risk; the score stays in [0, 1]. */
	w[59].temp_c = NAN;
	w[59].power_w = NAN;
	w[59].mem_total = -1;
	w[59].errors = 3;
	ck_risk_compute(w, CK_HEALTH_WINDOW, &r);
	CHECK(r.factor[CK_RISK_TEMPERATURE] == 0 && r.factor[CK_RISK_POWER] == 0 && r.factor[CK_RISK_MEMORY] == 0,
	      "NaN readings");
	CHECK(r.factor[CK_RISK_ERRORS] == 1, "errors %g", r.factor[CK_RISK_ERRORS]);
	double sum = 0;

	for (int i = 0; i < CK_RISK_NFACTORS; i++)
		sum += ck_risk_weights[i];
	CHECK(NEAR(sum, 1.0), "weights sum to %.17g", sum);
}

/* Runs rounds until the flag goes up (at most max); returns the round
 * (from 1) it went up in, 0 if never.  Each round must raise it in its
 * own tick: no flag before, the flag right after. */
static int rounds_until_flag(struct ck_health *h, int first, int max, double *score)
{
	for (int i = first; i <= max; i++) {
		int changed;

		CHECK(!flagged(h), "flag before round %d", i);
		changed = ck_health_tick(h, T0 + (int64_t)i * STEP_S * SEC);
		if (flagged(h)) {
			CHECK(changed == 1, "round %d raised the flag but reported %d changes", i, changed);
			*score = gpu_value(h, 0, NULL, "score");
			return i;
		}
	}
	return 0;
}

static void test_quiet(void)
{
	struct history hist = { .n = 0 };
	struct ck_health *h;
	struct ck_buf b = CK_BUF_INIT;
	double score;
	char *state;

	/* Power wanders by 5 W: 1.67 % of 300, a power risk of 0.111, 0.011 in all. */
	healthy_then(0, "");
	for (int i = 0; i < 80; i++)
		append_trace(i % 2 ? "gpu=0 " HEALTHY " power=305\n" : "gpu=0 " HEALTHY "\n");
	h = watcher(0.95, &hist);
	CHECK(rounds_until_flag(h, 1, 80, &score) == 0, "a quiet GPU raised the flag");
	CHECK(NEAR(gpu_value(h, 0, NULL, "score"), 0.10 * (5.0 / 300 * 100 / 15)), "quiet score %.17g",
	      gpu_value(h, 0, NULL, "score"));
	CHECK(gpu_value(h, 0, NULL, "samples") == 80, "samples %g", gpu_value(h, 0, NULL, "samples"));
	CHECK(gpu_value(h, 0, NULL, "window") == CK_HEALTH_WINDOW, "window %g", gpu_value(h, 0, NULL, "window"));
	CHECK(gpu_value(h, 0, "metrics", "temperature_c") == 60, "temperature metric");
	CHECK(gpu_value(h, 0, "metrics", "memory_total") == 81559.0 * 1048576, "memory_total metric");
	state = state_of(h);
	CHECK(state && !strcmp(state, "ok"), "state %s", state);
	free(state);
	CHECK(ck_health_flag(h, "run", &b) == -ENOENT, "flag file of a quiet GPU");
	ck_health_free(h);
}

/* Temperature climbing 60 -> 88 C in 10 s rounds: temperature and its rise
 * saturate, 0.25 + 0.10.  At the default 0.95 that alone raises nothing;
 * with risk_threshold=0.3 it raises the flag in the round it reaches 85 C. */
static void test_thermal_ramp(void)
{
	static const char ramp[] = "gpu=0 temp=64\ngpu=0 temp=69\ngpu=0 temp=74\ngpu=0 temp=79\n"
				   "gpu=0 temp=84\ngpu=0 temp=88\ngpu=0 temp=88\n";
	struct history hist = { .n = 0 };
	struct ck_health *h;
	double score = NAN;
	int at;

	healthy_then(12, ramp);
	h = watcher(0.95, &hist);
	CHECK(rounds_until_flag(h, 1, 18, &score) == 0, "a thermal ramp alone raised the flag at 0.95");
	CHECK(NEAR(gpu_value(h, 0, NULL, "score"), 0.35), "ramp score %.17g", gpu_value(h, 0, NULL, "score"));
	ck_health_free(h);

	healthy_then(12, ramp);
	h = watcher(0.3, &hist);
	at = rounds_until_flag(h, 1, 25, &score);
	/* Round 16 samples 79 C: 0.25 * 9/15 + 0.10 (19 C in 50 s) = 0.25.  Round 17, 84 C:
	 * 0.25 * 14/15 + 0.10 = 0.3333. */
	CHECK(at == 17, "thermal ramp raised the flag in round %d, not 17", at);
	CHECK(NEAR(score, 0.25 * 14 / 15 + 0.10), "thermal ramp score %.17g", score);
	CHECK(NEAR(flag_score(h, "score"), score), "flag file score %.17g", flag_score(h, "score"));
	CHECK(flag_score(h, "gpu") == 0, "flag file gpu");
	ck_health_free(h);
}

/* One XID critical error (48: double-bit ECC) with a sample: the errors
 * factor, 0.25, in that round only. */
static void test_xid(void)
{
	struct history hist = { .n = 0 };
	struct ck_health *h;
	double score = NAN;
	int at;

	healthy_then(5, "gpu=0 xid=48\ngpu=0\ngpu=0\n");
	h = watcher(0.25, &hist);
	at = rounds_until_flag(h, 1, 10, &score);
	CHECK(at == 6, "XID raised the flag in round %d, not 6", at);
	CHECK(NEAR(score, 0.25), "XID score %.17g", score);
	CHECK(gpu_value(h, 0, "metrics", "last_xid") == 48, "last_xid");
	CHECK(gpu_value(h, 0, "metrics", "xid_events") == 1, "xid_events");
	ck_health_tick(h, T0 + 7 * STEP_S * SEC);
	CHECK(gpu_value(h, 0, "factors", "errors") == 0, "errors factor after the XID round");
	CHECK(flagged(h), "the flag stays until a commit");
	ck_health_free(h);

	/* ECC: the first sample's total is a baseline; a rise is errors. */
	healthy_then(0, "gpu=0 " HEALTHY " ecc=3\ngpu=0\ngpu=0 ecc=5\n");
	h = watcher(0.25, &hist);
	ck_health_tick(h, T0 + 1 * STEP_S * SEC);
	ck_health_tick(h, T0 + 2 * STEP_S * SEC);
	CHECK(!flagged(h), "ECC baseline raised the flag");
	ck_health_tick(h, T0 + 3 * STEP_S * SEC);
	CHECK(flagged(h), "ECC rise did not raise the flag");
	CHECK(gpu_value(h, 0, "metrics", "errors") == 2, "ECC errors %g", gpu_value(h, 0, "metrics", "errors"));
	ck_health_free(h);
}

/* Power 300 W -> 345 W (15 %) -> 300 W: a power risk of 1, weight 0.10. */
static void test_power_swing(void)
{
	struct history hist = { .n = 0 };
	struct ck_health *h;
	double score = NAN;
	int at;

	healthy_then(8, "gpu=0 power=345\ngpu=0 power=300\n");
	h = watcher(0.1, &hist);
	at = rounds_until_flag(h, 1, 12, &score);
	CHECK(at == 9, "power swing raised the flag in round %d, not 9", at);
	CHECK(NEAR(score, 0.10), "power swing score %.17g", score);
	ck_health_free(h);
}

/* Everything going wrong at once reaches the paper's 0.95; five of the six
 * factors (no power swing) stay at 0.90 and do not. */
static void test_failing_gpu(void)
{
	static const char dying[] = "gpu=0 temp=66 util=90\ngpu=0 temp=72 util=80\ngpu=0 temp=78 util=70\n"
				    "gpu=0 temp=84 util=60 used=78000\ngpu=0 temp=90 util=40 used=79000 xid=%s power=%s\n";
	char text[512];
	struct history hist = { .n = 0 };
	struct ck_health *h;
	double score = NAN;
	int at;

	snprintf(text, sizeof(text), dying, "79", "300");
	healthy_then(20, text);
	h = watcher(0.95, &hist);
	CHECK(rounds_until_flag(h, 1, 25, &score) == 0, "five factors raised the flag at 0.95");
	CHECK(NEAR(gpu_value(h, 0, NULL, "score"), 0.90), "five factors: %.17g", gpu_value(h, 0, NULL, "score"));
	ck_health_free(h);

	snprintf(text, sizeof(text), dying, "79", "200");
	healthy_then(20, text);
	h = watcher(0.95, &hist);
	at = rounds_until_flag(h, 1, 30, &score);
	CHECK(at == 25, "failing GPU raised the flag in round %d, not 25", at);
	CHECK(NEAR(score, 1.0), "failing GPU score %.17g", score);
	ck_health_free(h);
}

/* The gap rule: checkpoints every 1000 s; no flag while the newest is
 * younger than 250 s; a commit clears the flag and is left out of the
 * interval; with no interval, one emergency checkpoint only. */
static void test_gap(void)
{
	struct history hist = { .n = 0 };
	struct ck_health *h;
	int64_t t;

	write_trace("gpu=0 " HEALTHY " xid=48\n");   /* the XID of the first round, then none */
	add_ckpt(&hist, 100, 0);
	add_ckpt(&hist, 200, 1000);
	add_ckpt(&hist, 300, 2000);
	h = watcher(0.25, &hist);
	/* Round at 2100 s: risky (XID), but 100 s < 0.25 * 1000 s. */
	CHECK(ck_health_tick(h, T0 + 2100 * SEC) == 0 && !flagged(h), "flag within the gap");
	ck_health_free(h);

	write_trace("gpu=0 " HEALTHY " xid=48\ngpu=0 xid=48\ngpu=0 xid=48\ngpu=0 xid=48\n");
	h = watcher(0.25, &hist);
	CHECK(ck_health_tick(h, T0 + 2249 * SEC) == 0 && !flagged(h), "flag at 249 s");
	CHECK(ck_health_tick(h, T0 + 2250 * SEC) == 1 && flagged(h), "no flag at 250 s");
	CHECK(flag_score(h, "newest_step") == 300, "reason's newest_step %g", flag_score(h, "newest_step"));
	CHECK(flag_score(h, "interval_s") == 1000, "reason's interval %g", flag_score(h, "interval_s"));
	CHECK(flag_score(h, "since_newest_s") == 250, "reason's since %g", flag_score(h, "since_newest_s"));
	/* A commit at or below the step the flag was raised over does not answer it. */
	CHECK(ck_health_committed(h, "run", 300) == 0 && flagged(h), "an old step cleared the flag");
	CHECK(ck_health_committed(h, "run", 325) == 1 && !flagged(h), "the emergency commit left the flag");
	add_ckpt(&hist, 325, 2260);
	/* Still risky 40 s later: held by the gap, measured on 1000 s, not
	 * on the 260 s to the emergency checkpoint. */
	CHECK(ck_health_tick(h, T0 + 2300 * SEC) == 0 && !flagged(h), "flag right after the emergency commit");
	t = 2260 + 250;
	CHECK(ck_health_tick(h, T0 + t * SEC) == 1 && flagged(h), "no flag 250 s after the emergency commit");
	CHECK(flag_score(h, "interval_s") == 1000, "interval after an emergency save: %g", flag_score(h, "interval_s"));
	ck_health_free(h);

	/* A series without checkpoints: the flag goes up; once answered,
	 * no second one until there is an interval. */
	hist.n = 0;
	write_trace("gpu=0 " HEALTHY " xid=48\ngpu=0 xid=48\ngpu=0 xid=48\n");
	h = watcher(0.25, &hist);
	CHECK(ck_health_tick(h, T0) == 1 && flagged(h), "no flag without checkpoints");
	CHECK(ck_health_committed(h, "run", 7) == 1, "commit did not clear");
	add_ckpt(&hist, 7, 5);
	CHECK(ck_health_tick(h, T0 + 10 * SEC) == 0 && !flagged(h), "second flag without an interval");
	ck_health_free(h);

	/* A commit the mount did not report clears it at the next round. */
	hist.n = 0;
	write_trace("gpu=0 " HEALTHY " xid=48\ngpu=0\n");
	h = watcher(0.25, &hist);
	CHECK(ck_health_tick(h, T0) == 1 && flagged(h), "no flag");
	add_ckpt(&hist, 9, 5);
	CHECK(ck_health_tick(h, T0 + 10 * SEC) == 1 && !flagged(h), "history commit did not clear");
	ck_health_free(h);

	/* Series nobody writes through the mount get no flag. */
	hist.n = 0;
	write_trace("gpu=0 " HEALTHY " xid=48\n");
	h = watcher(0.25, &hist);
	ck_health_tick(h, T0);
	{
		struct ck_buf b = CK_BUF_INIT;

		CHECK(ck_health_flag(h, "other", &b) == -ENOENT, "unwatched series flagged");
		ck_buf_free(&b);
	}
	ck_health_free(h);
}

static void test_missing_and_failing(void)
{
	struct history hist = { .n = 0 };
	struct ck_health_opts o;
	struct ck_health *h;
	char *state;

	/* No library at all. */
	ck_health_defaults(&o);
	o.nvml_lib = "/nonexistent/libnvidia-ml.so.1";
	SETUP(ck_health_new(&o, &h) == 0);
	CHECK(ck_health_tick(h, T0) == 0 && ck_health_tick(h, T0 + SEC) == 0, "tick without NVML");
	state = state_of(h);
	CHECK(state && !strcmp(state, "unavailable"), "state without NVML: %s", state);
	free(state);
	ck_health_free(h);

	/* The library, but no driver. */
	write_trace("init=fail\n");
	h = watcher(0.95, &hist);
	ck_health_tick(h, T0);
	state = state_of(h);
	CHECK(state && !strcmp(state, "unavailable"), "state without a driver: %s", state);
	free(state);
	ck_health_free(h);

	/* Failing mid-run: 3 good rounds, 2 failing (NVML asked again each
	 * round), then good again; the window keeps what it had. */
	healthy_then(3, "gpu=0 fail=1\ngpu=0 lost=1\ngpu=0 xid=13\ngpu=0\n");
	h = watcher(0.25, &hist);
	for (int i = 1; i <= 3; i++)
		ck_health_tick(h, T0 + i * STEP_S * SEC);
	ck_health_tick(h, T0 + 4 * STEP_S * SEC);
	state = state_of(h);
	CHECK(state && !strcmp(state, "failing"), "state after a failed round: %s", state);
	free(state);
	ck_health_tick(h, T0 + 5 * STEP_S * SEC);
	CHECK(gpu_value(h, 0, NULL, "samples") == 3, "samples while failing %g", gpu_value(h, 0, NULL, "samples"));
	CHECK(ck_health_tick(h, T0 + 6 * STEP_S * SEC) == 1 && flagged(h), "XID after NVML came back");
	state = state_of(h);
	CHECK(state && !strcmp(state, "ok"), "state after recovery: %s", state);
	free(state);
	CHECK(gpu_value(h, 0, NULL, "samples") == 4, "samples after recovery %g", gpu_value(h, 0, NULL, "samples"));
	ck_health_free(h);
}

static void test_options(void)
{
	struct ck_health_opts o;
	struct ck_health *h;

	ck_health_defaults(&o);
	CHECK(o.threshold == 0.95 && o.gap == 0.25 && o.interval_secs == 10 &&
	      !strcmp(o.flag_name, "trigger_checkpoint.flag"), "defaults");
	o.threshold = 0;
	CHECK(ck_health_new(&o, &h) == -EINVAL, "threshold 0");
	o.threshold = 0.5;
	o.gap = 1.5;
	CHECK(ck_health_new(&o, &h) == -EINVAL, "gap 1.5");
	o.gap = 0.5;
	o.flag_name = "a/b";
	CHECK(ck_health_new(&o, &h) == -EINVAL, "flag name with a slash");
	o.flag_name = "save_now.flag";
	CHECK(ck_health_new(&o, &h) == 0 && !strcmp(ck_health_flag_name(h), "save_now.flag"), "flag name");
	ck_health_free(h);
}

int main(void)
{
	const char *builddir = getenv("CKPT_BUILDDIR");

	ck_log_init("t_health", 0, CK_LOG_WARN);
	snprintf(fake_lib, sizeof(fake_lib), "%s/tests/nvml/libnvidia-ml.so.1", builddir ? builddir : ".");
	SETUP(access(fake_lib, R_OK) == 0);
	test_factors();
	test_options();
	test_quiet();
	test_thermal_ramp();
	test_xid();
	test_power_swing();
	test_failing_gpu();
	test_gap();
	test_missing_and_failing();
	for (int i = 1; i <= trace_no; i++) {
		char p[4096];

		snprintf(p, sizeof(p), "%s/t_health.%d.%d.trace", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			 (int)getpid(), i);
		unlink(p);
	}
	return test_result();
}
