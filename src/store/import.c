/* Importing checkpoints in place.
 *
 * What a directory is, by the step numbers in names (series.c):
 *   - its own name has a step: one checkpoint of series basename(parent);
 *   - else, if some entries have a step: a run dir whose step-named entries
 *     (dirs or files) are its checkpoints; the other entries are skipped;
 *   - else: a single checkpoint (step 0) of a series named after it.
 * Checkpoint dirs are walked recursively (DeepSpeed global_stepN/ inside
 * checkpoint-N/).  Each checkpoint is parsed and hashed outside any index
 * transaction, then committed in one (commit.c).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/str.h"
#include "commit.h"
#include "index.h"
#include "staging.h"
#include "ckptfs/ingest.h"

#define MAX_DIR_DEPTH 32
#define MAX_SERIES_NAME 255

struct plan_entry {
	char *name;
	char *path;
	int64_t step;
	int is_file;
};

struct plan {
	char *series;
	struct plan_entry *v;
	size_t n, cap;
	char **skipped;          /* run-dir entries without a step, reported once the plan is final */
	size_t nskipped, capskipped;
};

struct import_ctx {
	struct ck_store *st;
	ck_import_report_fn report;
	void *rctx;
	struct ck_error *err;
	int committed;   /* from STORE/data: listed and kept as a commit keeps it (recovery) */
};

static void report(const struct import_ctx *ic, const char *path, int status, const char *msg)
{
	if (ic->report)
		ic->report(ic->rctx, path, status, msg);
}

static int push_str(char ***v, size_t *n, size_t *cap, char *s)
{
	if (!s)
		return -ENOMEM;
	if (*n == *cap) {
		char **nv = ck_grow(*v, cap, sizeof(*nv), 16);

		if (!nv) {
			free(s);
			return -ENOMEM;
		}
		*v = nv;
	}
	(*v)[(*n)++] = s;
	return 0;
}

static void plan_free(struct plan *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->v[i].name);
		free(p->v[i].path);
	}
	free(p->v);
	ck_strv_free(p->skipped, p->nskipped);
	free(p->series);
	memset(p, 0, sizeof(*p));
}

static int plan_add(struct plan *p, const char *name, const char *path, int64_t step, int is_file)
{
	struct plan_entry *e;

	if (p->n == p->cap) {
		e = ck_grow(p->v, &p->cap, sizeof(*e), 16);
		if (!e)
			return -ENOMEM;
		p->v = e;
	}
	e = &p->v[p->n];
	e->name = strdup(name);
	e->path = strdup(path);
	e->step = step;
	e->is_file = is_file;
	if (!e->name || !e->path) {
		free(e->name);
		free(e->path);
		return -ENOMEM;
	}
	p->n++;
	return 0;
}

static int cmp_plan(const void *a, const void *b)
{
	const struct plan_entry *x = a, *y = b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int check_series_name(const char *s, struct ck_error *err)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, "..") || strchr(s, '/') || strlen(s) > MAX_SERIES_NAME)
		return ck_fail(err, EINVAL, "'%s' cannot name a series (use --series NAME)", s);
	return 0;
}

static int checkpoint_file_name(const char *name)
{
	return ck_ends_with(name, ".pt") || ck_ends_with(name, ".pth") || ck_ends_with(name, ".bin") ||
	       ck_ends_with(name, ".ckpt") || ck_ends_with(name, ".safetensors");
}

static void plan_drop_entries(struct plan *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->v[i].name);
		free(p->v[i].path);
	}
	p->n = 0;
}

/* The entries of a run dir that have a step in their name.
 *
 * Step-named files alone make a run dir only when every checkpoint file
 * (*.pt, *.pth, *.bin, *.ckpt, *.safetensors) in it is step-named: a dir
 * of model_000100.pt, model_000200.pt... is a run, while a checkpoint dir
 * holding model.pt and, say, shard_3.pt is one checkpoint.  Leaves the
 * plan empty when dir is not a run dir. */
