/* GPU health watching and emergency checkpoints (src/health/).
 *
 * The risk model of "Proactive Fault Tolerance System for Megatron-LM
 * Training" (Ashfaq, Kalvade, Belavadi Shekar): every sample of a GPU's
 * metrics goes into a rolling window of CK_HEALTH_WINDOW samples; six
 * factors, each a risk in [0, 1], are computed from the window and summed
 * with fixed weights into a score; a score at or above the threshold asks
 * the trainers for an emergency checkpoint, unless their newest checkpoint
 * is recent (the gap rule).  docs/design.md, "GPU health", gives every
 * normalisation and each choice the paper leaves open.
 *
 * Three layers, none of them FUSE:
 *   - ck_risk_*: the factors and the score of a window of samples (pure);
 *   - ck_nvml_*: samples from NVML, loaded with dlopen at run time;
 *   - ck_health_*: a watcher for one mount: samples every GPU on each
 *     tick, keeps the windows, decides the flag of each series written
 *     through the mount and renders the flag file and health.json.
 *
 * Errors are -errno.  Thread rules are given per layer.
 */
#ifndef CKPTFS_HEALTH_H
#define CKPTFS_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/buf.h"
#include "ckptfs/error.h"

/* ---- Samples and the risk model (thread-safe: no state) ---- */

#define CK_HEALTH_WINDOW 60

/* One reading of one GPU.  Values NVML does not give for this GPU are NaN
 * (doubles) or -1 (counters). */
struct ck_gpu_sample {
	int64_t time_ns;            /* CLOCK_REALTIME when taken */
	double temp_c;              /* GPU core temperature, degrees C */
	double power_w;             /* board power draw, W */
	double util_gpu;            /* % of time a kernel ran */
	double util_mem;            /* % of time device memory was read or written */
	int64_t mem_used, mem_total;        /* bytes */
	int64_t ecc_uncorrected;    /* volatile (since driver load) totals, -1: no ECC */
	int64_t ecc_corrected;
	uint64_t xid_events;        /* XID critical error events since the previous sample */
	uint64_t last_xid;          /* the newest one's XID (0: none yet) */
	uint64_t errors;            /* what the errors factor counts: xid_events plus the
				       rise of ecc_uncorrected since the previous sample */
};

enum ck_risk_factor {
	CK_RISK_TEMPERATURE,        /* (T - 70) / (85 - 70), T in degrees C */
	CK_RISK_MEMORY,             /* (U - 85) / (95 - 85), U = 100 used / total */
	CK_RISK_ERRORS,             /* 1 when the sample has errors, else 0 */
	CK_RISK_POWER,              /* |P - P_prev| / P_prev in %, over 15 % */
	CK_RISK_UTIL_DROP,          /* baseline utilization minus now, over 30 points */
	CK_RISK_TEMP_RISE,          /* degrees C per minute over the last 6 samples, over 5 */
	CK_RISK_NFACTORS
};

/* "temperature", "memory", "errors", "power", "utilization_drop", "temp_rise". */
extern const char *const ck_risk_names[CK_RISK_NFACTORS];
/* 0.25, 0.15, 0.25, 0.10, 0.15, 0.10: they sum to 1. */
extern const double ck_risk_weights[CK_RISK_NFACTORS];

struct ck_risk {
	double factor[CK_RISK_NFACTORS];   /* each clamped to [0, 1] */
	double score;                      /* sum of weight * factor */
};

/* The risk at the newest of the n samples w[0..n-1] (oldest first; n is at
 * most CK_HEALTH_WINDOW, 0 gives all zeros).  A factor whose inputs are
 * missing (NaN) or whose history is too short is 0. */
void ck_risk_compute(const struct ck_gpu_sample *w, size_t n, struct ck_risk *out);

/* ---- NVML (one thread at a time per handle) ---- */

#define CK_NVML_LIBRARY "libnvidia-ml.so.1"

struct ck_nvml;

/* Loads lib (NULL: CK_NVML_LIBRARY, found the way dlopen searches),
 * initialises NVML and finds the GPUs, registering each for XID critical
 * error events where it supports them.  0; -ENOENT when the library
 * cannot be loaded or lacks a needed function, -ENODEV when NVML will not
 * start (no driver) or sees no GPU, -EIO otherwise; err says why. */
