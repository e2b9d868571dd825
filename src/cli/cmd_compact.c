/* ckptctl compact STORE: move committed checkpoints into packs (dedup,
 * reverse deltas, compression), coding the checkpoints a lossy policy
 * names lossily, printing progress and a summary; --dry-run says what a
 * lossy policy would save. */
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
	struct ck_lossy_policy lossy;
	int have_lossy, keep_exact_set, exact_every_set;
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
	case 'w':
		if (parse_uint(arg, 3600, &v) < 0) {
			cli_error("--reclaim-delay: expected seconds 0..3600, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->opts.reclaim_delay = v ? (int)v : -1;
		return 0;
	case 'L':
		if (cli_parse_bound(arg, &a->lossy.bound) < 0) {
			cli_error("--lossy: expected a bound over 0 and at most %g, not '%s'", CK_LOSSY_BOUND_MAX, arg);
			return CK_EXIT_USAGE;
		}
		a->have_lossy = 1;
		return 0;
	case 'E':
		if (parse_uint(arg, 1000000, &v) < 0 || v == 0) {
			cli_error("--keep-exact: expected a count of at least 1, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->lossy.keep_newest = v;
		a->keep_exact_set = 1;
		return 0;
	case 'e':
		if (parse_uint(arg, UINT_MAX, &v) < 0) {
			cli_error("--exact-every: expected a step count, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->lossy.exact_every = v;
		a->exact_every_set = 1;
		return 0;
	case 'N':
		a->opts.no_lossy = 1;
		return 0;
	case 'n':
		a->opts.dry_run = 1;
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

static void on_lossy(void *ctx, const struct ck_lossy_report *r)
{
	const struct compact_args *a = ctx;
	uint64_t saved = r->before_bytes > r->after_bytes ? r->before_bytes - r->after_bytes : 0;

	if (a->quiet)
		return;
	printf("%s %s/%s: %.1f MB -> %.1f MB, %s %.1f MB; %llu tensor%s within %g x max|x| (worst %.3g)\n",
	       a->opts.dry_run ? "would code" : "lossy", r->series, r->ckpt, mb(r->before_bytes), mb(r->after_bytes),
	       a->opts.dry_run ? "saves" : "saved", mb(saved), (unsigned long long)r->storages,
	       r->storages == 1 ? "" : "s", r->bound, r->max_rel);
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
	if (s->lossy_files)
		printf("  lossy: %llu file%s (%.1f MB), %llu chunks (%.1f MB) coded within their bound\n",
		       (unsigned long long)s->lossy_files, s->lossy_files == 1 ? "" : "s", mb(s->lossy_logical),
		       (unsigned long long)s->lossy_chunks, mb(s->lossy_bytes));
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
		{ "reclaim-delay", required_argument, NULL, 'w' },
		{ "lossy", required_argument, NULL, 'L' },
		{ "keep-exact", required_argument, NULL, 'E' },
		{ "exact-every", required_argument, NULL, 'e' },
		{ "no-lossy", no_argument, NULL, 'N' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ 0, 0, 0, 0 },
	};
	struct compact_args a = { .opts = { 0 }, .lossy = { .keep_newest = CK_LOSSY_KEEP_NEWEST_DEFAULT } };
	struct ck_compact_stats s;
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "s:k:r:l:w:vqn", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage_error(cmd, "expected one STORE");
	if ((a.keep_exact_set || a.exact_every_set) && !a.have_lossy)
		return cli_usage_error(cmd, "--keep-exact and --exact-every go with --lossy");
	if (a.have_lossy && a.opts.no_lossy)
		return cli_usage_error(cmd, "--lossy and --no-lossy contradict each other");
	if (a.have_lossy)
		a.opts.lossy = &a.lossy;
	a.opts.lossy_report = on_lossy;
	a.opts.lossy_report_ctx = &a;
	st = cli_open_store(argv[optind], a.opts.dry_run);
	if (!st)
		return CK_EXIT_FAILURE;
	rc = ck_store_compact(st, &a.opts, on_progress, &a, &s, &err);
	ck_store_close(st);
	if (!a.quiet && !a.opts.dry_run)
		summary(&s);
	if (rc < 0) {
		cli_error("compact: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	return CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_compact = {
	.name = "compact",
	.args = "STORE [--series S] [--anchor-interval K] [--keep-raw N] [--level L] [--reclaim-delay SEC] [--lossy B [--keep-exact N] [--exact-every K] | --no-lossy] [--dry-run] [-v|-q]",
	.summary = "move committed checkpoints into packs (dedup, deltas, compression)",
	.help = "Cuts every committed file version into chunks of at most 1 MiB (a new chunk at\n"
		"every tensor storage) and stores each chunk once: a chunk stored before costs\n"
		"nothing (dedup); a changed one is kept as zstd of its byte planes or as a delta\n"
		"against the same chunk of the next newer checkpoint, whichever is smaller.  The\n"
		"newest checkpoint of each series stays raw (resume reads it at full speed), and\n"
		"no version is more than K deltas away from a self-contained chunk.  Readers and\n"
		"the mount go on meanwhile; a crash at any point leaves a consistent store.\n"
		"\n"
		"A series with a lossy policy (ckptctl lossy), or every series compacted with\n"
		"--lossy, has its older checkpoints coded lossily: each float32, bfloat16 or\n"
		"float16 tensor of at least 4096 elements decodes with every element within\n"
		"B times the tensor's largest |x| of its original; everything else stays bit for\n"
		"bit.  The newest N checkpoints and those whose step is a multiple of K stay\n"
		"exact, and so do tensors they draw from older checkpoints.  A checkpoint is\n"
		"lossy once its records are durable and read back; its raw files then go as\n"
		"packed ones do (--keep-raw), and exact records nothing uses any more at the\n"
		"next gc.  A lossy checkpoint never becomes exact again.\n"
		"\n"
		"  -s, --series S           only series S\n"
		"  -k, --anchor-interval K  the longest delta chain (1..64, default 4)\n"
		"  -r, --keep-raw N         remove the raw files the store owns (under STORE/data)\n"
		"                           of packed checkpoints, except the newest N of a series\n"
		"                           (default 0: keep them all)\n"
		"  -l, --level L            zstd level (default 1: higher levels gain nothing on\n"
		"                           byte planes)\n"
		"  -w, --reclaim-delay SEC  with --keep-raw, wait SEC seconds between recording\n"
		"                           versions packed and removing their raw files, so that\n"
		"                           readers on other nodes move to the packs first\n"
		"                           (default 15 for a store on a shared filesystem, 0 on\n"
		"                           a local one)\n"
		"  --lossy B                code older checkpoints of the series compacted lossily\n"
		"                           within B x max|x| per tensor (0 < B <= 0.5), instead\n"
		"                           of their recorded policies\n"
		"  --keep-exact N           with --lossy: the newest N stay exact (default 2)\n"
		"  --exact-every K          with --lossy: steps that are multiples of K stay exact\n"
		"  --no-lossy               apply no lossy policy, not even recorded ones\n"
		"  -n, --dry-run            print, per checkpoint the lossy policy codes, the bytes\n"
		"                           it would save and the bound; change nothing\n"
		"  -v, --verbose            a line per file packed\n"
		"  -q, --quiet              no summary\n"
		"\n"
		"Exit status: 0 done, 1 error (what was packed before it stays packed).\n",
	.run = run,
};
