/* ckptctl diff STORE A B [--json] [--chunk-size N]: two checkpoints (of
 * one series or two) compared tensor by tensor and layer by layer, as
 * their composites serve them (include/ckptfs/catalog.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/catalog.h"
#include "ckptfs/view.h"
#include "cli.h"

#define DEFAULT_CHUNK (1u << 20)
#define MAX_CHUNK (1u << 30)

struct diff_args {
	int json;
	size_t chunk;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct diff_args *a = ctx;
	unsigned long long v;
	char *end;

	if (c == 'j') {
		a->json = 1;
		return 0;
	}
	if (c == 'c') {
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || v < 8 || v % 8 || v > MAX_CHUNK) {
			cli_error("diff: --chunk-size must be a multiple of 8 from 8 to %u bytes, not '%s'", MAX_CHUNK, arg);
			return CK_EXIT_USAGE;
		}
		a->chunk = (size_t)v;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static const char *const status_names[] = {
	[CK_DIFF_IDENTICAL] = "identical",
	[CK_DIFF_CHANGED] = "changed",
	[CK_DIFF_ONLY_A] = "only_a",
	[CK_DIFF_ONLY_B] = "only_b",
	[CK_DIFF_RETYPED] = "retyped",
};

struct layer_sum {
	const char *name;
	size_t count[5];
	struct ck_l2 l2;
	int measured;
};

static struct layer_sum *layer_of(struct layer_sum **v, size_t *n, const char *name)
{
	struct layer_sum *l;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].name, name))
			return &(*v)[i];
	l = realloc(*v, (*n + 1) * sizeof(*l));
	if (!l)
		return NULL;
	*v = l;
	l = &l[(*n)++];
	memset(l, 0, sizeof(*l));
	l->name = name;
	return l;
}

static void type_text(char *out, size_t size, const struct ck_cat_tensor *t)
{
	char shape[160];

	if (!t) {
		snprintf(out, size, "-");
		return;
	}
	cli_format_shape(shape, sizeof(shape), t->ndim, t->shape);
	snprintf(out, size, "%s %s", ck_dtype_name(t->dtype), shape);
}

/* A number or "-" when not measured. */
static void num_text(char *out, size_t size, int known, double v)
{
	if (known && isfinite(v))
		snprintf(out, size, "%.6g", v);
	else
		snprintf(out, size, "-");
}

static int measured(const struct ck_diff_tensor *d)
{
	return d->measured && (d->status == CK_DIFF_CHANGED || d->status == CK_DIFF_IDENTICAL);
}

static void json_tensor_type(struct jw *w, const char *key, const struct ck_cat_tensor *t)
{
	jw_key(w, key);
	if (!t) {
		jw_null(w);
		return;
	}
	jw_begin_obj(w);
	jw_key(w, "dtype");
	jw_str(w, ck_dtype_name(t->dtype));
	jw_key(w, "shape");
	jw_begin_arr(w);
	for (int i = 0; i < t->ndim; i++)
		jw_uint(w, t->shape[i]);
	jw_end_arr(w);
	jw_key(w, "source_checkpoint");
	jw_str(w, t->src_ckpt);
	jw_key(w, "source_step");
	jw_int(w, t->src_step);
	jw_end_obj(w);
}

static int report(const char *a, const char *b, const struct ck_diff_tensor *d, size_t n, struct layer_sum *ls,
		  size_t nl, int json)
{
	static const char *const heads[] = { "IDENT", "CHANGED", "ONLY_A", "ONLY_B", "RETYPED" };
	char ta[200], tb[200], x[64], y[64];

	if (json) {
		struct jw w = { .b = CK_BUF_INIT };

		jw_begin_obj(&w);
		jw_key(&w, "a");
		jw_str(&w, a);
		jw_key(&w, "b");
		jw_str(&w, b);
		jw_key(&w, "layers");
		jw_begin_arr(&w);
		for (size_t i = 0; i < nl; i++) {
			jw_begin_obj(&w);
			jw_key(&w, "layer");
			jw_str(&w, ls[i].name);
			for (int s = 0; s < 5; s++) {
				jw_key(&w, status_names[s]);
				jw_uint(&w, ls[i].count[s]);
			}
			jw_key(&w, "rel_l2");
			jw_double(&w, ls[i].measured ? ck_l2_relative(&ls[i].l2) : NAN);
			jw_key(&w, "max_abs");
			jw_double(&w, ls[i].measured ? ls[i].l2.max_abs : NAN);
			jw_end_obj(&w);
		}
		jw_end_arr(&w);
		jw_key(&w, "tensors");
		jw_begin_arr(&w);
		for (size_t i = 0; i < n; i++) {
			jw_begin_obj(&w);
			jw_key(&w, "name");
			jw_str(&w, d[i].name);
			jw_key(&w, "layer");
			jw_str(&w, d[i].layer);
			jw_key(&w, "status");
			jw_str(&w, status_names[d[i].status]);
			json_tensor_type(&w, "a", d[i].a);
			json_tensor_type(&w, "b", d[i].b);
			jw_key(&w, "rel_l2");
			jw_double(&w, measured(&d[i]) ? ck_l2_relative(&d[i].l2) : NAN);
			jw_key(&w, "max_abs");
			jw_double(&w, measured(&d[i]) ? d[i].l2.max_abs : NAN);
			jw_end_obj(&w);
		}
		jw_end_arr(&w);
		jw_end_obj(&w);
		return jw_finish(&w);
	}
	printf("a: %s\nb: %s\n\n%-24s %7s %7s %7s %7s %7s %12s %12s\n", a, b, "LAYER", heads[0], heads[1], heads[2],
	       heads[3], heads[4], "REL_L2", "MAX_ABS");
	for (size_t i = 0; i < nl; i++) {
		num_text(x, sizeof(x), ls[i].measured, ck_l2_relative(&ls[i].l2));
		num_text(y, sizeof(y), ls[i].measured, ls[i].l2.max_abs);
		printf("%-24s %7zu %7zu %7zu %7zu %7zu %12s %12s\n", ls[i].name, ls[i].count[0], ls[i].count[1],
		       ls[i].count[2], ls[i].count[3], ls[i].count[4], x, y);
	}
	printf("\n%-56s %-9s %12s %12s  %s\n", "TENSOR", "STATUS", "REL_L2", "MAX_ABS", "TYPE (A -> B)");
	for (size_t i = 0; i < n; i++) {
		type_text(ta, sizeof(ta), d[i].a);
		type_text(tb, sizeof(tb), d[i].b);
		num_text(x, sizeof(x), measured(&d[i]), ck_l2_relative(&d[i].l2));
		num_text(y, sizeof(y), measured(&d[i]), d[i].l2.max_abs);
		printf("%-56s %-9s %12s %12s  %s%s%s\n", d[i].name, status_names[d[i].status], x, y, ta,
		       d[i].status == CK_DIFF_RETYPED ? " -> " : "", d[i].status == CK_DIFF_RETYPED ? tb : "");
	}
	return CK_EXIT_OK;
}

