/* ckptctl lossy STORE [SERIES [BOUND|off]]: the series' lossy policies,
 * shown or recorded in STORE/lossy.conf for every later compaction. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/packstore.h"
#include "cli.h"

struct lossy_args {
	struct ck_lossy_policy p;
	int keep_set, every_set, chain_set;
};

/* arg as a count in [min, max] into *out, and *set; else the usage
 * error "OPTION: expected WHAT, not 'arg'". */
static int count_opt(const char *arg, unsigned long min, unsigned long max, const char *what,
		     unsigned long *out, int *set)
{
	char *end;

	errno = 0;
	*out = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || *out < min || *out > max) {
		cli_error("%s, not '%s'", what, arg);
		return CK_EXIT_USAGE;
	}
	*set = 1;
	return 0;
}

static int on_opt(void *ctx, int c, const char *arg)
{
	struct lossy_args *a = ctx;
	unsigned long v;
	int rc;

	switch (c) {
	case 'E':
		rc = count_opt(arg, 1, 1000000, "--keep-exact: expected a count of at least 1", &v, &a->keep_set);
		if (!rc)
			a->p.keep_newest = (unsigned)v;
		return rc;
	case 'e':
		rc = count_opt(arg, 0, ULONG_MAX, "--exact-every: expected a step count", &v, &a->every_set);
		if (!rc)
			a->p.exact_every = v;
		return rc;
	case 'c':
		rc = count_opt(arg, 1, 64, "--chain: expected 1..64", &v, &a->chain_set);
		if (!rc)
			a->p.chain = (unsigned)v;
		return rc;
	}
	return CK_EXIT_USAGE;
}

static void show(const char *series, const struct ck_lossy_policy *p)
{
	printf("%s: lossy within %g x max|x| per tensor; exact: the newest %u", series, p->bound, p->keep_newest);
	if (p->exact_every)
		printf(", steps that are multiples of %" PRIu64, p->exact_every);
	if (p->chain)
		printf("; chains of up to %u residuals", p->chain);
	putchar('\n');
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "keep-exact", required_argument, NULL, 'E' },
		{ "exact-every", required_argument, NULL, 'e' },
		{ "chain", required_argument, NULL, 'c' },
		{ 0, 0, 0, 0 },
	};
	struct lossy_args a = { .p = { .keep_newest = CK_LOSSY_KEEP_NEWEST_DEFAULT } };
	struct ck_lossy_policy_entry *v = NULL;
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	const char *store, *series, *what;
	size_t n = 0;
	int rc, nargs;

	rc = cli_getopt(cmd, argc, argv, "", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	nargs = argc - optind;
	if (nargs < 1 || nargs > 3)
		return cli_usage_error(cmd, "expected STORE [SERIES [BOUND|off]]");
	store = argv[optind];
	series = nargs > 1 ? argv[optind + 1] : NULL;
	what = nargs > 2 ? argv[optind + 2] : NULL;
	if ((a.keep_set || a.every_set || a.chain_set) && (!what || strcmp(what, "off") == 0))
		return cli_usage_error(cmd, "--keep-exact, --exact-every and --chain go with a BOUND");
	if (what && strcmp(what, "off") != 0 && cli_parse_bound(what, &a.p.bound) < 0)
		return cli_usage_error(cmd, "BOUND: expected a number over 0 and at most %g, or off, not '%s'",
				       CK_LOSSY_BOUND_MAX, what);
	st = cli_open_store(store, what == NULL);
	if (!st)
		return CK_EXIT_FAILURE;
	if (what) {
		rc = ck_lossy_policy_set(st, series, strcmp(what, "off") ? &a.p : NULL, &err);
		if (rc == 0 && strcmp(what, "off") != 0)
			show(series, &a.p);
		else if (rc == 0)
			printf("%s: exact (no lossy policy)\n", series);
	} else {
		rc = ck_lossy_policies_load(store, &v, &n, &err);
		for (size_t i = 0; i < n && rc == 0; i++)
			if (!series || strcmp(v[i].series, series) == 0)
				show(v[i].series, &v[i].p);
		if (rc == 0 && series) {
			size_t i;

			for (i = 0; i < n && strcmp(v[i].series, series) != 0; i++)
				;
			if (i == n)
				printf("%s: exact (no lossy policy)\n", series);
		}
		ck_lossy_policies_free(v, n);
	}
	ck_store_close(st);
	if (rc < 0) {
		cli_error("lossy: %s", err.msg[0] ? err.msg : strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	return CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_lossy = {
	.name = "lossy",
	.args = "STORE [SERIES [BOUND|off] [--keep-exact N] [--exact-every K] [--chain C]]",
	.summary = "show or record the series' lossy policies (opt-in, for compaction)",
	.help = "Without SERIES, lists the lossy policies recorded in STORE/lossy.conf; with\n"
		"SERIES alone, that series' policy.  With a BOUND, records that every later\n"
		"compaction (ckptctl compact, the mount's background compaction) codes the\n"
		"series' older checkpoints lossily: each float32, bfloat16 or float16 tensor of\n"
		"at least 4096 elements decodes with every element within BOUND times the\n"
		"tensor's largest |x| of its original (0 < BOUND <= 0.5).  The newest N\n"
		"checkpoints, those whose step is a multiple of K, and the tensors they draw\n"
		"from older checkpoints stay exact.  'off' removes the policy; checkpoints\n"
		"coded lossily already stay as they are.  'ckptctl compact --dry-run' prints\n"
		"what a policy would save.\n"
		"\n"
		"  --keep-exact N     the newest N checkpoints stay exact (default 2, at least 1)\n"
		"  --exact-every K    checkpoints whose step is a multiple of K stay exact\n"
		"  --chain C          at most C residuals between a lossy version and a\n"
		"                     self-contained one (1..64; default: compact's\n"
		"                     --anchor-interval, 4 in the mount's background\n"
		"                     compaction): longer chains are smaller, and slower\n"
		"                     to read\n"
		"\n"
		"Exit status: 0 done, 1 error.\n",
	.run = run,
};
