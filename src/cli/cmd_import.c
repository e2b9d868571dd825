/* ckptctl import STORE DIR: index existing checkpoints in place. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct import_args {
	struct ck_import_opts opts;
	int verbose, quiet;
	size_t indexed, refused, skipped;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct import_args *a = ctx;

	switch (c) {
	case 's':
		a->opts.series = arg;
		return 0;
	case 'p':
		a->opts.step_pattern = arg;
		return 0;
	case 'v':
		a->verbose = 1;
		return 0;
	case 'q':
		a->quiet = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct import_args *a = ctx;

	if (status < 0) {
		a->refused++;
		cli_error("refused %s: %s", path, msg);
	} else if (status == CK_IMPORT_SKIPPED) {
		a->skipped++;
		if (a->verbose)
			printf("skipped  %s (%s)\n", path, msg);
	} else {
		a->indexed++;
		if (a->verbose)
			printf("indexed  %s (%s)\n", path, msg);
	}
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "series", required_argument, NULL, 's' },
		{ "pattern", required_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ 0, 0, 0, 0 },
	};
	struct import_args a = { .opts = { 0 } };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc, n;

	rc = cli_getopt(cmd, argc, argv, "s:p:vq", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_usage_error(cmd, "expected STORE and DIR");
	a.opts.verbose = a.verbose;
	st = cli_open_store(argv[optind], 0);
	if (!st)
		return CK_EXIT_FAILURE;
	n = ck_store_import(st, argv[optind + 1], &a.opts, on_report, &a, &err);
	ck_store_close(st);
	if (n < 0) {
		cli_error("import: %s", ck_error_text(&err, n));
		return CK_EXIT_FAILURE;
	}
	if (!a.quiet)
		printf("imported %d checkpoint%s: %zu file%s indexed, %zu refused, %zu skipped\n", n,
		       n == 1 ? "" : "s", a.indexed, a.indexed == 1 ? "" : "s", a.refused, a.skipped);
	return a.refused ? CK_EXIT_PARTIAL : CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_import = {
	.name = "import",
	.args = "STORE DIR [--series NAME] [--pattern REGEX] [-v|-q]",
	.summary = "index existing checkpoint directories in place (nothing is copied)",
	.help = "DIR is one checkpoint whose name has a step (checkpoint-500: series = its parent's\n"
		"name), a run directory whose step-named entries are checkpoints, or else a single\n"
		"checkpoint (step 0) of a series named after it.  Every file is classified by its\n"
		"contents, parsed and hashed; files that cannot be served (legacy torch.save, torn or\n"
		"corrupt files, pickles naming dangerous globals) are recorded as refused.\n"
		"Importing the same directory again replaces what was recorded for it.\n"
		"\n"
		"  -s, --series NAME     name of the series (default: from the directory names)\n"
		"  -p, --pattern REGEX   POSIX ERE whose first group is the step, stored for the series\n"
		"                        (default: built-in patterns such as checkpoint-N, global_stepN)\n"
		"  -v, --verbose         list every file indexed or skipped\n"
		"  -q, --quiet           no summary line\n"
		"\n"
		"Exit status: 0 all files indexed, 2 some refused (the rest indexed), 1 error.\n",
	.run = run,
};
