/* ckptctl reindex STORE: rebuild the LMDB index from the manifests. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct reindex_args {
	struct ck_reindex_opts opts;
	int verbose, quiet;
	size_t damaged, stale;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct reindex_args *a = ctx;

	switch (c) {
	case 'c':
		a->opts.verify = 1;
		return 0;
	case 'f':
		a->opts.force = 1;
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
	struct reindex_args *a = ctx;

	if (status < 0) {
		a->damaged++;
		cli_error("damaged manifest %s: %s; skipped", path, msg);
	} else if (status == CK_REINDEX_STALE) {
		a->stale++;
		printf("CHANGED  %s: %s\n", path, msg);
	} else if (a->verbose) {
		printf("indexed  %s (%s)\n", path, msg);
	}
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verify", no_argument, NULL, 'c' },
		{ "force", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ 0, 0, 0, 0 },
	};
	struct reindex_args a = { .opts = { 0 } };
	struct ck_error err = { { 0 } };
	int rc, n;

	rc = cli_getopt(cmd, argc, argv, "cfvq", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage_error(cmd, "expected one STORE");
	n = ck_store_reindex(argv[optind], &a.opts, on_report, &a, &err);
	if (n < 0) {
		cli_error("reindex: %s", ck_error_text(&err, n));
		return CK_EXIT_FAILURE;
	}
	if (!a.quiet) {
		printf("reindexed %d checkpoint%s; %zu damaged manifest%s skipped", n, n == 1 ? "" : "s", a.damaged,
		       a.damaged == 1 ? "" : "s");
		if (a.opts.verify)
			printf("; %zu file%s changed since import", a.stale, a.stale == 1 ? "" : "s");
		putchar('\n');
	}
	return a.damaged || a.stale ? CK_EXIT_PARTIAL : CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_reindex = {
	.name = "reindex",
	.args = "STORE [--verify] [--force] [-v|-q]",
	.summary = "rebuild the index from the checkpoint manifests in the store",
	.help = "Every import leaves a checksummed manifest per checkpoint in STORE/manifests/; this\n"
		"rebuilds STORE/index from them alone, without reading any checkpoint file (after\n"
		"the index was lost or damaged, or to give another node its own index).  The new\n"
		"index is built aside and swapped in with renames, so a crash leaves the old or the\n"
		"new one.  A damaged manifest (torn, edited, misplaced) is reported and skipped.\n"
		"Ids may change; everything else reads back the same.  A running ckptfs keeps the\n"
		"index it opened until it is mounted again.\n"
		"\n"
		"  -c, --verify   also re-check that every file is still the one imported and name\n"
		"                 those that changed (CHANGED lines), as `ckptctl verify` does\n"
		"  -f, --force    replace the index even where it holds checkpoints that have no\n"
		"                 manifest (imported by an older ckptctl): they are dropped\n"
		"  -v, --verbose  list every checkpoint indexed\n"
		"  -q, --quiet    no summary line\n"
		"\n"
		"Exit status: 0 all manifests indexed, 2 some damaged (skipped) or, with --verify,\n"
		"some files changed; 1 error (the old index is kept).\n",
	.run = run,
};
