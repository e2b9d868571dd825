/* ckptctl gc STORE [SERIES] [--keep-last N] [--keep SERIES/CKPT ...]
 * [--dry-run] [-v]: delete the live checkpoints no policy retains (each
 * with ck_delete_checkpoint, so files a retained composite draws from
 * stay), then sweep the packed store (ck_store_sweep_packs): chunks nothing
 * retained uses are dropped and packs mostly dead are rewritten. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/packstore.h"
#include "ckptfs/refs.h"
#include "cli.h"

struct gc_args {
	unsigned keep_last;          /* 0: every live checkpoint is retained */
	unsigned rewrite_below;      /* percent; 0: the sweep's default */
	int reclaim_delay;           /* as ck_sweep_opts */
	char **keep;                 /* --keep SERIES/CKPT */
	size_t nkeep;
	int dry_run, verbose, failed;
};

/* A checkpoint the policy deletes; name NULL: none, but the series has
 * deleted checkpoints whose files an interrupted deletion never reclaimed. */
struct victim {
	char *series, *name;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct gc_args *a = ctx;
	char **g, *end;
	unsigned long v;

	switch (c) {
	case 'N':
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || v == 0 || v > UINT_MAX) {
			cli_error("--keep-last: expected a count of at least 1, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->keep_last = (unsigned)v;
		return 0;
	case 'k':
		if (!strchr(arg, '/') || arg[0] == '/' || !strchr(arg, '/')[1]) {
			cli_error("--keep: '%s' is not SERIES/CKPT", arg);
			return CK_EXIT_USAGE;
		}
		g = realloc(a->keep, (a->nkeep + 1) * sizeof(*g));
		if (!g) {
			cli_error("out of memory");
			return CK_EXIT_FAILURE;
		}
		a->keep = g;
		a->keep[a->nkeep++] = (char *)arg;
		return 0;
	case 'r':
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || v == 0 || v > 100) {
			cli_error("--rewrite-below: expected a percentage 1..100, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->rewrite_below = (unsigned)v;
		return 0;
	case 'w':
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || v > 3600) {
			cli_error("--reclaim-delay: expected seconds 0..3600, not '%s'", arg);
			return CK_EXIT_USAGE;
		}
		a->reclaim_delay = v ? (int)v : -1;
		return 0;
	case 'n':
		a->dry_run = 1;
		return 0;
	case 'v':
		a->verbose = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static int kept_by_name(const struct gc_args *a, const char *series, const char *name)
{
	size_t sl = strlen(series);

	for (size_t i = 0; i < a->nkeep; i++)
		if (strncmp(a->keep[i], series, sl) == 0 && a->keep[i][sl] == '/' &&
		    strcmp(a->keep[i] + sl + 1, name) == 0)
			return 1;
	return 0;
}

/* Whether a file of ck is mapped but not packed: the chunk table locates
 * chunks in its raw bytes (older versions' deltas rest on them), so the
 * file must stay until a compaction packs it. */
static int holds_raw_references(struct ck_store *st, const struct ck_ckpt_info *ck)
{
	struct ck_file_info *f;
	size_t n;
	int holds = 0;

	if (ck_store_list_files(st, ck->id, &f, &n) < 0)
		return 1;   /* cannot tell: keep it */
	for (size_t i = 0; i < n && !holds; i++) {
		struct ck_file_pack_info pi;

		holds = ck_store_file_pack_info(st, f[i].id, &pi) < 0 || (pi.mapped && !pi.packed);
	}
	ck_file_info_free(f, n);
	return holds;
}

static void victims_free(struct victim *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].series);
		free(v[i].name);
	}
	free(v);
}

static int add_victim(struct victim **v, size_t *nv, const char *series, const char *name)
{
	struct victim *g = realloc(*v, (*nv + 1) * sizeof(**v));

	if (!g)
		return -ENOMEM;
	*v = g;
	g[*nv].series = strdup(series);
	g[*nv].name = name ? strdup(name) : NULL;
	if (!g[*nv].series || (name && !g[*nv].name)) {
		free(g[*nv].series);
		free(g[*nv].name);
		return -ENOMEM;
	}
	(*nv)++;
	return 0;
}

