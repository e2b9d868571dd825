/* Step numbers in checkpoint names: which entries of a run directory are
 * checkpoints of one series, and in which order they succeed each other.
 *
 * The built-in patterns cover what common trainers write (docs/formats.md
 * §5): HF Trainer checkpoint-N, DeepSpeed global_stepN, Megatron
 * iter_NNNNNNN, generic step_N / stepN / step-N, files like model_000500.pt,
 * DCP dirs dcp_N, epoch_N / epoch=N and Lightning's "epoch=E-step=S.ckpt"
 * (whose step is S).  A user pattern replaces them: a POSIX ERE whose first
 * group is the step.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/store.h"

struct step_pattern {
	const char *regex;
	int group;          /* which group holds the step */
};

/* Tried in order; the first that matches wins.  Lightning's step= comes
 * before epoch= so "epoch=2-step=300.ckpt" is step 300, not 2. */
static const struct step_pattern builtin_patterns[] = {
	{ "^checkpoint-([0-9]+)$", 1 },
	{ "^global_step([0-9]+)$", 1 },
	{ "^iter_([0-9]+)$", 1 },
	{ "^step[-_]?([0-9]+)$", 1 },
	{ "^dcp_([0-9]+)$", 1 },
	{ "(^|[-_])step=([0-9]+)(\\.[A-Za-z0-9]+)?$", 2 },
	{ "^epoch[_=]([0-9]+)$", 1 },
	/* HF writes one rng_state_<rank>.pth per process inside checkpoints:
	 * a rank, not a step (excluded below). */
	{ "^.+_([0-9]+)\\.(pt|pth|bin|ckpt|safetensors)$", 1 },
};

#define NBUILTIN (sizeof(builtin_patterns) / sizeof(builtin_patterns[0]))

/* Compiled once per process; regcomp'd patterns are read-only afterwards,
 * and regexec on one regex_t from several threads is safe in glibc. */
static regex_t builtin_re[NBUILTIN];
static int builtin_ready;   /* 1 = compiled, -1 = failed */
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

static void compile_builtins(void)
{
	size_t i;

	for (i = 0; i < NBUILTIN; i++) {
		if (regcomp(&builtin_re[i], builtin_patterns[i].regex, REG_EXTENDED) != 0) {
			while (i--)
				regfree(&builtin_re[i]);
			builtin_ready = -1;
			return;
		}
	}
	builtin_ready = 1;
}

/* Parses digits [so, eo) of name as a non-negative int64. */
static int parse_step(const char *name, regoff_t so, regoff_t eo, int64_t *step)
{
	int64_t v = 0;
	regoff_t i;

	if (so < 0 || eo <= so)
		return -ENOENT;
	for (i = so; i < eo; i++) {
		int d = name[i] - '0';

		if (d < 0 || d > 9)
			return -ENOENT;
		if (v > (INT64_MAX - d) / 10)
			return -ENOENT;   /* not a step any trainer wrote */
		v = v * 10 + d;
	}
	*step = v;
	return 0;
}

static int match_group(const regex_t *re, int group, const char *name, int64_t *step)
{
	regmatch_t m[10];

	if (group < 1 || group > 9)
		return -EINVAL;
	if (regexec(re, name, (size_t)group + 1, m, 0) != 0)
		return -ENOENT;
	return parse_step(name, m[group].rm_so, m[group].rm_eo, step);
}

static int is_rank_file(const char *name)
{
	return strncmp(name, "rng_state_", 10) == 0;
}

int ck_series_step(const char *name, const char *pattern, int64_t *step)
{
	size_t i;

	if (!name || !step)
		return -EINVAL;
	if (pattern) {
		regex_t re;
		int rc;

		if (regcomp(&re, pattern, REG_EXTENDED) != 0)
			return -EINVAL;
		if (re.re_nsub < 1)
			rc = -EINVAL;
		else
			rc = match_group(&re, 1, name, step);
		regfree(&re);
		return rc;
	}
	pthread_once(&builtin_once, compile_builtins);
	if (builtin_ready != 1)
		return -ENOMEM;
	if (is_rank_file(name))
		return -ENOENT;
	for (i = 0; i < NBUILTIN; i++) {
		if (match_group(&builtin_re[i], builtin_patterns[i].group, name, step) == 0)
			return 0;
	}
	return -ENOENT;
}

int ck_series_pattern_check(const char *pattern, struct ck_error *err)
{
	regex_t re;
	char msg[256];
	int rc;

	rc = regcomp(&re, pattern, REG_EXTENDED);
	if (rc != 0) {
		regerror(rc, &re, msg, sizeof(msg));
		return ck_fail(err, EINVAL, "step pattern '%s': %s", pattern, msg);
	}
	rc = re.re_nsub < 1 ? ck_fail(err, EINVAL, "step pattern '%s' has no group for the step", pattern) : 0;
	regfree(&re);
	return rc;
}
