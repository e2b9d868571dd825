/* ckptctl compact STORE: move committed checkpoints into packs (dedup,
 * reverse deltas, compression), printing progress and a summary. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/packstore.h"
#include "cli.h"

struct compact_args {
	struct ck_compact_opts opts;
	int verbose, quiet;
};

static int parse_uint(const char *arg, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int on_opt(void *ctx, int c, const char *arg)
{
	struct compact_args *a = ctx;
	unsigned v;

	switch (c) {
	case 's':
		a->opts.series = arg;
		return 0;
	case 'k':
		if (parse_uint(arg, 64, &v) < 0 || v == 0) {
			cli_error("--anchor-interval: expected 1..64, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->opts.anchor_k = v;
		return 0;
	case 'r':
		if (parse_uint(arg, UINT_MAX, &v) < 0) {
			cli_error("--keep-raw: expected a count, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->opts.keep_raw = v;
		return 0;
	case 'l':
		if (parse_uint(arg, 22, &v) < 0 || v == 0) {
			cli_error("--level: expected a zstd level 1..22, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->opts.level = (int)v;
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

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

static void on_progress(void *ctx, const char *series, const char *ckpt, const char *relpath,
			const struct ck_compact_stats *s)
{
	const struct compact_args *a = ctx;

	if (a->verbose)
		printf("packed  %s/%s%s%s  (%llu files, %.1f MB so far)\n", series, ckpt, relpath[0] ? "/" : "",
		       relpath, (unsigned long long)s->files, mb(s->logical_bytes));
}

static void summary(const struct ck_compact_stats *s)
{
	double ratio = s->stored_bytes ? (double)s->logical_bytes / (double)s->stored_bytes : 0;
	double secs = s->seconds > 0 ? s->seconds : 1e-9;

	printf("compacted %llu file%s: logical %.1f MB, stored %.1f MB", (unsigned long long)s->files,
	       s->files == 1 ? "" : "s", mb(s->logical_bytes), mb(s->stored_bytes));
	if (s->stored_bytes)
		printf(" (%.2fx)", ratio);
	else if (s->logical_bytes)
		printf(" (all dedup)");
	printf("\n  dedup %.1f MB (%llu chunks), delta %.1f MB (%llu), plain %.1f MB (%llu)\n", mb(s->dedup_bytes),
	       (unsigned long long)s->dedup_chunks, mb(s->delta_bytes), (unsigned long long)s->delta_chunks,
	       mb(s->plain_bytes), (unsigned long long)s->plain_chunks);
	printf("  %.2f s, %.1f MB/s", s->seconds, mb(s->logical_bytes) / secs);
	if (s->raw_removed_bytes)
		printf("; raw files removed: %.1f MB", mb(s->raw_removed_bytes));
	putchar('\n');
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "series", required_argument, NULL, 's' },
		{ "anchor-interval", required_argument, NULL, 'k' },
		{ "keep-raw", required_argument, NULL, 'r' },
		{ "level", required_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ 0, 0, 0, 0 },
	};
	struct compact_args a = { .opts = { 0 } };
	struct ck_compact_stats s;
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "s:k:r:l:vq", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage_error(cmd, "expected one STORE");
	st = cli_open_store(argv[optind], 0);
	if (!st)
		return CK_EXIT_FAILURE;
	rc = ck_store_compact(st, &a.opts, on_progress, &a, &s, &err);
	ck_store_close(st);
	if (!a.quiet)
		summary(&s);
	if (rc < 0) {
		cli_error("compact: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	return CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_compact = {
	.name = "compact",
	.args = "STORE [--series S] [--anchor-interval K] [--keep-raw N] [--level L] [-v|-q]",
	.summary = "move committed checkpoints into packs (dedup, deltas, compression)",
	.help = "Cuts every committed file version into chunks of at most 1 MiB (a new chunk at\n"
		"every tensor storage) and stores each chunk once: a chunk stored before costs\n"
		"nothing (dedup); a changed one is kept as zstd of its byte planes or as a delta\n"
		"against the same chunk of the next newer checkpoint, whichever is smaller.  The\n"
		"newest checkpoint of each series stays raw (resume reads it at full speed), and\n"
		"no version is more than K deltas away from a self-contained chunk.  Readers and\n"
		"the mount go on meanwhile; a crash at any point leaves a consistent store.\n"
		"\n"
		"  -s, --series S           only series S\n"
		"  -k, --anchor-interval K  the longest delta chain (1..64, default 4)\n"
		"  -r, --keep-raw N         remove the raw files the store owns (under STORE/data)\n"
		"                           of packed checkpoints, except the newest N of a series\n"
		"                           (default 0: keep them all)\n"
		"  -l, --level L            zstd level (default 1: higher levels gain nothing on\n"
		"                           byte planes)\n"
		"  -v, --verbose            a line per file packed\n"
		"  -q, --quiet              no summary\n"
		"\n"
		"Exit status: 0 done, 1 error (what was packed before it stays packed).\n",
	.run = run,
};
