/* ckptctl verify STORE [SERIES[/CKPT]] [--content | --identity-only] [--json]:
 * is everything the mount would serve still what import indexed, and what
 * depends on what is not?  The checks are in verify_scan.c (identity,
 * content hashes) and verify_deps.c (composites that use damaged bytes);
 * this file walks the scope and prints the report. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "verify.h"

struct verify_args {
	int content, identity_only, json;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct verify_args *a = ctx;

	(void)arg;
	switch (c) {
	case 'c': a->content = 1; return 0;
	case 'i': a->identity_only = 1; return 0;
	case 'j': a->json = 1; return 0;
	}
	return CK_EXIT_USAGE;
}

/* The checkpoints in scope, one list per series: c[i][0..n[i]) of the
 * allocated c[i][0..all[i]). */
struct scope {
	struct ck_ckpt_info **c;
	size_t *n, *all, nseries;
};

static void scope_free(struct scope *s)
{
	for (size_t i = 0; i < s->nseries; i++)
		ck_ckpt_info_free(s->c[i], s->all[i]);
	free(s->c);
	free(s->n);
	free(s->all);
}

static int scope_add(struct scope *s, struct ck_ckpt_info *c, size_t n, size_t all)
{
	struct ck_ckpt_info **vc = realloc(s->c, (s->nseries + 1) * sizeof(*vc));
	size_t *vn = NULL, *va = NULL;

	if (vc) {
		s->c = vc;
		vn = realloc(s->n, (s->nseries + 1) * sizeof(*vn));
	}
	if (vn) {
		s->n = vn;
		va = realloc(s->all, (s->nseries + 1) * sizeof(*va));
	}
	if (!va) {
		ck_ckpt_info_free(c, all);
		return -ENOMEM;
	}
	s->all = va;
	s->c[s->nseries] = c;
	s->n[s->nseries] = n;
	s->all[s->nseries++] = all;
	return 0;
}

/* A series, or one checkpoint with the earlier ones of its series: its
 * composites may serve bytes of any of them. */
static int scope_series(struct ck_store *st, const char *series, const char *ckpt, struct scope *s)
{
	struct ck_ckpt_info *c;
	size_t n, upto;
	int rc;

	rc = ck_store_list_checkpoints(st, series, &c, &n);
	if (rc < 0) {
		cli_error("verify: %s: %s", series, strerror(-rc));
		return rc;
	}
	for (upto = 0; ckpt && upto < n && strcmp(c[upto].name, ckpt) != 0; upto++)
		;
	if (ckpt ? upto == n : n == 0) {
		ck_ckpt_info_free(c, n);
		cli_error("verify: no %s '%s%s%s'", ckpt ? "checkpoint" : "series", series, ckpt ? "/" : "",
			  ckpt ? ckpt : "");
		return -ENOENT;
	}
	return scope_add(s, c, ckpt ? upto + 1 : n, n);
}