static int plan_run_dir(struct plan *p, const char *dir, const char *pattern, struct ck_error *err)
{
	size_t step_dirs = 0, loose_files = 0;
	struct dirent *de;
	DIR *d = opendir(dir);
	int rc = 0;

	if (!d)
		return ck_fail(err, errno, "%s: %s", dir, strerror(errno));
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct stat sb;
		int64_t step;
		char *path;
		int found, is_dir, is_file;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path = ck_path_join(dir, de->d_name);
		if (!path) {
			rc = -ENOMEM;
			break;
		}
		found = stat(path, &sb) == 0;
		is_dir = found && S_ISDIR(sb.st_mode);
		is_file = found && S_ISREG(sb.st_mode);
		if ((is_dir || is_file) && ck_series_step(de->d_name, pattern, &step) == 0) {
			step_dirs += is_dir;
			rc = plan_add(p, de->d_name, path, step, is_file);
			free(path);
		} else {
			if (is_file && checkpoint_file_name(de->d_name))
				loose_files++;
			rc = push_str(&p->skipped, &p->nskipped, &p->capskipped, path);
		}
	}
	closedir(d);
	if (rc < 0)
		return ck_fail(err, -rc, "out of memory");
	if (!step_dirs && loose_files)
		plan_drop_entries(p);
	return 0;
}

static int plan_build(const char *src, const char *series_opt, const char *pattern,
		      struct plan *p, struct ck_error *err)
{
	char *copy1 = strdup(src), *copy2 = strdup(src);
	const char *base, *parent;
	struct stat sb;
	int64_t step;
	int rc;

	memset(p, 0, sizeof(*p));
	if (!copy1 || !copy2) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	base = basename(copy1);
	parent = basename(dirname(copy2));
	if (stat(src, &sb) < 0) {
		rc = ck_fail(err, errno, "%s: %s", src, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) {
		rc = ck_fail(err, EINVAL, "%s: neither a directory nor a regular file", src);
		goto out;
	}
	if (ck_series_step(base, pattern, &step) == 0) {
		p->series = strdup(series_opt ? series_opt : parent);
		rc = plan_add(p, base, src, step, S_ISREG(sb.st_mode));
	} else {
		rc = S_ISDIR(sb.st_mode) ? plan_run_dir(p, src, pattern, err) : 0;
		if (rc == 0 && p->n == 0) {
			/* Not a run dir after all: one checkpoint, step 0. */
			ck_strv_free(p->skipped, p->nskipped);
			p->skipped = NULL;
			p->nskipped = p->capskipped = 0;
			rc = plan_add(p, base, src, 0, S_ISREG(sb.st_mode));
		}
		if (rc == 0)
			p->series = strdup(series_opt ? series_opt : base);
	}
	if (rc == 0 && !p->series)
		rc = -ENOMEM;
	if (rc == -ENOMEM)
		ck_fail(err, ENOMEM, "out of memory");
	if (rc == 0)
		rc = check_series_name(p->series, err);
	if (rc == 0) {
		if (p->n > 1)
			qsort(p->v, p->n, sizeof(*p->v), cmp_plan);
		if (p->nskipped > 1)
			qsort(p->skipped, p->nskipped, sizeof(*p->skipped), ck_strp_cmp);
	}
out:
	free(copy1);
	free(copy2);
	if (rc < 0)
		plan_free(p);
	return rc;
}

/* ---- the files of one checkpoint ---- */

struct flist {
	char **rel;
	size_t n, cap;
};

static int collect(const struct import_ctx *ic, const char *root, const char *rel, int depth, struct flist *fl)
{
	char *dirpath = ck_path_join(root, rel);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!dirpath)
		return -ENOMEM;
	d = opendir(dirpath);
	if (!d) {
		rc = ck_fail(ic->err, errno, "%s: %s", dirpath, strerror(errno));
		free(dirpath);
		return rc;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct stat lsb, sb;
		char *child, *full;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		child = ck_path_join(rel, de->d_name);
		full = ck_path_join(dirpath, de->d_name);
		if (!child || !full) {
			free(child);
			free(full);
			rc = ck_fail(ic->err, ENOMEM, "out of memory");
			break;
		}
		if (lstat(full, &lsb) < 0 || stat(full, &sb) < 0) {
			report(ic, full, CK_IMPORT_SKIPPED, "cannot stat it (dangling symlink?)");
		} else if (S_ISDIR(sb.st_mode) && S_ISLNK(lsb.st_mode)) {
			report(ic, full, CK_IMPORT_SKIPPED, "symlinked directory not followed");
		} else if (S_ISDIR(sb.st_mode)) {
			if (depth >= MAX_DIR_DEPTH)
				rc = ck_fail(ic->err, ELOOP, "%s: directories nested deeper than %d", full,
					     MAX_DIR_DEPTH);
			else
				rc = collect(ic, root, child, depth + 1, fl);
		} else if (S_ISREG(sb.st_mode)) {
			rc = push_str(&fl->rel, &fl->n, &fl->cap, child);
			child = NULL;
			if (rc < 0)
				ck_fail(ic->err, ENOMEM, "out of memory");
		} else {
			report(ic, full, CK_IMPORT_SKIPPED, "not a regular file");
		}
		free(child);
		free(full);
	}
	closedir(d);
	free(dirpath);
	return rc;
}