/* Whether deleted checkpoint ck still has files in the index: a deletion
 * killed before its reclaim (or all its files are still drawn from). */
static int has_files(struct ck_store *st, const struct ck_ckpt_info *ck)
{
	struct ck_file_info *f;
	size_t n;

	if (ck_store_list_files(st, ck->id, &f, &n) < 0)
		return 0;
	ck_file_info_free(f, n);
	return n > 0;
}

/* The live checkpoints of series that neither --keep-last nor --keep
 * retains, appended to *v; or, when there are none, the series alone if
 * a deleted checkpoint of it still has files (their reclaim is redone: it
 * frees what an interrupted deletion left, and keeps what is drawn from). */
static int pick_series(struct ck_store *st, const struct gc_args *a, const char *series, struct victim **v,
		       size_t *nv)
{
	struct ck_ckpt_info *ck;
	size_t n, live = 0, seen = 0, first_retained, before = *nv;
	int rc = ck_store_list_checkpoints(st, series, &ck, &n), leftovers = 0;

	if (rc < 0) {
		cli_error("%s: cannot list checkpoints: %s", series, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < n; i++)
		live += !ck[i].deleted;
	/* Ascending steps: the newest keep_last live ones come last (no
	 * --keep-last retains them all). */
	first_retained = a->keep_last && live > a->keep_last ? live - a->keep_last : 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (ck[i].deleted)
			leftovers |= has_files(st, &ck[i]);
		if (ck[i].deleted || seen++ >= first_retained || kept_by_name(a, series, ck[i].name))
			continue;
		if (holds_raw_references(st, &ck[i])) {
			cli_error("%s/%s: kept: older packed versions rest on its raw files "
				  "(run ckptctl compact first)", series, ck[i].name);
			continue;
		}
		rc = add_victim(v, nv, series, ck[i].name);
	}
	/* A deletion below reclaims for the whole series anyway. */
	if (rc == 0 && leftovers && *nv == before)
		rc = add_victim(v, nv, series, NULL);
	if (rc == -ENOMEM)
		cli_error("out of memory");
	ck_ckpt_info_free(ck, n);
	return rc;
}

static int pick(const char *dir, const struct gc_args *a, const char *only, struct victim **v, size_t *nv)
{
	/* Writable unless a dry run: the open recovers what an interrupted gc
	 * or deletion left, so the listing is what deleting will see. */
	struct ck_store *st = cli_open_store(dir, a->dry_run);
	char **series = NULL;
	size_t ns = 0;
	int rc;

	if (!st)
		return -EIO;
	rc = ck_store_list_series(st, &series, &ns);
	if (rc < 0)
		cli_error("%s: cannot list series: %s", dir, strerror(-rc));
	for (size_t i = 0; i < ns && rc == 0; i++)
		if (!only || strcmp(only, series[i]) == 0)
			rc = pick_series(st, a, series[i], v, nv);
	if (rc == 0 && only) {
		size_t i = 0;

		while (i < ns && strcmp(only, series[i]) != 0)
			i++;
		if (i == ns) {
			cli_error("no series '%s' in %s", only, dir);
			rc = -ENOENT;
		}
	}
	ck_strv_free(series, ns);
	ck_store_close(st);
	return rc;
}

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct gc_args *a = ctx;

	if (status < 0) {
		a->failed = 1;
		cli_error("%s: %s", path, msg);
	} else if (a->verbose && (status == CK_RECLAIM_REMOVED || status == CK_RECLAIM_DROPPED)) {
		printf("  %-10s  %s (%s)\n", status == CK_RECLAIM_REMOVED ? "removed" : "dropped", path, msg);
	}
}

