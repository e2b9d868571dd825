/* ckptctl stats STORE [SERIES] [--json] [--chunk-size N]: logical versus
 * physical bytes per checkpoint and series, and how much each layer
 * changed between consecutive checkpoints. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/view.h"
#include "cli.h"
#include "stats.h"

#define DEFAULT_CHUNK (1u << 20)
#define MAX_CHUNK (1u << 30)

struct stats_args {
	int json;
	size_t chunk;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct stats_args *a = ctx;
	char *end;
	unsigned long long v;

	if (c == 'j') {
		a->json = 1;
		return 0;
	}
	if (c == 'c') {
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || v == 0 || v % 8 || v > MAX_CHUNK) {
			cli_error("stats: --chunk-size must be a multiple of 8 from 8 to %u bytes, not '%s'", MAX_CHUNK,
				  arg);
			return CK_EXIT_USAGE;
		}
		a->chunk = (size_t)v;
		return 0;
	}
	return CK_EXIT_USAGE;
}

/* "1.5 MiB" */
static const char *human(char *buf, size_t size, uint64_t v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", d, units[u]);
	return buf;
}

/* Per checkpoint and per series; dedup, delta and compression come from
 * what compaction recorded for the packed files. */
struct totals {
	uint64_t logical, physical, tensor_bytes, partial;
	size_t unservable;
	uint64_t dedup, delta, compressed;
};

static void json_bytes(struct jw *w, const struct totals *t)
{
	jw_key(w, "logical_bytes");
	jw_uint(w, t->logical);
	jw_key(w, "physical_bytes");
	jw_uint(w, t->physical);
	jw_key(w, "tensor_bytes");
	jw_uint(w, t->tensor_bytes);
	jw_key(w, "partial_save_bytes");
	jw_uint(w, t->partial);
	jw_key(w, "unservable_files");
	jw_uint(w, t->unservable);
	jw_key(w, "dedup_bytes");
	jw_uint(w, t->dedup);
	jw_key(w, "delta_bytes");
	jw_uint(w, t->delta);
	jw_key(w, "compression_saved_bytes");
	jw_uint(w, t->compressed);
}

static void print_bytes(const char *step, const char *name, const struct totals *t)
{
	char a[32], b[32], c[32], d[32], e[32], f[32];

	printf("%12s  %-28s %12s %12s %12s %8s %8s %10s\n", step, name, human(a, sizeof(a), t->logical),
	       human(b, sizeof(b), t->physical), human(c, sizeof(c), t->partial), human(d, sizeof(d), t->dedup),
	       human(e, sizeof(e), t->delta), human(f, sizeof(f), t->compressed));
}

static double fraction(const struct stats_layer *l)
{
	return l->chunks ? (double)l->same_chunks / (double)l->chunks : NAN;
}

static void json_layers(struct jw *w, const struct stats_layer *l, size_t n)
{
	jw_begin_arr(w);
	for (size_t i = 0; i < n; i++) {
		jw_begin_obj(w);
		jw_key(w, "layer");
		jw_str(w, l[i].name);
		jw_key(w, "tensors");
		jw_uint(w, l[i].tensors);
		jw_key(w, "measured_tensors");
		jw_uint(w, l[i].measured);
		jw_key(w, "new_tensors");
		jw_uint(w, l[i].added);
		jw_key(w, "bytes");
		jw_uint(w, l[i].bytes);
		jw_key(w, "chunks");
		jw_uint(w, l[i].chunks);
		jw_key(w, "identical_chunks");
		jw_uint(w, l[i].same_chunks);
		jw_key(w, "identical_fraction");
		jw_double(w, fraction(&l[i]));
		jw_key(w, "relative_l2");
		jw_double(w, stats_relative_l2(&l[i]));
		jw_end_obj(w);
	}
	jw_end_arr(w);
}

static void print_layers(const char *name, const char *prev, const struct stats_layer *l, size_t n)
{
	char sz[32];

	printf("\n  %s vs %s:\n", name, prev);
	printf("    %-24s %8s %12s %14s %12s\n", "LAYER", "TENSORS", "BYTES", "RELATIVE-L2", "SAME-CHUNKS");
	for (size_t i = 0; i < n; i++) {
		double r = stats_relative_l2(&l[i]), f = fraction(&l[i]);
		char rel[32], frac[32];

		snprintf(rel, sizeof(rel), isfinite(r) ? "%.6g" : "-", r);
		snprintf(frac, sizeof(frac), isfinite(f) ? "%.1f%%" : "-", f * 100);
		printf("    %-24s %8zu %12s %14s %12s", l[i].name, l[i].tensors, human(sz, sizeof(sz), l[i].bytes), rel,
		       frac);
		if (l[i].added)
			printf("  (+%zu new)", l[i].added);
		putchar('\n');
	}
}