int ck_nvml_open(const char *lib, struct ck_nvml **out, struct ck_error *err);
/* Shuts NVML down and unloads it.  NULL is allowed. */
void ck_nvml_close(struct ck_nvml *nv);
unsigned ck_nvml_count(const struct ck_nvml *nv);
/* GPU i's name and UUID ("" when NVML did not say), and the driver's version. */
const char *ck_nvml_name(const struct ck_nvml *nv, unsigned i);
const char *ck_nvml_uuid(const struct ck_nvml *nv, unsigned i);
const char *ck_nvml_driver(const struct ck_nvml *nv);
/* Reads every GPU: out[i] and rc[i] for i < ck_nvml_count (rc[i] 0, or
 * -EIO with why[i] set when GPU i could not be read; -ENODEV when NVML
 * says it is lost), then takes the XID events that arrived, without
 * waiting.  Each sample's errors count is against the previous successful
 * sample of that GPU (the first one's ECC totals are its baseline).
 * why may be NULL; each entry holds at least 128 bytes. */
void ck_nvml_sample(struct ck_nvml *nv, int64_t now_ns, struct ck_gpu_sample *out, int *rc, char (*why)[128]);

/* ---- The watcher (thread-safe: one mutex inside) ---- */

/* A committed checkpoint of a series, as the store knows it. */
struct ck_health_ckpt {
	int64_t step;
	int64_t time_ns;            /* when it was written: its newest file's mtime */
};

/* The committed checkpoints of series in any order, in an array the
 * watcher frees: 0 (n may be 0) or -errno. */
typedef int (*ck_health_history_fn)(void *ctx, const char *series, struct ck_health_ckpt **out, size_t *n);

/* The history function over a view (ctx: the struct ck_view *): the
 * checkpoints the view lists in series that carry a step, each with the
 * newest mtime of its files.  A series the view does not have: none. */
int ck_health_view_history(void *ctx, const char *series, struct ck_health_ckpt **out, size_t *n);

#define CK_HEALTH_FLAG_NAME "trigger_checkpoint.flag"

struct ck_health_opts {
	const char *nvml_lib;       /* NULL: CK_NVML_LIBRARY */
	unsigned interval_secs;     /* how often the caller ticks (for health.json) */
	double threshold;           /* a score at or above it raises flags (0.95) */
	double gap;                 /* no flag while the newest checkpoint is younger
				       than gap * the series' save interval (0.25) */
	const char *flag_name;      /* NULL: CK_HEALTH_FLAG_NAME */
	ck_health_history_fn history;
	void *history_ctx;
};

struct ck_health;

/* Fills o with the paper's defaults (10 s, 0.95, 0.25, the flag name). */
void ck_health_defaults(struct ck_health_opts *o);
/* A watcher; NVML is loaded at the first tick.  Strings in o are copied.
 * 0, -EINVAL (threshold outside (0, 1], gap outside [0, 1], a flag name
 * that is not a plain file name), -ENOMEM. */
int ck_health_new(const struct ck_health_opts *o, struct ck_health **out);
void ck_health_free(struct ck_health *h);
const char *ck_health_flag_name(const struct ck_health *h);

/* One sampling round at now_ns (CLOCK_REALTIME): loads NVML at the first
 * call, samples every GPU into its window, computes the risks, then for
 * each watched series raises or clears its flag.  A machine without NVML
 * (library, driver or GPU) is logged once (warning) and the watcher stays
 * idle for good; NVML failing later (no GPU readable) is logged when it
 * starts and when it ends, NVML staying loaded and asked again at every
 * round.  Call from one thread.  Returns how many flags were raised or
 * cleared. */
int ck_health_tick(struct ck_health *h, int64_t now_ns);

/* Series written through the mount: only these get flags.  0 or -ENOMEM. */
int ck_health_watch(struct ck_health *h, const char *series);
/* A checkpoint of series at step committed (the series is watched from
 * now on): clears the series' flag when step is newer than the newest
 * checkpoint the flag was raised over (that checkpoint is the emergency
 * one and stays out of the save interval).  Returns 1 when a flag went,
 * else 0. */
int ck_health_committed(struct ck_health *h, const char *series, int64_t step);

/* The flag file of series: its JSON (the reason) appended to out and 0,
 * -ENOENT when the series has no flag up, -ENOMEM. */
int ck_health_flag(struct ck_health *h, const char *series, struct ck_buf *out);
/* health.json: the source's state, per GPU its metrics, factors, score
 * and sample time, and per watched series its flag state; appended to
 * out.  0 or -ENOMEM. */
int ck_health_json(struct ck_health *h, struct ck_buf *out);

#endif