/* Deletes one checkpoint and says what its deletion kept and freed. */
static void delete_one(const char *dir, struct gc_args *a, const struct victim *v, uint64_t *files_freed,
		       uint64_t *bytes_freed)
{
	struct ck_delete_opts dopts = { .dry_run = a->dry_run };
	struct ck_error err = { { 0 } };
	struct ck_version_ref *refs = NULL;
	size_t nrefs = 0, kept = 0;
	int rc;

	rc = ck_delete_checkpoint(dir, v->series, v->name, &dopts, on_report, a, &refs, &nrefs, &err);
	if (rc == -ENOENT && v->name) {
		/* Deleted meanwhile (ckptctl rm, a mount): what we wanted. */
		printf("%-12s  %s/%s (deleted already)\n", a->dry_run ? "would delete" : "deleted", v->series,
		       v->name);
		return;
	}
	if (rc < 0) {
		a->failed = 1;
		cli_error("%s/%s: %s", v->series, v->name ? v->name : "", ck_error_text(&err, rc));
		return;
	}
	for (size_t i = 0; i < nrefs; i++) {
		if (refs[i].used) {
			kept++;
		} else if (refs[i].owned) {
			(*files_freed)++;
			*bytes_freed += refs[i].size;
		}
		if (a->verbose)
			printf("  %-10s  %s/%s%s%s (%" PRIu64 " bytes)\n",
			       refs[i].used ? "kept" : refs[i].owned ? (a->dry_run ? "would free" : "freed") :
			       (a->dry_run ? "would drop" : "dropped"), v->series, refs[i].ckpt,
			       refs[i].relpath[0] ? "/" : "", refs[i].relpath, refs[i].size);
	}
	if (!v->name)
		printf("%-12s  %s: files of deleted checkpoints (%zu still drawn from)\n",
		       a->dry_run ? "would reclaim" : "reclaimed", v->series, kept);
	else
		printf("%-12s  %s/%s%s\n", a->dry_run ? "would delete" : "deleted", v->series, v->name,
		       kept ? " (some of the series' deleted files stay: newer checkpoints draw from them)" : "");
	ck_version_refs_free(refs, nrefs);
}

static int sweep(const char *dir, struct gc_args *a)
{
	struct ck_sweep_opts so = { .dry_run = a->dry_run, .rewrite_below_pct = a->rewrite_below,
				    .reclaim_delay = a->reclaim_delay };
	struct ck_error err = { { 0 } };
	struct ck_sweep_stats s;
	struct ck_store *st = cli_open_store(dir, a->dry_run);
	int rc;

	if (!st)
		return -EIO;
	rc = ck_store_sweep_packs(st, &so, &s, &err);
	ck_store_close(st);
	if (rc < 0) {
		cli_error("sweep: %s", ck_error_text(&err, rc));
		return rc;
	}
	printf("%s %" PRIu64 " chunk entr%s and %" PRIu64 " file map%s; %" PRIu64 " chunks live\n",
	       a->dry_run ? "would drop" : "dropped", s.dropped_chunks, s.dropped_chunks == 1 ? "y" : "ies",
	       s.dropped_fmaps, s.dropped_fmaps == 1 ? "" : "s", s.live_chunks);
	printf("packs: %" PRIu64 " %srewritten (%" PRIu64 " records, %" PRIu64 " bytes copied), %" PRIu64
	       " %semptied", s.packs_rewritten, a->dry_run ? "would be " : "", s.records_copied, s.bytes_copied,
	       s.packs_emptied, a->dry_run ? "would be " : "");
	if (s.leftovers_removed)
		printf(", %" PRIu64 " left by an interrupted gc removed", s.leftovers_removed);
	printf("\npack bytes: %" PRIu64 " -> %" PRIu64 " (%" PRIu64 " %s)\n", s.pack_bytes_before,
	       s.pack_bytes_after,
	       s.pack_bytes_before > s.pack_bytes_after ? s.pack_bytes_before - s.pack_bytes_after : 0,
	       a->dry_run ? "would be freed" : "freed");
	return 0;
}