static int scope_open(struct ck_store *st, const char *series, const char *ckpt, struct scope *s)
{
	char **names;
	size_t n;
	int rc;

	if (series)
		return scope_series(st, series, ckpt, s);
	rc = ck_store_list_series(st, &names, &n);
	if (rc < 0) {
		cli_error("verify: cannot list series: %s", strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = scope_series(st, names[i], NULL, s);
	ck_strv_free(names, n);
	return rc;
}

/* Pass 1 with the store open: damage, then the composites to examine. */
static int scan(struct ck_store *st, const struct scope *s, struct vfy_report *r)
{
	int rc = 0;

	for (size_t i = 0; i < s->nseries && rc == 0 && r->progress; i++)
		rc = verify_count(st, s->c[i], s->n[i], r);
	for (size_t i = 0; i < s->nseries && rc == 0; i++)
		rc = verify_scan(st, s->c[i], s->n[i], r);
	if (r->progress) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	if (rc == 0)
		rc = verify_targets(st, r);
	if (rc < 0)
		cli_error("verify: %s", strerror(-rc));
	return rc;
}

/* ---- text ---- */

static void print_damage(const struct vfy_damage *d)
{
	char *where = vfy_path(d->series, d->ckpt, d->relpath);
	const char *w = where ? where : d->src_path;

	if (!d->storage) {
		printf("%-8s %s: %s\n", d->reason == VFY_MISSING ? "MISSING" : d->reason == VFY_CHANGED ? "CHANGED" :
		       "UNREAD", w, d->detail ? d->detail : vfy_reason_name(d->reason));
		free(where);
		return;
	}
	printf("DAMAGED  %s: %s: bytes %" PRIu64 "..%" PRIu64 " of %s (storage \"%s\"%s%s)\n", w,
	       vfy_reason_name(d->reason), d->offset, d->offset + d->length, d->src_path, d->storage,
	       d->detail ? ": " : "", d->detail ? d->detail : "");
	for (size_t i = 0; i < d->ntensors; i++)
		printf("           tensor %s\n", d->tensors[i]);
	free(where);
}

static void print_dependent(const struct vfy_report *r, const struct vfy_dependent *dp)
{
	char *where = vfy_path(dp->series, dp->ckpt, dp->relpath);

	if (dp->unservable)
		printf("AFFECTED %s: cannot be served (%s); it needs:\n", where ? where : dp->relpath, dp->why);
	else
		printf("AFFECTED %s: serves %zu tensor%s from damaged bytes:\n", where ? where : dp->relpath,
		       dp->ntensors, dp->ntensors == 1 ? "" : "s");
	free(where);
	for (size_t i = 0; i < dp->ntensors; i++) {
		const struct vfy_damage *d = &r->dmg[dp->tensors[i].damage];

		where = vfy_path(d->series, d->ckpt, d->relpath);
		printf("           tensor %s from %s\n", dp->tensors[i].name, where ? where : d->src_path);
		free(where);
	}
	for (size_t i = 0; dp->unservable && i < dp->nsources; i++) {
		const struct vfy_damage *d = &r->dmg[dp->sources[i]];

		where = vfy_path(d->series, d->ckpt, d->relpath);
		printf("           %s (%s)\n", where ? where : d->src_path, vfy_reason_name(d->reason));
		free(where);
	}
}

static void print_text(const struct vfy_report *r)
{
	for (size_t i = 0; i < r->nbad; i++) {
		const struct vfy_bad *b = &r->bad[i];
		char *where = vfy_path(b->series, b->ckpt, b->relpath);

		printf("BAD      %s: refused at import, never served: %s\n", where ? where : b->src_path, b->error);
		free(where);
	}
	for (size_t i = 0; i < r->ndmg; i++)
		print_damage(&r->dmg[i]);
	for (size_t i = 0; i < r->ndeps; i++)
		print_dependent(r, &r->deps[i]);
	printf("%zu file%s checked (%s): %zu intact, %zu damaged", r->files, r->files == 1 ? "" : "s",
	       r->content ? "identity and content" : "identity only", r->files_ok, r->files - r->files_ok);
	if (r->content)
		printf(", %.1f MiB hashed", (double)r->bytes_hashed / (1 << 20));
	if (r->nbad)
		printf("; %zu refused at import", r->nbad);
	if (r->ndeps)
		printf("; %zu checkpoint file%s affected", r->ndeps, r->ndeps == 1 ? "" : "s");
	printf("\n");
}

/* ---- JSON ---- */

static void json_where(struct jw *w, const char *series, const char *ckpt, const char *relpath)
{
	char *c = vfy_path(series, ckpt, "");

	jw_key(w, "checkpoint");
	if (c)
		jw_str(w, c);
	else
		w->err = -ENOMEM;
	free(c);
	jw_key(w, "file");
	jw_str(w, relpath);
}

static void json_damage(struct jw *w, const struct vfy_damage *d)
{
	jw_begin_obj(w);
	json_where(w, d->series, d->ckpt, d->relpath);
	jw_key(w, "step");
	jw_int(w, d->step);
	jw_key(w, "physical");
	jw_str(w, d->src_path);
	jw_key(w, "reason");
	jw_str(w, vfy_reason_name(d->reason));
	jw_key(w, "detail");
	if (d->detail)
		jw_str(w, d->detail);
	else
		jw_null(w);
	jw_key(w, "whole_file");
	jw_bool(w, !d->storage);
	jw_key(w, "storage");
	if (d->storage)
		jw_str(w, d->storage);
	else
		jw_null(w);
	jw_key(w, "offset");
	jw_uint(w, d->offset);
	jw_key(w, "length");
	jw_uint(w, d->length);
	jw_key(w, "tensors");
	jw_begin_arr(w);
	for (size_t i = 0; i < d->ntensors; i++)
		jw_str(w, d->tensors[i]);
	jw_end_arr(w);
	jw_key(w, "file_tensors");
	jw_uint(w, d->file_tensors);
	jw_end_obj(w);
}

static void json_dependent(struct jw *w, const struct vfy_report *r, const struct vfy_dependent *dp)
{
	jw_begin_obj(w);
	json_where(w, dp->series, dp->ckpt, dp->relpath);
	jw_key(w, "unservable");
	jw_bool(w, dp->unservable);
	jw_key(w, "error");
	if (dp->why)
		jw_str(w, dp->why);
	else
		jw_null(w);
	jw_key(w, "tensors");
	jw_begin_arr(w);
	for (size_t i = 0; i < dp->ntensors; i++) {
		const struct vfy_damage *d = &r->dmg[dp->tensors[i].damage];

		jw_begin_obj(w);
		jw_key(w, "name");
		jw_str(w, dp->tensors[i].name);
		jw_key(w, "damaged");
		jw_uint(w, dp->tensors[i].damage);
		jw_key(w, "from");
		jw_begin_obj(w);
		json_where(w, d->series, d->ckpt, d->relpath);
		jw_end_obj(w);
		jw_end_obj(w);
	}
	jw_end_arr(w);
	/* Indices into "damaged". */
	jw_key(w, "damaged");
	jw_begin_arr(w);
	for (size_t i = 0; i < dp->nsources; i++)
		jw_uint(w, dp->sources[i]);
	jw_end_arr(w);
	jw_end_obj(w);
}

static int print_json(const struct vfy_report *r)
{
	struct jw w = { .b = CK_BUF_INIT };

	jw_begin_obj(&w);
	jw_key(&w, "mode");
	jw_str(&w, r->content ? "content" : "identity");
	jw_key(&w, "files");
	jw_uint(&w, r->files);
	jw_key(&w, "intact");
	jw_uint(&w, r->files_ok);
	jw_key(&w, "bytes_hashed");
	jw_uint(&w, r->bytes_hashed);
	jw_key(&w, "damaged");
	jw_begin_arr(&w);
	for (size_t i = 0; i < r->ndmg; i++)
		json_damage(&w, &r->dmg[i]);
	jw_end_arr(&w);
	jw_key(&w, "dependents");
	jw_begin_arr(&w);
	for (size_t i = 0; i < r->ndeps; i++)
		json_dependent(&w, r, &r->deps[i]);
	jw_end_arr(&w);
	jw_key(&w, "bad");
	jw_begin_arr(&w);
	for (size_t i = 0; i < r->nbad; i++) {
		jw_begin_obj(&w);
		json_where(&w, r->bad[i].series, r->bad[i].ckpt, r->bad[i].relpath);
		jw_key(&w, "physical");
		jw_str(&w, r->bad[i].src_path);
		jw_key(&w, "error");
		jw_str(&w, r->bad[i].error);
		jw_end_obj(&w);
	}
	jw_end_arr(&w);
	jw_end_obj(&w);
	return jw_finish(&w);
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "content", no_argument, NULL, 'c' },
		{ "identity-only", no_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ 0, 0, 0, 0 },
	};
	struct verify_args a = { 0 };
	struct vfy_report r = { 0 };
	struct ck_error err = { { 0 } };
	struct scope s = { 0 };
	struct ck_store *st;
	char *series, *ckpt;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "cij", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (a.content && a.identity_only)
		return cli_usage_error(cmd, "--content and --identity-only exclude each other");
	rc = cli_open_target(cmd, argc, argv, &st, &series, &ckpt);
	if (rc >= 0)
		return rc;
	r.content = !a.identity_only;
	r.progress = r.content && isatty(STDERR_FILENO);
	rc = scope_open(st, series, ckpt, &s);
	if (rc == 0)
		rc = scan(st, &s, &r);
	scope_free(&s);
	ck_store_close(st);
	if (rc == 0) {
		rc = verify_deps(argv[optind], &r, &err);
		if (rc < 0)
			cli_error("verify: cannot find what depends on the damage: %s",
				  ck_error_text(&err, rc));
	}
	if (rc == 0)
		rc = a.json ? print_json(&r) : (print_text(&r), CK_EXIT_OK);
	else
		rc = CK_EXIT_FAILURE;
	if (rc == CK_EXIT_OK && r.ndmg)
		rc = CK_EXIT_DAMAGED;
	vfy_report_free(&r);
	return rc;
}

const struct cli_cmd cli_cmd_verify = {
	.name = "verify",
	.args = "STORE [SERIES[/CKPT]] [--content | --identity-only] [--json]",
	.summary = "check that what the mount serves is what was imported, and what depends on damage",
	.help = "Checks every file of the store (or of one series or checkpoint) against the index:\n"
		"its identity (device, inode, size, modification time) and, by default, the\n"
		"XXH3-128 of every tensor byte range, re-read in full.  Prints a line per problem\n"
		"(MISSING, CHANGED, UNREAD for whole files; DAMAGED for a byte range, with the\n"
		"tensors stored there; BAD for files refused at import), then an AFFECTED line for\n"
		"each checkpoint file of the series whose composite serves damaged bytes or cannot\n"
		"be served because of them: partial checkpoints take tensors from older ones.\n"
		"Exit status 0: nothing damaged; 3: damage found; 1: the check itself failed.\n"
		"\n"
		"  -c, --content        re-hash every tensor byte range (the default)\n"
		"  -i, --identity-only  only re-stat the files (fast; misses in-place bit flips)\n"
		"  -j, --json           machine-readable report\n",
	.run = run,
};