static int catalog_of(struct ck_view *v, const char *ref, struct ck_catalog **out)
{
	const struct ck_vnode *n;
	struct ck_vckpt ck;
	const char *slash = strchr(ref, '/');
	int rc;

	if (!slash || slash == ref || !slash[1] || strchr(slash + 1, '/')) {
		cli_error("diff: '%s' is not SERIES/CKPT", ref);
		return CK_EXIT_USAGE;
	}
	rc = ck_view_resolve(v, ref, &n);
	if (!rc)
		rc = ck_view_checkpoint(v, n, &ck);
	if (rc) {
		cli_error("diff: %s: no such checkpoint in the store", ref);
		return CK_EXIT_FAILURE;
	}
	rc = ck_catalog_build(v, n, 0, out);
	if (rc) {
		cli_error("diff: %s: %s", ref, strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	return 0;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ 0, 0, 0, 0 },
	};
	struct diff_args a = { 0, DEFAULT_CHUNK };
	struct ck_error err = { { 0 } };
	struct ck_catalog *ca = NULL, *cb = NULL;
	struct ck_diff_tensor *d = NULL;
	struct layer_sum *ls = NULL;
	struct ck_view *v;
	size_t n = 0, nl = 0;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "jc:", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 3)
		return cli_usage_error(cmd, "expected STORE, A and B (each SERIES/CKPT)");
	rc = ck_view_open(argv[optind], NULL, &v, &err);
	if (rc < 0) {
		cli_error("diff: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	rc = catalog_of(v, argv[optind + 1], &ca);
	if (!rc)
		rc = catalog_of(v, argv[optind + 2], &cb);
	if (!rc) {
		rc = ck_diff_catalogs(v, ca, cb, a.chunk, &d, &n);
		if (rc) {
			cli_error("diff: %s", strerror(-rc));
			rc = CK_EXIT_FAILURE;
		}
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct layer_sum *l = layer_of(&ls, &nl, d[i].layer);

		if (!l) {
			cli_error("diff: out of memory");
			rc = CK_EXIT_FAILURE;
			break;
		}
		l->count[d[i].status]++;
		/* A layer's change is its weights': moments (a step count among
		 * them) change on other scales. */
		if (measured(&d[i]) && (d[i].a ? d[i].a : d[i].b)->role == CK_CAT_WEIGHT) {
			l->measured = 1;
			l->l2.diff2 += d[i].l2.diff2;
			l->l2.prev2 += d[i].l2.prev2;
			l->l2.cur2 += d[i].l2.cur2;
			if (d[i].l2.max_abs > l->l2.max_abs || isnan(d[i].l2.max_abs))
				l->l2.max_abs = d[i].l2.max_abs;
		}
	}
	if (!rc)
		rc = report(argv[optind + 1], argv[optind + 2], d, n, ls, nl, a.json);
	free(ls);
	free(d);
	ck_catalog_free(ca);
	ck_catalog_free(cb);
	ck_view_close(v);
	return rc;
}

const struct cli_cmd cli_cmd_diff = {
	.name = "diff",
	.args = "STORE A B [--json] [--chunk-size N]",
	.summary = "compare two checkpoints tensor by tensor and layer by layer",
	.help = "A and B are SERIES/CKPT, of one series or of two.  Both are read as the mount\n"
		"serves them (partial saves merged), their model weights and optimizer moments\n"
		"matched by name (moments as optimizer.<parameter>.<moment>).  Each tensor is\n"
		"identical (same bytes), changed (then, for floating-point tensors, the relative\n"
		"L2 change ||B - A|| / ||A|| and the largest absolute change), only_a, only_b, or\n"
		"retyped (dtype or shape differs).  Per layer: the counts, and the relative L2 and\n"
		"largest change over its measured weights.  Tensors served by the same bytes are\n"
		"identical without a read; the others are read N bytes at a time from each side.\n"
		"\n"
		"  -j, --json            machine-readable output\n"
		"  -c, --chunk-size N    bytes read at a time from each side (default 1 MiB)\n",
	.run = run,
};