static const struct option opts[] = {
	{ "keep-last", required_argument, NULL, 'N' },
	{ "keep", required_argument, NULL, 'k' },
	{ "rewrite-below", required_argument, NULL, 'r' },
	{ "reclaim-delay", required_argument, NULL, 'w' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "verbose", no_argument, NULL, 'v' },
	{ 0, 0, 0, 0 },
};

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	struct gc_args a = { 0 };
	struct victim *v = NULL;
	size_t nv = 0, ndeleted = 0;
	uint64_t files_freed = 0, bytes_freed = 0;
	const char *dir, *only;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "N:k:r:w:nv", opts, on_opt, &a);
	if (rc >= 0) {
		free(a.keep);
		return rc;
	}
	if (argc - optind < 1 || argc - optind > 2) {
		free(a.keep);
		return cli_usage_error(cmd, "expected STORE [SERIES]");
	}
	dir = argv[optind];
	only = argc - optind == 2 ? argv[optind + 1] : NULL;
	rc = pick(dir, &a, only, &v, &nv);
	for (size_t i = 0; i < nv && rc == 0; i++) {
		delete_one(dir, &a, &v[i], &files_freed, &bytes_freed);
		ndeleted += v[i].name != NULL;
	}
	if (rc == 0 && nv)
		printf("checkpoints: %zu %s, %" PRIu64 " store-owned files (%" PRIu64 " bytes) %s\n", ndeleted,
		       a.dry_run ? "would be deleted" : "deleted", files_freed, bytes_freed,
		       a.dry_run ? "would be freed" : "freed");
	if (rc == 0 && a.dry_run && nv)
		printf("(the sweep below counts what is unused now; the deletions would free more)\n");
	if (rc == 0)
		rc = sweep(dir, &a);
	victims_free(v, nv);
	free(a.keep);
	return rc < 0 || a.failed ? CK_EXIT_FAILURE : CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_gc = {
	.name = "gc",
	.args = "STORE [SERIES] [--keep-last N] [--keep SERIES/CKPT ...] [--rewrite-below PCT] [--reclaim-delay SEC] "
		"[--dry-run] [-v]",
	.summary = "delete old checkpoints and free what nothing retained uses",
	.help = "Per series (or only SERIES), retains the newest N live checkpoints (default:\n"
		"all of them) and every --keep one, and deletes the others as `ckptctl rm`\n"
		"does: a deleted checkpoint's files stay while a retained composite draws from\n"
		"them.  Then sweeps the packed store: chunks that no file the index still holds\n"
		"uses, directly or along a delta chain, are dropped, and packs whose live records\n"
		"fill less than half of them are rewritten (live records copied to a new pack,\n"
		"the old one emptied).  A checkpoint whose raw files older packed versions still\n"
		"rest on (compacted while it was the newest) is kept until a compaction packs\n"
		"it.  kill -9 at any point leaves a consistent store; the next gc finishes.\n"
		"\n"
		"  -N, --keep-last N      retain the newest N live checkpoints of each series\n"
		"  -k, --keep SERIES/CKPT retain this checkpoint too (repeatable)\n"
		"  -r, --rewrite-below P  rewrite packs whose live records fill less than P %\n"
		"                         of them (1..100, default 50; 100: every pack with\n"
		"                         a dead byte)\n"
		"  -w, --reclaim-delay SEC  wait SEC seconds between recording the moved records\n"
		"                         and emptying the packs they came from, so that readers\n"
		"                         on other nodes move first (default 15 for a store on a\n"
		"                         shared filesystem, 0 on a local one)\n"
		"  -n, --dry-run          print what would be deleted and freed; change nothing\n"
		"  -v, --verbose          every file kept, freed or dropped\n"
		"\n"
		"Exit status: 0 done, 1 error (what was done before it stays done).\n",
	.run = run,
};
