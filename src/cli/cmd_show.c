/* ckptctl show STORE SERIES/CKPT FILE: the tensors of a file as the mount
 * shows it, with the checkpoint each one comes from (composite provenance). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/view.h"
#include "cli.h"

struct show_args {
	int json;
	struct jw w;
	size_t n;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct show_args *a = ctx;

	if (c == 'j') {
		a->json = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static int on_tensor(void *ctx, const struct ck_vtensor *t)
{
	struct show_args *a = ctx;
	char shape[256];
	int i;

	a->n++;
	if (!a->json) {
		char err[32] = "exact";

		if (t->lossy_bound > 0)
			snprintf(err, sizeof(err), "%.3g", t->lossy_max_abs > 0 ? t->lossy_max_err / t->lossy_max_abs : 0.0);
		cli_format_shape(shape, sizeof(shape), t->ndim, t->shape);
		printf("%-48s %-9s %-18s %-12s %8" PRId64 "  %-9s %s\n", t->name, ck_dtype_name(t->dtype), shape,
		       t->layer ? t->layer : "other", t->src_step, err, t->src_ckpt ? t->src_ckpt : "-");
		return 0;
	}
	jw_begin_obj(&a->w);
	jw_key(&a->w, "name");
	jw_str(&a->w, t->name);
	jw_key(&a->w, "dtype");
	jw_str(&a->w, ck_dtype_name(t->dtype));
	jw_key(&a->w, "shape");
	jw_begin_arr(&a->w);
	for (i = 0; i < t->ndim; i++)
		jw_uint(&a->w, t->shape[i]);
	jw_end_arr(&a->w);
	jw_key(&a->w, "layer");
	jw_str(&a->w, t->layer ? t->layer : "other");
	/* Field names as in struct ck_vtensor. */
	jw_key(&a->w, "src_ckpt");
	jw_str(&a->w, t->src_ckpt ? t->src_ckpt : "");
	jw_key(&a->w, "src_step");
	jw_int(&a->w, t->src_step);
	jw_key(&a->w, "src_path");
	jw_str(&a->w, t->src_path ? t->src_path : "");
	jw_key(&a->w, "src_offset");
	jw_uint(&a->w, t->src_offset);
	jw_key(&a->w, "nbytes");
	jw_uint(&a->w, t->nbytes);
	jw_key(&a->w, "lossy");
	if (t->lossy_bound > 0) {
		jw_begin_obj(&a->w);
		jw_key(&a->w, "bound");
		jw_double(&a->w, t->lossy_bound);
		jw_key(&a->w, "max_abs");
		jw_double(&a->w, t->lossy_max_abs);
		jw_key(&a->w, "max_err");
		jw_double(&a->w, t->lossy_max_err);
		jw_end_obj(&a->w);
	} else {
		jw_null(&a->w);
	}
	jw_end_obj(&a->w);
	return a->w.err ? a->w.err : 0;
}

static char *make_path(const char *ckpt, const char *file)
{
	size_t n = strlen(ckpt) + strlen(file) + 2;
	char *p = malloc(n);

	if (p) {
		while (*file == '/')
			file++;
		snprintf(p, n, "%s%s%s", ckpt, *file ? "/" : "", file);
	}
	return p;
}

/* 0 if the mount can serve the file; else prints why (the reason import
 * recorded for a refused file) and returns -1. */
static int cannot_serve(struct ck_view *v, const struct ck_vnode *node, const char *path)
{
	struct ck_buf why = CK_BUF_INIT;
	struct ck_vfile *f;
	int rc = ck_view_open_file(v, node, &f);

	if (rc == 0) {
		ck_vfile_put(f);
		return 0;
	}
	if (ck_view_getxattr(v, node, "user.ckptfs.error", &why) == 0 && why.len)
		cli_error("show: %s: cannot be served: %.*s", path, (int)why.len, (const char *)why.data);
	else
		cli_error("show: %s: cannot be served: %s", path, strerror(-rc));
	ck_buf_free(&why);
	return -1;
}

static int show(struct ck_view *v, const char *path, struct show_args *a)
{
	const struct ck_vnode *node;
	struct ck_vattr attr;
	int rc;

	rc = ck_view_resolve(v, path, &node);
	if (rc < 0) {
		cli_error("show: %s: %s", path, rc == -ENOENT ? "no such file in the store" : strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	rc = ck_view_getattr(v, node, &attr);
	if (rc == 0 && S_ISDIR(attr.mode)) {
		cli_error("show: %s: is a directory (name a file: ckptctl ls STORE SERIES/CKPT lists them)", path);
		return CK_EXIT_FAILURE;
	}
	if (rc == 0)
		rc = cannot_serve(v, node, path);
	if (rc)
		return CK_EXIT_FAILURE;
	if (a->json) {
		jw_begin_obj(&a->w);
		jw_key(&a->w, "path");
		jw_str(&a->w, path);
		jw_key(&a->w, "tensors");
		jw_begin_arr(&a->w);
	} else {
		printf("%-48s %-9s %-18s %-12s %8s  %-9s %s\n", "TENSOR", "DTYPE", "SHAPE", "LAYER", "STEP", "ERROR",
		       "FROM");
	}
	rc = ck_view_tensors(v, node, on_tensor, a);
	if (rc < 0) {
		jw_free(&a->w);
		cli_error("show: %s: %s", path, strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	if (a->json) {
		jw_end_arr(&a->w);
		jw_end_obj(&a->w);
		return jw_finish(&a->w);
	}
	if (a->n == 0)
		printf("(no tensors)\n");
	return CK_EXIT_OK;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ 0, 0, 0, 0 },
	};
	struct show_args a = { .w = { .b = CK_BUF_INIT } };
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	char *path;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "j", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 3)
		return cli_usage_error(cmd, "expected STORE, SERIES/CKPT and FILE");
	rc = ck_view_open(argv[optind], NULL, &v, &err);
	if (rc < 0) {
		cli_error("show: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	path = make_path(argv[optind + 1], argv[optind + 2]);
	if (!path) {
		ck_view_close(v);
		cli_error("show: out of memory");
		return CK_EXIT_FAILURE;
	}
	rc = show(v, path, &a);
	free(path);
	ck_view_close(v);
	return rc;
}

const struct cli_cmd cli_cmd_show = {
	.name = "show",
	.args = "STORE SERIES/CKPT FILE [--json]",
	.summary = "show the tensors of a file and the step each one comes from",
	.help = "FILE is a path inside the checkpoint (model.pt, global_step10/mp_rank_00_model_states.pt).\n"
		"For each tensor of the file as the mount serves it: name, dtype, shape, layer, and the\n"
		"checkpoint (step) whose bytes it is, which for a partial save is an earlier step.\n"
		"\n"
		"  -j, --json  machine-readable output (adds the physical file, offset and size)\n",
	.run = run,
};
