/* ckptctl ls STORE [SERIES[/CKPT]]: series, checkpoints of a series, or
 * files of a checkpoint. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/lossy.h"
#include "cli.h"
#include "completeness.h"

struct ls_args {
	int json;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct ls_args *a = ctx;

	if (c == 'j') {
		a->json = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static int fail(const char *what, int rc)
{
	cli_error("ls: %s: %s", what, strerror(-rc));
	return CK_EXIT_FAILURE;
}

static const char *status_of(const struct ck_ckpt_info *c, const struct cli_ckpt_summary *s)
{
	return c->deleted ? "deleted" : s->complete ? "complete" : "partial";
}

static int ls_series(struct ck_store *st, const struct ls_args *a)
{
	struct jw w = { .b = CK_BUF_INIT };
	char **names;
	size_t n, i;
	int rc;

	rc = ck_store_list_series(st, &names, &n);
	if (rc < 0)
		return fail("cannot list series", rc);
	if (a->json) {
		jw_begin_obj(&w);
		jw_key(&w, "series");
		jw_begin_arr(&w);
	} else {
		printf("%-24s %11s %12s %12s\n", "SERIES", "CHECKPOINTS", "FIRST STEP", "LAST STEP");
	}
	for (i = 0; i < n; i++) {
		struct ck_ckpt_info *c;
		size_t nc;

		rc = ck_store_list_checkpoints(st, names[i], &c, &nc);
		if (rc < 0)
			break;
		nc = cli_live_first(c, nc);
		if (a->json) {
			jw_begin_obj(&w);
			jw_key(&w, "name");
			jw_str(&w, names[i]);
			jw_key(&w, "checkpoints");
			jw_uint(&w, nc);
			jw_key(&w, "first_step");
			if (nc)
				jw_int(&w, c[0].step);
			else
				jw_null(&w);
			jw_key(&w, "last_step");
			if (nc)
				jw_int(&w, c[nc - 1].step);
			else
				jw_null(&w);
			jw_end_obj(&w);
		} else if (nc) {
			printf("%-24s %11zu %12" PRId64 " %12" PRId64 "\n", names[i], nc, c[0].step, c[nc - 1].step);
		} else {
			printf("%-24s %11zu %12s %12s\n", names[i], nc, "-", "-");
		}
		ck_ckpt_info_free(c, nc);
	}
	ck_strv_free(names, n);
	if (rc < 0) {
		jw_free(&w);
		return fail("cannot list checkpoints", rc);
	}
	if (a->json) {
		jw_end_arr(&w);
		jw_end_obj(&w);
		return jw_finish(&w);
	}
	return CK_EXIT_OK;
}

/* How many files of checkpoint id are coded lossily, and the largest bound. */
static size_t ckpt_lossy(struct ck_store *st, uint64_t id, double *bound)
{
	struct ck_file_info *f;
	size_t n, lossy = 0;

	*bound = 0;
	if (ck_store_list_files(st, id, &f, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct ck_file_pack_info pi;

		if (ck_store_file_pack_info(st, f[i].id, &pi) == 0 && pi.lossy) {
			lossy++;
			if (pi.lossy_bound > *bound)
				*bound = pi.lossy_bound;
		}
	}
	ck_file_info_free(f, n);
	return lossy;
}

static int ls_checkpoints(struct ck_store *st, const char *series, const struct ls_args *a)
{
	struct jw w = { .b = CK_BUF_INIT };
	struct cli_completeness *cmp = NULL;
	struct ck_ckpt_info *c;
	size_t n, i;
	int rc;

	rc = ck_store_list_checkpoints(st, series, &c, &n);
	if (rc < 0)
		return fail(series, rc);
	if (n == 0) {
		ck_ckpt_info_free(c, n);
		cli_error("ls: no series '%s' in %s", series, ck_store_path(st));
		return CK_EXIT_FAILURE;
	}
	rc = cli_completeness_new(&cmp);
	if (a->json) {
		jw_begin_obj(&w);
		jw_key(&w, "series");
		jw_str(&w, series);
		jw_key(&w, "checkpoints");
		jw_begin_arr(&w);
	} else {
		printf("%12s  %-32s %-8s %5s %4s %8s  %s\n", "STEP", "NAME", "STATUS", "FILES", "BAD", "TENSORS", "LOSSY");
	}
	for (i = 0; i < n && rc == 0; i++) {
		struct cli_ckpt_summary s;
		double bound;
		size_t lossy = ckpt_lossy(st, c[i].id, &bound);

		rc = cli_completeness_add(cmp, st, &c[i], &s);
		if (rc < 0)
			break;
		if (a->json) {
			jw_begin_obj(&w);
			jw_key(&w, "name");
			jw_str(&w, c[i].name);
			jw_key(&w, "step");
			jw_int(&w, c[i].step);
			jw_key(&w, "status");
			jw_str(&w, status_of(&c[i], &s));
			jw_key(&w, "files");
			jw_uint(&w, s.files);
			jw_key(&w, "bad");
			jw_uint(&w, s.bad);
			jw_key(&w, "tensors");
			jw_uint(&w, s.tensors);
			jw_key(&w, "is_file");
			jw_bool(&w, c[i].is_file);
			jw_key(&w, "source");
			jw_str(&w, c[i].src_path);
			jw_key(&w, "lossy");
			if (lossy) {
				jw_begin_obj(&w);
				jw_key(&w, "files");
				jw_uint(&w, lossy);
				jw_key(&w, "bound");
				jw_double(&w, bound);
				jw_end_obj(&w);
			} else {
				jw_null(&w);
			}
			jw_end_obj(&w);
		} else {
			char col[32] = "-";

			if (lossy)
				snprintf(col, sizeof(col), "%g", bound);
			printf("%12" PRId64 "  %-32s %-8s %5zu %4zu %8zu  %s\n", c[i].step, c[i].name,
			       status_of(&c[i], &s), s.files, s.bad, s.tensors, col);
		}
	}
	cli_completeness_free(cmp);
	ck_ckpt_info_free(c, n);
	if (rc < 0) {
		jw_free(&w);
		return fail(series, rc);
	}
	if (a->json) {
		jw_end_arr(&w);
		jw_end_obj(&w);
		return jw_finish(&w);
	}
	return CK_EXIT_OK;
}

static void print_file(struct ck_store *st, const struct ck_file_info *f)
{
	struct ck_file_pack_info pi;

	printf("%-17s %14" PRIu64 " %8" PRIu32 "  %s", ck_file_kind_name(f->kind), f->size, f->ntensors,
	       *f->relpath ? f->relpath : "(the checkpoint file)");
	if (f->kind == CK_FILE_BAD && f->error)
		printf("  [refused: %s]", f->error);
	if (ck_store_file_pack_info(st, f->id, &pi) == 0 && pi.lossy)
		printf("  [lossy: %u tensors within %g x max|x|]", pi.lossy_storages, pi.lossy_bound);
	putchar('\n');
}

static void json_file(struct ck_store *st, struct jw *w, const struct ck_file_info *f)
{
	struct ck_file_pack_info pi;

	jw_begin_obj(w);
	jw_key(w, "path");
	jw_str(w, f->relpath);
	jw_key(w, "kind");
	jw_str(w, ck_file_kind_name(f->kind));
	jw_key(w, "size");
	jw_uint(w, f->size);
	jw_key(w, "tensors");
	jw_uint(w, f->ntensors);
	jw_key(w, "source");
	jw_str(w, f->src_path);
	if (f->kind == CK_FILE_BAD) {
		jw_key(w, "error");
		jw_str(w, f->error ? f->error : "");
	}
	if (ck_store_file_pack_info(st, f->id, &pi) == 0 && pi.lossy) {
		jw_key(w, "lossy");
		jw_begin_obj(w);
		jw_key(w, "method");
		jw_str(w, ck_lossy_method_name(pi.lossy_method));
		jw_key(w, "bound");
		jw_double(w, pi.lossy_bound);
		jw_key(w, "tensors");
		jw_uint(w, pi.lossy_storages);
		jw_key(w, "max_rel_error");
		jw_double(w, pi.lossy_max_rel);
		jw_end_obj(w);
	}
	jw_end_obj(w);
}

static int ls_files(struct ck_store *st, const char *series, const char *name, const struct ls_args *a)
{
	struct jw w = { .b = CK_BUF_INIT };
	struct ck_file_info *f;
	struct ck_ckpt_info *c;
	size_t n, i;
	int rc;

	rc = ck_store_find_checkpoint(st, series, name, &c);
	if (rc == -ENOENT) {
		cli_error("ls: no checkpoint '%s/%s' in %s", series, name, ck_store_path(st));
		return CK_EXIT_FAILURE;
	}
	if (rc < 0)
		return fail(name, rc);
	rc = ck_store_list_files(st, c->id, &f, &n);
	if (rc < 0) {
		ck_ckpt_info_free(c, 1);
		return fail(name, rc);
	}
	if (a->json) {
		jw_begin_obj(&w);
		jw_key(&w, "series");
		jw_str(&w, series);
		jw_key(&w, "checkpoint");
		jw_str(&w, c->name);
		jw_key(&w, "step");
		jw_int(&w, c->step);
		jw_key(&w, "source");
		jw_str(&w, c->src_path);
		jw_key(&w, "files");
		jw_begin_arr(&w);
		for (i = 0; i < n; i++)
			json_file(st, &w, &f[i]);
		jw_end_arr(&w);
		jw_end_obj(&w);
	} else {
		printf("%-17s %14s %8s  %s\n", "KIND", "SIZE", "TENSORS", "PATH");
		for (i = 0; i < n; i++)
			print_file(st, &f[i]);
	}
	ck_file_info_free(f, n);
	ck_ckpt_info_free(c, 1);
	return a->json ? jw_finish(&w) : CK_EXIT_OK;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ 0, 0, 0, 0 },
	};
	struct ls_args a = { 0 };
	struct ck_store *st;
	char *series, *ckpt;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "j", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	rc = cli_open_target(cmd, argc, argv, &st, &series, &ckpt);
	if (rc >= 0)
		return rc;
	if (!series)
		rc = ls_series(st, &a);
	else if (!ckpt)
		rc = ls_checkpoints(st, series, &a);
	else
		rc = ls_files(st, series, ckpt, &a);
	ck_store_close(st);
	return rc;
}

const struct cli_cmd cli_cmd_ls = {
	.name = "ls",
	.args = "STORE [SERIES[/CKPT]] [--json]",
	.summary = "list series, the checkpoints of a series, or the files of a checkpoint",
	.help = "Without SERIES: every series with its number of checkpoints and step range.\n"
		"With SERIES: its checkpoints in step order; a checkpoint is 'partial' when it lacks\n"
		"a file or tensor that an earlier checkpoint of the series has (a partial save the\n"
		"mount completes from earlier steps), and BAD counts its refused files.\n"
		"With SERIES/CKPT: its files with kind, size and number of tensors.\n"
		"\n"
		"  -j, --json  machine-readable output\n",
	.run = run,
};
