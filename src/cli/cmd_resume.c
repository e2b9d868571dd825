/* ckptctl resume-info STORE SERIES: the checkpoint a restarted trainer
 * should resume from: the newest committed checkpoint of the series whose
 * every file the mount can serve (the composite resolves and its physical
 * files are the ones imported), its path in the mount and its files. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/view.h"
#include "cli.h"

struct resume_args {
	int json;
	const char *mount;
};

struct ckpt_ref {
	const struct ck_vnode *node;
	int64_t step;
};

struct file_ref {
	char *path;        /* inside the checkpoint */
	uint64_t size;
};

struct resume_found {
	struct file_ref *files;
	size_t nfiles;
	char why[600];     /* why the checkpoint cannot be served */
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct resume_args *a = ctx;

	if (c == 'j') {
		a->json = 1;
		return 0;
	}
	if (c == 'm') {
		a->mount = arg;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static int by_step_desc(const void *x, const void *y)
{
	const struct ckpt_ref *a = x, *b = y;

	return (a->step < b->step) - (a->step > b->step);
}

static void free_found(struct resume_found *f)
{
	for (size_t i = 0; i < f->nfiles; i++)
		free(f->files[i].path);
	free(f->files);
	f->files = NULL;
	f->nfiles = 0;
}

static int add_file(struct resume_found *f, const char *path, uint64_t size)
{
	struct file_ref *v = realloc(f->files, (f->nfiles + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	f->files = v;
	v[f->nfiles].path = strdup(path);
	if (!v[f->nfiles].path)
		return -ENOMEM;
	v[f->nfiles++].size = size;
	return 0;
}

/* Opens every file under n (prefix: its path inside the checkpoint) as a
 * reader of the mount would: 0, -EIO with f->why when one cannot be
 * served, -ENOMEM. */
static int check_tree(struct ck_view *v, const struct ck_vnode *n, const char *prefix, struct resume_found *f)
{
	struct ck_vattr attr;
	int rc = ck_view_getattr(v, n, &attr);

	if (rc == 0 && S_ISDIR(attr.mode)) {
		const struct ck_vnode **kids;
		size_t nk;
		uint64_t changes;

		rc = ck_view_children(v, n, &kids, &nk, &changes);
		if (rc)
			return rc == -ENOMEM ? rc : -EIO;
		for (size_t i = 0; rc == 0 && i < nk; i++) {
			const char *name = ck_vnode_name(kids[i]);
			size_t len = strlen(prefix) + strlen(name) + 2;
			char *path = malloc(len);

			if (!path) {
				rc = -ENOMEM;
				break;
			}
			snprintf(path, len, "%s%s%s", prefix, *prefix ? "/" : "", name);
			rc = check_tree(v, kids[i], path, f);
			free(path);
		}
		free(kids);
		return rc;
	}
	if (rc == 0) {
		struct ck_vfile *vf;

		rc = ck_view_open_file(v, n, &vf);
		if (rc == 0) {
			ck_vfile_put(vf);
			return add_file(f, prefix, attr.size);
		}
	}
	if (rc == -ENOMEM)
		return rc;
	{
		struct ck_buf why = CK_BUF_INIT;

		if (ck_view_getxattr(v, n, "user.ckptfs.error", &why) == 0 && why.len)
			snprintf(f->why, sizeof(f->why), "%s: %.*s", *prefix ? prefix : ck_vnode_name(n), (int)why.len,
				 (const char *)why.data);
		else
			snprintf(f->why, sizeof(f->why), "%s: %s", *prefix ? prefix : ck_vnode_name(n), strerror(-rc));
		ck_buf_free(&why);
	}
	return -EIO;
}

/* The committed checkpoints of series, newest first. */
static int checkpoints_of(struct ck_view *v, const struct ck_vnode *dir, struct ckpt_ref **out, size_t *n)
{
	const struct ck_vnode **kids;
	struct ckpt_ref *c;
	size_t nk, m = 0;
	uint64_t changes;
	int rc = ck_view_children(v, dir, &kids, &nk, &changes);

	if (rc)
		return rc;
	c = calloc(nk ? nk : 1, sizeof(*c));
	if (!c) {
		free(kids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nk; i++) {
		struct ck_buf step = CK_BUF_INIT;

		if (ck_view_getxattr(v, kids[i], "user.ckptfs.step", &step) == 0 && ck_buf_putc(&step, '\0') == 0) {
			c[m].node = kids[i];
			c[m].step = strtoll((const char *)step.data, NULL, 10);
			m++;
		}
		ck_buf_free(&step);
	}
	free(kids);
	qsort(c, m, sizeof(*c), by_step_desc);
	*out = c;
	*n = m;
	return 0;
}

/* In-progress directories of series (STORE/staging/SERIES/): saves not
 * committed yet, or left half-written by a killed trainer. */
static void in_progress(const char *store, const char *series, struct jw *w, int json)
{
	char path[4096];
	struct dirent *e;
	DIR *d;
	int any = 0;

	snprintf(path, sizeof(path), "%s/%s/%s", store, CK_STORE_STAGING_DIR, series);
	d = opendir(path);
	if (json) {
		jw_key(w, "in_progress");
		jw_begin_arr(w);
	}
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (json) {
			jw_str(w, e->d_name);
		} else {
			printf("%s%s", any ? " " : "in progress: ", e->d_name);
			any = 1;
		}
	}
	if (d)
		closedir(d);
	if (json)
		jw_end_arr(w);
	else if (any)
		printf("\n");
}

static int report(const struct resume_args *a, const char *store, const char *series, const char *name,
		  int64_t step, const char *mnt, const struct resume_found *f, const struct resume_found *skipped,
		  const char *const *skipped_names, const int64_t *skipped_steps, size_t nskipped)
{
	struct jw w = { .b = CK_BUF_INIT };
	char path[8192];

	if (mnt)
		snprintf(path, sizeof(path), "%s/%s/%s", mnt, series, name);
	if (!a->json) {
		printf("checkpoint: %s/%s\nstep: %" PRId64 "\npath: %s\n", series, name, step,
		       mnt ? path : "(no mount: give --mount MNT)");
		for (size_t i = 0; i < nskipped; i++)
			printf("skipped: %s (step %" PRId64 "): %s\n", skipped_names[i], skipped_steps[i], skipped[i].why);
		in_progress(store, series, &w, 0);
		printf("files:\n");
		for (size_t i = 0; i < f->nfiles; i++)
			printf("  %12" PRIu64 "  %s\n", f->files[i].size, f->files[i].path);
		return CK_EXIT_OK;
	}
	jw_begin_obj(&w);
	jw_key(&w, "series");
	jw_str(&w, series);
	jw_key(&w, "checkpoint");
	jw_str(&w, name);
	jw_key(&w, "step");
	jw_int(&w, step);
	jw_key(&w, "mount");
	if (mnt)
		jw_str(&w, mnt);
	else
		jw_null(&w);
	jw_key(&w, "path");
	if (mnt)
		jw_str(&w, path);
	else
		jw_null(&w);
	jw_key(&w, "files");
	jw_begin_arr(&w);
	for (size_t i = 0; i < f->nfiles; i++) {
		jw_begin_obj(&w);
		jw_key(&w, "path");
		jw_str(&w, f->files[i].path);
		jw_key(&w, "size");
		jw_uint(&w, f->files[i].size);
		jw_end_obj(&w);
	}
	jw_end_arr(&w);
	jw_key(&w, "skipped");
	jw_begin_arr(&w);
	for (size_t i = 0; i < nskipped; i++) {
		jw_begin_obj(&w);
		jw_key(&w, "checkpoint");
		jw_str(&w, skipped_names[i]);
		jw_key(&w, "step");
		jw_int(&w, skipped_steps[i]);
		jw_key(&w, "reason");
		jw_str(&w, skipped[i].why);
		jw_end_obj(&w);
	}
	jw_end_arr(&w);
	in_progress(store, series, &w, 1);
	jw_end_obj(&w);
	return jw_finish(&w);
}

#define MAX_SKIPPED 16

static int resume_info(struct ck_view *v, const struct resume_args *a, const char *store, const char *series,
		       const char *mnt)
{
	struct resume_found skipped[MAX_SKIPPED], f = { 0 };
	const char *skipped_names[MAX_SKIPPED];
	int64_t skipped_steps[MAX_SKIPPED];
	size_t nskipped = 0, n;
	const struct ck_vnode *dir;
	struct ckpt_ref *c;
	int rc, status = CK_EXIT_NONE;

	rc = ck_view_lookup(v, ck_view_root(v), series, &dir);
	if (rc) {
		cli_error("resume-info: %s: %s", series, rc == -ENOENT ? "no such series" : strerror(-rc));
		return CK_EXIT_NONE;
	}
	rc = checkpoints_of(v, dir, &c, &n);
	if (rc) {
		cli_error("resume-info: %s: %s", series, strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++) {
		memset(&f, 0, sizeof(f));
		rc = check_tree(v, c[i].node, "", &f);
		if (rc == 0) {
			status = report(a, store, series, ck_vnode_name(c[i].node), c[i].step, mnt, &f, skipped,
					skipped_names, skipped_steps, nskipped);
			free_found(&f);
			break;
		}
		free_found(&f);
		if (rc == -ENOMEM) {
			cli_error("resume-info: out of memory");
			status = CK_EXIT_FAILURE;
			break;
		}
		if (nskipped < MAX_SKIPPED) {
			skipped[nskipped] = f;
			skipped_names[nskipped] = ck_vnode_name(c[i].node);
			skipped_steps[nskipped] = c[i].step;
			nskipped++;
		}
		cli_error("resume-info: %s/%s cannot be served: %s", series, ck_vnode_name(c[i].node), f.why);
	}
	if (status == CK_EXIT_NONE)
		cli_error("resume-info: %s: no committed checkpoint the mount can serve", series);
	free(c);
	return status;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "mount", required_argument, NULL, 'm' },
		{ 0, 0, 0, 0 },
	};
	struct resume_args a = { 0 };
	struct ck_view_opts vo = { .verify = CK_VERIFY_NONE };
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	char *owner_mnt = NULL;
	const char *mnt;
	long pid;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "jm:", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_usage_error(cmd, "expected STORE and SERIES");
	if (strchr(argv[optind + 1], '/'))
		return cli_usage_error(cmd, "'%s' is not a series name", argv[optind + 1]);
	mnt = a.mount;
	if (!mnt && ck_store_mount_owner(argv[optind], &pid, &owner_mnt) == 1)
		mnt = owner_mnt;
	rc = ck_view_open(argv[optind], &vo, &v, &err);
	if (rc < 0) {
		free(owner_mnt);
		cli_error("resume-info: %s", err.msg[0] ? err.msg : strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	rc = resume_info(v, &a, argv[optind], argv[optind + 1], mnt);
	ck_view_close(v);
	free(owner_mnt);
	return rc;
}

const struct cli_cmd cli_cmd_resume_info = {
	.name = "resume-info",
	.args = "STORE SERIES [--json] [--mount MNT]",
	.summary = "the newest checkpoint of a series that the mount can serve whole",
	.help = "The checkpoint a restarted trainer should load: the newest committed checkpoint of\n"
		"SERIES whose every file the mount can serve (its composite resolves and the files\n"
		"it reads are the ones committed or imported; a checkpoint with a refused or changed\n"
		"file is skipped, with the reason on stderr), its path in the mount and its files.\n"
		"In-progress directories of the series (saves not committed yet) are listed too.\n"
		"\n"
		"  -j, --json       machine-readable output\n"
		"  -m, --mount MNT  the mount to give paths in (default: the store's writable mount)\n"
		"\n"
		"Exit status 4 when the series has no checkpoint the mount can serve.\n",
	.run = run,
};
