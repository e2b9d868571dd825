/* The six risk factors and the score (include/ckptfs/health.h).
 *
 * Weights and factors are the paper's; the normalisations, which the paper
 * does not print, are those of the authors' published monitor
 * (GPUMetricsCollector): a factor is 0 at the "normal" end, 1 at its
 * alert threshold, clamped in between.  Where this differs from that code
 * docs/design.md ("GPU health") says so. */
#include "config.h"

#include <math.h>

#include "ckptfs/health.h"

const char *const ck_risk_names[CK_RISK_NFACTORS] = {
	"temperature", "memory", "errors", "power", "utilization_drop", "temp_rise",
};

const double ck_risk_weights[CK_RISK_NFACTORS] = { 0.25, 0.15, 0.25, 0.10, 0.15, 0.10 };

/* Normal end and alert threshold of each factor. */
#define TEMP_NORMAL_C 70.0
#define TEMP_ALERT_C 85.0
#define MEM_NORMAL_PCT 85.0
#define MEM_ALERT_PCT 95.0
#define POWER_ALERT_PCT 15.0      /* change from the previous sample */
#define UTIL_DROP_ALERT 30.0      /* percentage points below the baseline */
#define UTIL_BUSY_BASELINE 50.0   /* below it the GPU was not busy: no drop to see */
#define UTIL_MIN_SAMPLES 10
#define UTIL_RECENT 5             /* newest samples left out of the baseline */
#define RISE_SAMPLES 6
#define RISE_ALERT_C_PER_MIN 5.0

static double clamp01(double x)
{
	if (!(x > 0))   /* also NaN */
		return 0;
	return x > 1 ? 1 : x;
}

static double temperature(const struct ck_gpu_sample *now)
{
	return clamp01((now->temp_c - TEMP_NORMAL_C) / (TEMP_ALERT_C - TEMP_NORMAL_C));
}

static double memory(const struct ck_gpu_sample *now)
{
	double pct;

	if (now->mem_total <= 0 || now->mem_used < 0)
		return 0;
	pct = 100.0 * (double)now->mem_used / (double)now->mem_total;
	return clamp01((pct - MEM_NORMAL_PCT) / (MEM_ALERT_PCT - MEM_NORMAL_PCT));
}

static double power(const struct ck_gpu_sample *w, size_t n)
{
	double prev, cur;

	if (n < 2)
		return 0;
	prev = w[n - 2].power_w;
	cur = w[n - 1].power_w;
	if (!(prev > 0) || isnan(cur))
		return 0;
	return clamp01(fabs(cur - prev) / prev * 100.0 / POWER_ALERT_PCT);
}

/* The mean utilization of the window but its newest UTIL_RECENT samples is
 * the baseline; a busy GPU whose utilization falls under it is at risk. */
static double utilization_drop(const struct ck_gpu_sample *w, size_t n)
{
	double sum = 0, base, cur = w[n - 1].util_gpu;
	size_t m = 0;

	if (n < UTIL_MIN_SAMPLES || isnan(cur))
		return 0;
	for (size_t i = 0; i + UTIL_RECENT < n; i++) {
		if (!isnan(w[i].util_gpu)) {
			sum += w[i].util_gpu;
			m++;
		}
	}
	if (!m)
		return 0;
	base = sum / (double)m;
	if (!(base > UTIL_BUSY_BASELINE))
		return 0;
	return clamp01((base - cur) / UTIL_DROP_ALERT);
}

/* Degrees per minute from the first to the last of the newest RISE_SAMPLES
 * samples, over the time that really passed between them. */
static double temp_rise(const struct ck_gpu_sample *w, size_t n)
{
	const struct ck_gpu_sample *first, *last;
	double minutes;

	if (n < RISE_SAMPLES)
		return 0;
	first = &w[n - RISE_SAMPLES];
	last = &w[n - 1];
	minutes = (double)(last->time_ns - first->time_ns) / 60e9;
	if (!(minutes > 0))
		return 0;
	return clamp01((last->temp_c - first->temp_c) / minutes / RISE_ALERT_C_PER_MIN);
}

void ck_risk_compute(const struct ck_gpu_sample *w, size_t n, struct ck_risk *out)
{
	const struct ck_gpu_sample *now;

	for (int i = 0; i < CK_RISK_NFACTORS; i++)
		out->factor[i] = 0;
	out->score = 0;
	if (!n)
		return;
	if (n > CK_HEALTH_WINDOW) {
		w += n - CK_HEALTH_WINDOW;
		n = CK_HEALTH_WINDOW;
	}
	now = &w[n - 1];
	out->factor[CK_RISK_TEMPERATURE] = temperature(now);
	out->factor[CK_RISK_MEMORY] = memory(now);
	out->factor[CK_RISK_ERRORS] = now->errors > 0 ? 1 : 0;
	out->factor[CK_RISK_POWER] = power(w, n);
	out->factor[CK_RISK_UTIL_DROP] = utilization_drop(w, n);
	out->factor[CK_RISK_TEMP_RISE] = temp_rise(w, n);
	for (int i = 0; i < CK_RISK_NFACTORS; i++)
		out->score += ck_risk_weights[i] * out->factor[i];
}