/* What the index holds for this checkpoint now, to reuse hashes of unchanged files. */
struct previous {
	struct ck_file_info *files;
	size_t n;
	struct ck_storage_info **st;
	size_t *nst;
	struct ck_ingest_prev *prev;
};

static void previous_free(struct previous *pv)
{
	size_t i;

	for (i = 0; pv->st && i < pv->n; i++)
		ck_storage_info_free(pv->st[i], pv->nst[i]);
	free(pv->st);
	free(pv->nst);
	free(pv->prev);
	ck_file_info_free(pv->files, pv->n);
	memset(pv, 0, sizeof(*pv));
}

static int previous_load(struct ck_store *st, const char *series, const char *name, struct previous *pv)
{
	struct ck_ckpt_info *c;
	size_t i;
	int rc;

	memset(pv, 0, sizeof(*pv));
	rc = ck_store_find_checkpoint(st, series, name, &c);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	rc = ck_store_list_files(st, c->id, &pv->files, &pv->n);
	ck_ckpt_info_free(c, 1);
	if (rc < 0)
		return rc;
	pv->st = calloc(pv->n + 1, sizeof(*pv->st));
	pv->nst = calloc(pv->n + 1, sizeof(*pv->nst));
	pv->prev = calloc(pv->n + 1, sizeof(*pv->prev));
	if (!pv->st || !pv->nst || !pv->prev)
		rc = -ENOMEM;
	for (i = 0; i < pv->n && rc == 0; i++) {
		rc = ck_store_list_storages(st, pv->files[i].id, &pv->st[i], &pv->nst[i]);
		pv->prev[i].file = &pv->files[i];
		pv->prev[i].st = pv->st[i];
		pv->prev[i].nst = pv->nst[i];
	}
	if (rc < 0)
		previous_free(pv);
	return rc;
}

static const struct ck_ingest_prev *previous_find(const struct previous *pv, const char *relpath)
{
	size_t i;

	for (i = 0; i < pv->n; i++) {
		if (strcmp(pv->files[i].relpath, relpath) == 0)
			return &pv->prev[i];
	}
	return NULL;
}

/* Whether abs lies in STORE/data: a checkpoint committed into the store. */
static int in_data_area(const struct ck_store *st, const char *abs)
{
	char *area = ck_path_join(st->path, CK_STORE_DATA_DIR), *real = area ? realpath(area, NULL) : NULL;
	size_t n = real ? strlen(real) : 0;
	int inside = real && strncmp(abs, real, n) == 0 && abs[n] == '/';

	free(area);
	free(real);
	return inside;
}