struct series_ctx {
	struct ck_view *v;
	struct ck_store *st;
	const struct stats_args *a;
	struct jw *w;
	size_t unservable;   /* over every series: makes the exit status CK_EXIT_PARTIAL */
};

struct layer_set {
	struct stats_layer *l;
	size_t n;
};

/* One checkpoint: its bytes and, after the first, its layers against prev
 * (kept in *set for the text tables, which follow the byte table). */
static int one_checkpoint(struct series_ctx *sc, const char *series, const struct ck_ckpt_info *c,
			  const struct ck_ckpt_info *pc, struct stats_ckpt *prev, struct stats_ckpt *cur, struct totals *sum,
			  struct layer_set *set)
{
	struct stats_layer *layers = NULL;
	size_t nlayers = 0;
	struct totals t;
	char step[24];
	int rc;

	rc = stats_collect(sc->v, sc->st, series, c, cur);
	if (rc < 0)
		return rc;
	if (pc) {
		rc = stats_compare(sc->st, prev, cur, sc->a->chunk, &layers, &nlayers);
		if (rc < 0)
			return rc;
	}
	t = (struct totals){ cur->logical, cur->physical, cur->tensor_bytes, cur->partial, cur->unservable,
			     cur->dedup, cur->delta, cur->compressed };
	sum->logical += t.logical;
	sum->physical += t.physical;
	sum->tensor_bytes += t.tensor_bytes;
	sum->partial += t.partial;
	sum->unservable += t.unservable;
	sum->dedup += t.dedup;
	sum->delta += t.delta;
	sum->compressed += t.compressed;
	if (sc->a->json) {
		jw_begin_obj(sc->w);
		jw_key(sc->w, "name");
		jw_str(sc->w, c->name);
		jw_key(sc->w, "step");
		jw_int(sc->w, c->step);
		json_bytes(sc->w, &t);
		jw_key(sc->w, "previous");
		if (pc)
			jw_str(sc->w, pc->name);
		else
			jw_null(sc->w);
		jw_key(sc->w, "layers");
		json_layers(sc->w, layers, nlayers);
		jw_end_obj(sc->w);
	} else {
		snprintf(step, sizeof(step), "%" PRId64, c->step);
		print_bytes(step, c->name, &t);
		set->l = layers;
		set->n = nlayers;
		return 0;
	}
	stats_layers_free(layers, nlayers);
	return 0;
}