static int import_checkpoint(const struct import_ctx *ic, const char *series, const char *pattern,
			     const struct plan_entry *e)
{
	struct ck_ckpt_info ck = { .series = (char *)series, .name = e->name, .step = e->step,
				   .is_file = e->is_file, .src_path = e->path };
	struct flist fl = { 0 };
	struct previous pv;
	struct ck_ingest *files = NULL;
	size_t i, n = 0;
	int rc;

	if (e->is_file) {
		rc = push_str(&fl.rel, &fl.n, &fl.cap, strdup(""));
	} else if (ic->committed) {
		struct ck_buf ignored = CK_BUF_INIT;   /* validated by its commit */

		rc = ck_tree_list(e->path, &fl.rel, &fl.n, &ignored, ic->err);
		ck_buf_free(&ignored);
	} else {
		rc = collect(ic, e->path, "", 0, &fl);
	}
	if (rc < 0)
		goto out_list;
	if (fl.n > 1)
		qsort(fl.rel, fl.n, sizeof(*fl.rel), ck_strp_cmp);
	rc = previous_load(ic->st, series, e->name, &pv);
	if (rc < 0) {
		ck_fail(ic->err, -rc, "%s: cannot read the index: %s", ck_store_path(ic->st), strerror(-rc));
		goto out_list;
	}
	files = calloc(fl.n + 1, sizeof(*files));
	if (!files) {
		rc = ck_fail(ic->err, ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < fl.n; i++) {
		char *path = e->is_file ? strdup(e->path) : ck_path_join(e->path, fl.rel[i]);
		struct stat sb;

		if (path && ic->committed && lstat(path, &sb) == 0 && (S_ISLNK(sb.st_mode) || S_ISDIR(sb.st_mode)))
			rc = ck_ingest_entry(path, fl.rel[i], &files[n]);
		else
			rc = path ? ck_ingest_file(path, fl.rel[i], ic->st->rules, previous_find(&pv, fl.rel[i]),
						   &files[n])
				  : -ENOMEM;
		free(path);
		if (rc < 0) {
			ck_fail(ic->err, -rc, "out of memory");
			goto out;
		}
		n++;
	}
	rc = ck_ingest_dcp_names(files, n, ic->st->rules);
	if (rc < 0) {
		ck_fail(ic->err, -rc, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		ck_ingest_report(&files[i], ic->report, ic->rctx);
	rc = ck_commit_checkpoint(ic->st, pattern, &ck, files, n, ic->err);
out:
	for (i = 0; i < n; i++)
		ck_ingest_clear(&files[i]);
	free(files);
	previous_free(&pv);
out_list:
	ck_strv_free(fl.rel, fl.n);
	return rc;
}

int ck_store_import(struct ck_store *st, const char *src, const struct ck_import_opts *opts,
		    ck_import_report_fn report_fn, void *ctx, struct ck_error *err)
{
	struct import_ctx ic = { .st = st, .report = report_fn, .rctx = ctx, .err = err };
	const char *user_pattern = opts ? opts->step_pattern : NULL;
	const char *series_opt = opts ? opts->series : NULL;
	char *stored = NULL, *abs;
	struct plan p;
	size_t i;
	int rc;

	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	if (user_pattern && (rc = ck_series_pattern_check(user_pattern, err)) < 0)
		return rc;
	if (series_opt && (rc = check_series_name(series_opt, err)) < 0)
		return rc;
	abs = realpath(src, NULL);
	if (!abs)
		return ck_fail(err, errno, "%s: %s", src, strerror(errno));
	ic.committed = in_data_area(st, abs);
	rc = plan_build(abs, series_opt, user_pattern, &p, err);
	if (rc == 0 && !user_pattern) {
		/* A series imported earlier with --pattern keeps using it. */
		rc = ck_store_series_pattern(st, p.series, &stored);
		if (rc == 0 && stored) {
			plan_free(&p);
			rc = plan_build(abs, series_opt, stored, &p, err);
		} else if (rc == -ENOENT) {
			rc = 0;
		} else if (rc < 0) {
			ck_fail(err, -rc, "%s: cannot read the index: %s", st->path, strerror(-rc));
			plan_free(&p);
		}
	}
	free(abs);
	free(stored);
	if (rc < 0)
		return rc;
	for (i = 0; i < p.nskipped; i++)
		report(&ic, p.skipped[i], CK_IMPORT_SKIPPED, "no step number in its name");
	for (i = 0; i < p.n && rc == 0; i++)
		rc = import_checkpoint(&ic, p.series, user_pattern, &p.v[i]);
	if (rc == 0)
		rc = (int)p.n;
	plan_free(&p);
	return rc;
}