static int one_series(struct series_ctx *sc, const char *series)
{
	struct stats_ckpt prev = { 0 }, cur = { 0 };
	struct totals sum = { 0 };
	struct layer_set *sets;
	struct ck_ckpt_info *c;
	size_t n, nall;
	int rc;

	rc = ck_store_list_checkpoints(sc->st, series, &c, &nall);
	if (rc < 0)
		return rc;
	n = cli_live_first(c, nall);
	sets = calloc(n ? n : 1, sizeof(*sets));
	if (!sets) {
		ck_ckpt_info_free(c, nall);
		return -ENOMEM;
	}
	if (sc->a->json) {
		jw_begin_obj(sc->w);
		jw_key(sc->w, "name");
		jw_str(sc->w, series);
		jw_key(sc->w, "checkpoints");
		jw_begin_arr(sc->w);
	} else {
		printf("series %s\n%12s  %-28s %12s %12s %12s %8s %8s %10s\n", series, "STEP", "CHECKPOINT", "LOGICAL",
		       "PHYSICAL", "PARTIAL-SAVE", "DEDUP", "DELTA", "COMPRESSED");
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = one_checkpoint(sc, series, &c[i], i ? &c[i - 1] : NULL, &prev, &cur, &sum, &sets[i]);
		stats_ckpt_free(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
	}
	stats_ckpt_free(&prev);
	stats_ckpt_free(&cur);
	sc->unservable += sum.unservable;
	if (rc == 0 && sc->a->json) {
		jw_end_arr(sc->w);
		jw_key(sc->w, "totals");
		jw_begin_obj(sc->w);
		json_bytes(sc->w, &sum);
		jw_end_obj(sc->w);
		jw_end_obj(sc->w);
	} else if (rc == 0) {
		print_bytes("", "total", &sum);
		if (sum.unservable)
			printf("  %zu composite file(s) could not be served (changed or refused): their tensors are not "
			       "counted\n", sum.unservable);
		for (size_t i = 1; i < n; i++)
			print_layers(c[i].name, c[i - 1].name, sets[i].l, sets[i].n);
		putchar('\n');
	}
	for (size_t i = 0; i < n; i++)
		stats_layers_free(sets[i].l, sets[i].n);
	free(sets);
	ck_ckpt_info_free(c, nall);
	return rc;
}

/* The series to report: SERIES alone (which must have checkpoints), or all. */
static int series_names(struct ck_store *st, const char *series, char ***names, size_t *n)
{
	struct ck_ckpt_info *c;
	size_t nc;
	int rc;

	if (!series)
		return ck_store_list_series(st, names, n);
	rc = ck_store_list_checkpoints(st, series, &c, &nc);
	if (rc < 0)
		return rc;
	ck_ckpt_info_free(c, nc);
	if (nc == 0) {
		cli_error("stats: no series '%s' in %s", series, ck_store_path(st));
		return -ENOENT;
	}
	*names = malloc(sizeof(**names));
	if (!*names)
		return -ENOMEM;
	(*names)[0] = strdup(series);
	*n = 1;
	return (*names)[0] ? 0 : -ENOMEM;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ 0, 0, 0, 0 },
	};
	struct stats_args a = { .chunk = DEFAULT_CHUNK };
	struct ck_view_opts vopts = { .verify = CK_VERIFY_NONE };
	struct jw w = { .b = CK_BUF_INIT };
	struct series_ctx sc = { .a = &a, .w = &w };
	struct ck_error err = { 0 };
	char **names = NULL, *series, *ckpt;
	size_t n = 0;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "jc:", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	rc = cli_open_target(cmd, argc, argv, &sc.st, &series, &ckpt);
	if (rc >= 0)
		return rc;
	if (ckpt) {
		ck_store_close(sc.st);
		return cli_usage_error(cmd, "stats takes a series, not a checkpoint ('%s/%s')", series, ckpt);
	}
	rc = ck_view_open(ck_store_path(sc.st), &vopts, &sc.v, &err);
	if (rc < 0) {
		cli_error("stats: %s", ck_error_text(&err, rc));
		ck_store_close(sc.st);
		return CK_EXIT_FAILURE;
	}
	rc = series_names(sc.st, series, &names, &n);
	if (a.json && rc == 0) {
		jw_begin_obj(&w);
		jw_key(&w, "store");
		jw_str(&w, ck_store_path(sc.st));
		jw_key(&w, "chunk_size");
		jw_uint(&w, a.chunk);
		jw_key(&w, "series");
		jw_begin_arr(&w);
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = one_series(&sc, names[i]);
		if (rc < 0)
			cli_error("stats: %s: %s", names[i], strerror(-rc));
	}
	if (a.json && rc == 0) {
		jw_end_arr(&w);
		jw_end_obj(&w);
		rc = jw_finish(&w) == CK_EXIT_OK ? 0 : -EIO;
	}
	jw_free(&w);
	if (names)
		ck_strv_free(names, n);
	ck_view_close(sc.v);
	ck_store_close(sc.st);
	if (rc == -ENOMEM)
		cli_error("stats: out of memory");
	if (rc < 0)
		return CK_EXIT_FAILURE;
	return sc.unservable ? CK_EXIT_PARTIAL : CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_stats = {
	.name = "stats",
	.args = "STORE [SERIES] [--json] [--chunk-size N]",
	.summary = "logical vs physical bytes per checkpoint, and how much each layer changed",
	.help = "Per checkpoint of each series (or of SERIES): the logical bytes its composite files\n"
		"serve, the physical bytes of the files it holds itself, and the tensor bytes it\n"
		"serves from older checkpoints (partial saves), with series totals.  DEDUP, DELTA\n"
		"and COMPRESSED stay 0 until packs exist.  Then, for each checkpoint after the\n"
		"first, per layer: the relative L2 norm of the update ||w_t - w_t-1|| / ||w_t-1||\n"
		"over its float32/float16/bfloat16/float64 tensors, and the fraction of identical\n"
		"chunks (XXH3-128 per chunk; tensors served from the same bytes count as identical\n"
		"unread).  Tensors are read chunk by chunk from the physical files.  Exits 2 when\n"
		"some composite file cannot be served (changed since import): its tensors are not\n"
		"counted.\n"
		"\n"
		"  -j, --json          machine-readable output\n"
		"  -c, --chunk-size N  bytes per chunk (a multiple of 8; default 1048576)\n",
	.run = run,
};
