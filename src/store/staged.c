/* Committing a staged checkpoint directory (docs/format.md, "Staging, data
 * and quarantine").
 *
 * A trainer writes STORE/staging/<series>/<dir>/.  The commit:
 *   1. ingests every file (parse, verify, hash) with no index write;
 *   2. if any file is bad, or a DCP directory is incomplete, renames the
 *      directory to STORE/quarantine/<series>/<dir>.<UTC time>/, writes its
 *      REASON file there, and fails with -EBADMSG;
 *   3. else fsyncs every file and directory, renames the directory to
 *      STORE/data/<series>/<final name>/ (never over an existing one),
 *      fsyncs both parents, and records it like an import does (manifest,
 *      then one index transaction).
 * A crash before the rename leaves the staged directory; after it, the
 * directory under data/ has been validated and made durable, and
 * ck_store_recover() finishes recording it.  The ck_crash_point() calls
 * name the stages the crash tests stop at. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "commit.h"
#include "index.h"
#include "ckptfs/ingest.h"
#include "manifest.h"
#include "staging.h"

struct staged {
	struct ck_store *st;
	const char *series, *staged_name, *final_name;
	ck_import_report_fn report;
	void *rctx;
	ck_preparsed_fn preparsed;   /* may be NULL */
	void *pctx;
	struct ck_error *err;
	char *src;            /* STORE/staging/<series>/<staged_name> */
	char **rel;           /* its files */
	size_t n;
	struct ck_ingest *files;
	size_t ningested;
	struct ck_buf reasons;   /* "relpath: why\n" per problem */
};

char *ck_store_staging_path(const struct ck_store *st, const char *series, const char *name)
{
	char *area, *dir, *out;

	if (ck_manifest_check_name(series) < 0 || (name && ck_manifest_check_name(name) < 0)) {
		errno = EINVAL;
		return NULL;
	}
	area = ck_path_join(st->path, CK_STORE_STAGING_DIR);
	dir = area ? ck_path_join(area, series) : NULL;
	out = dir && name ? ck_path_join(dir, name) : NULL;
	free(area);
	if (!name)
		return dir;
	free(dir);
	return out;
}

static void report(const struct staged *s, const char *path, int status, const char *msg)
{
	if (s->report)
		s->report(s->rctx, path, status, msg);
}

/* Step 1: every file parsed and hashed; the problems go to s->reasons. */
static int validate(struct staged *s)
{
	size_t i;
	int rc;

	rc = ck_tree_list(s->src, &s->rel, &s->n, &s->reasons, s->err);
	if (rc < 0)
		return rc;
	if (s->n == 0 && s->reasons.len == 0 && ck_buf_puts(&s->reasons, ".: no files at all\n") < 0)
		return ck_fail(s->err, ENOMEM, "out of memory");
	s->files = calloc(s->n + 1, sizeof(*s->files));
	if (!s->files)
		return ck_fail(s->err, ENOMEM, "out of memory");
	for (i = 0; i < s->n; i++) {
		char *path = ck_path_join(s->src, s->rel[i]);
		const struct ck_ingest_prev *prev = NULL;

		struct stat sb;

		if (path && lstat(path, &sb) == 0 && (S_ISLNK(sb.st_mode) || S_ISDIR(sb.st_mode))) {
			rc = ck_ingest_entry(path, s->rel[i], &s->files[i]);
			free(path);
			if (rc < 0)
				return ck_fail(s->err, -rc, "out of memory");
			s->ningested++;
			continue;
		}
		if (path && s->preparsed)
			prev = ck_preparsed_prev(s->preparsed(s->pctx, path));
		rc = path ? ck_ingest_file(path, s->rel[i], s->st->rules, prev, &s->files[i]) : -ENOMEM;
		free(path);
		if (rc < 0)
			return ck_fail(s->err, -rc, "out of memory");
		s->ningested++;
	}
	if (ck_ingest_dcp_names(s->files, s->n, s->st->rules) < 0)
		return ck_fail(s->err, ENOMEM, "out of memory");
	for (i = 0; i < s->n; i++) {
		ck_ingest_report(&s->files[i], s->report, s->rctx);
		if (s->files[i].info.kind == CK_FILE_BAD &&
		    ck_reason_add(&s->reasons, "%s: %s", s->rel[i], s->files[i].info.error) < 0)
			return ck_fail(s->err, ENOMEM, "out of memory");
	}
	if (ck_dcp_check(s->rel, s->n, &s->reasons) < 0)
		return ck_fail(s->err, ENOMEM, "out of memory");
	return 0;
}

int ck_store_write_reason(const char *dir, const char *text, struct ck_error *err)
{
	char *path = ck_path_join(dir, CK_QUARANTINE_REASON);
	int rc = path ? ck_file_replace(path, text, strlen(text), err) : ck_fail(err, ENOMEM, "out of memory");
	struct stat sb;

	/* The REASON belongs to whoever the quarantined directory belongs to
	 * (a crash before this leaves it root's, readable as before). */
	if (rc == 0 && (stat(dir, &sb) < 0 || chown(path, sb.st_uid, sb.st_gid) < 0 ||
			chmod(path, sb.st_mode & 0644) < 0))
		rc = ck_fail(err, errno, "%s: %s", path, strerror(errno));
	free(path);
	return rc;
}

/* Renames from into dir/name, failing with -EEXIST rather than replacing
 * anything; the parents of both are fsynced. */
static int rename_durably(const char *from, const char *dir, const char *name, char **out, struct ck_error *err)
{
	char *dst = ck_path_join(dir, name);
	int rc = 0;

	if (!dst) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	if (renameat2(AT_FDCWD, from, AT_FDCWD, dst, RENAME_NOREPLACE) < 0) {
		if (errno != EINVAL && errno != ENOSYS) {
			rc = ck_fail(err, errno, "%s -> %s: %s", from, dst, strerror(errno));
			goto out;
		}
		/* No RENAME_NOREPLACE here: a commit lock holder is the only one making
		 * entries in data/ and quarantine/, so a check before rename() does. */
		if (access(dst, F_OK) == 0) {
			rc = ck_fail(err, EEXIST, "%s: already there", dst);
			goto out;
		}
		if (rename(from, dst) < 0) {
			rc = ck_fail(err, errno, "%s -> %s: %s", from, dst, strerror(errno));
			goto out;
		}
	}
	rc = ck_fsync_dir(dir);
	if (rc == 0)
		rc = ck_fsync_parent(from);
	if (rc < 0) {
		ck_fail(err, -rc, "fsync after renaming %s: %s", from, strerror(-rc));
		goto out;
	}
	*out = dst;
	dst = NULL;
out:
	free(dst);
	return rc;
}

/* Step 2: the staged directory set aside with its reasons. */
static int quarantine(struct staged *s)
{
	char stamp[32], *dir = NULL, *name = NULL, *moved = NULL;
	struct ck_error why = { { 0 } };
	time_t now = time(NULL);
	struct tm tm;
	int rc, i, keep;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	rc = ck_store_area_dir(s->st->path, CK_STORE_QUARANTINE_DIR, s->series, &dir, s->err);
	if (rc < 0)
		goto out;
	name = malloc(strlen(s->staged_name) + sizeof(stamp) + 16);
	if (!name) {
		rc = ck_fail(s->err, ENOMEM, "out of memory");
		goto out;
	}
	/* Quarantined twice in one second: a suffix keeps both.  The staged
	 * name is cut so that name, time and suffix fit NAME_MAX (255). */
	keep = (int)strlen(s->staged_name);
	if (keep > 255 - 20)
		keep = 255 - 20;
	for (i = 0, rc = -EEXIST; rc == -EEXIST && i < 100; i++) {
		if (i == 0)
			sprintf(name, "%.*s.%s", keep, s->staged_name, stamp);
		else
			sprintf(name, "%.*s.%s-%d", keep, s->staged_name, stamp, i);
		rc = rename_durably(s->src, dir, name, &moved, &why);
	}
	if (rc < 0) {
		ck_fail(s->err, -rc, "cannot quarantine %s: %s", s->src, why.msg);
		goto out;
	}
	ck_crash_point("quarantined");
	rc = ck_store_write_reason(moved, (const char *)s->reasons.data, s->err);
	if (rc == 0) {
		size_t first = strcspn((const char *)s->reasons.data, "\n");

		report(s, moved, CK_COMMIT_QUARANTINED, "quarantined");
		rc = ck_fail(s->err, EBADMSG, "%s/%s quarantined as %s: %.*s%s", s->series, s->staged_name, moved,
			     (int)first, (const char *)s->reasons.data,
			     s->reasons.len > first + 1 ? " (and more: see REASON)" : "");
	}
out:
	free(dir);
	free(name);
	free(moved);
	return rc;
}

/* 0 if series/name is not a committed checkpoint, else -EEXIST (or -errno) with err. */
static int already_committed(struct ck_store *st, const char *series, const char *name, struct ck_error *err)
{
	struct ck_ckpt_info *old;
	int rc = ck_store_find_checkpoint(st, series, name, &old);

	if (rc == 0) {
		ck_ckpt_info_free(old, 1);
		return ck_fail(err, EEXIST, "%s/%s is already committed: a committed checkpoint is never replaced",
			       series, name);
	}
	if (rc != -ENOENT)
		return ck_fail(err, -rc, "%s: cannot read the index: %s", st->path, strerror(-rc));
	return 0;
}

/* Step 3: durable, renamed into data/, recorded. */
static int commit(struct staged *s, int64_t step)
{
	struct ck_ckpt_info ck = { .series = (char *)s->series, .name = (char *)s->final_name, .step = step };
	char *dir = NULL, *dst = NULL, *abs = NULL;
	struct ck_error why = { { 0 } };
	size_t i;
	int rc;

	/* Checked again under the commit lock: an import may have recorded the name meanwhile. */
	rc = already_committed(s->st, s->series, s->final_name, s->err);
	if (rc < 0)
		return rc;
	rc = ck_tree_fsync(s->src, s->rel, s->n, s->err);
	if (rc < 0)
		return rc;
	ck_crash_point("synced");
	rc = ck_store_area_dir(s->st->path, CK_STORE_DATA_DIR, s->series, &dir, s->err);
	if (rc < 0)
		return rc;
	rc = rename_durably(s->src, dir, s->final_name, &dst, &why);
	free(dir);
	if (rc == -EEXIST || rc == -ENOTEMPTY)
		return ck_fail(s->err, EEXIST, "%s/%s is already committed: a committed checkpoint is never replaced",
			       s->series, s->final_name);
	if (rc < 0)
		return ck_fail(s->err, -rc, "cannot commit: %s", why.msg);
	ck_crash_point("renamed");
	/* The files were ingested under staging/: they are now under data/ (same inodes). */
	abs = realpath(dst, NULL);
	if (!abs) {
		rc = ck_fail(s->err, errno, "%s: %s", dst, strerror(errno));
		goto out;
	}
	ck.src_path = abs;
	for (i = 0; i < s->n; i++) {
		char *p = ck_path_join(abs, s->rel[i]);

		if (!p) {
			rc = ck_fail(s->err, ENOMEM, "out of memory");
			goto out;
		}
		free(s->files[i].info.src_path);
		s->files[i].info.src_path = p;
	}
	rc = ck_commit_checkpoint(s->st, NULL, &ck, s->files, s->n, s->err);
	if (rc == 0) {
		ck_crash_point("indexed");
		report(s, abs, 0, "committed");
	}
out:
	free(abs);
	free(dst);
	return rc;
}

/* Whether the staged directory (inode ino) was committed by another
 * process or node: STORE/data/<series>/<final name> is that very directory
 * (a rename keeps the inode; the staged name may still be in this
 * client's cache of a shared filesystem), or, ino 0, the staged directory
 * is gone and the name is committed.  1 with err saying so (-EALREADY). */
static int committed_elsewhere(struct staged *s, ino_t ino)
{
	struct ck_ckpt_info *ck;
	struct stat now;
	char *area = ck_path_join(s->st->path, CK_STORE_DATA_DIR), *dir = NULL, *path = NULL;
	int yes = 0;

	if (area && (dir = ck_path_join(area, s->series)) != NULL)
		path = ck_path_join(dir, s->final_name);
	if (ino)
		yes = path && stat(path, &now) == 0 && S_ISDIR(now.st_mode) && now.st_ino == ino;
	else if (lstat(s->src, &now) < 0 && errno == ENOENT) {
		ck_store_follow(s->st, NULL, NULL);
		yes = ck_store_find_checkpoint(s->st, s->series, s->final_name, &ck) == 0;
		if (yes)
			ck_ckpt_info_free(ck, 1);
	}
	free(area);
	free(dir);
	free(path);
	if (yes)
		ck_fail(s->err, EALREADY, "%s/%s was committed meanwhile by another process or node", s->series,
			s->final_name);
	return yes;
}

/* Under the commit lock: the directory validated is still the one staged.
 * Another process or node may have committed it meanwhile (a marker seen
 * by two daemons, an idle commit on each node): exactly one rename moves
 * it, and the others get -EALREADY, which is not a failure. */
static int still_staged(struct staged *s, const struct stat *validated)
{
	struct stat now;

	if (committed_elsewhere(s, validated->st_ino))
		return -EALREADY;
	if (lstat(s->src, &now) == 0 && now.st_ino == validated->st_ino && S_ISDIR(now.st_mode))
		return 0;
	return ck_fail(s->err, ENOENT, "%s: moved away meanwhile (committed under another name or quarantined "
		       "by another process or node)", s->src);
}

static int check_names(const struct ck_store *st, const char *series, const char *staged_name,
		       const char *final_name, int64_t *step, struct ck_error *err)
{
	char *pattern = NULL;
	int rc;

	if (ck_manifest_check_name(series) < 0)
		return ck_fail(err, EINVAL, "'%s' cannot name a series", series);
	if (ck_manifest_check_name(staged_name) < 0)
		return ck_fail(err, EINVAL, "'%s' cannot name a staged directory", staged_name);
	if (ck_manifest_check_name(final_name) < 0)
		return ck_fail(err, EINVAL, "'%s' cannot name a checkpoint", final_name);
	rc = ck_store_series_pattern((struct ck_store *)st, series, &pattern);
	if (rc < 0 && rc != -ENOENT)
		return ck_fail(err, -rc, "%s: cannot read the index: %s", st->path, strerror(-rc));
	rc = ck_series_step(final_name, pattern, step);
	if (rc < 0)
		ck_fail(err, EINVAL, "'%s' has no step number in its name (%s%s)", final_name,
			pattern ? "series pattern " : "e.g. checkpoint-N, global_stepN, iter_N, step_N",
			pattern ? pattern : "");
	free(pattern);
	return rc < 0 ? -EINVAL : 0;
}

int ck_store_commit_staged(struct ck_store *st, const char *series, const char *staged_name, const char *final_name,
			   ck_import_report_fn report_fn, void *ctx, struct ck_error *err)
{
	return ck_store_commit_staged_with(st, series, staged_name, final_name, report_fn, ctx, NULL, NULL,
					   CK_WRITERS_COMMIT_WAIT_MS, err);
}

/* No node writes into the directory from here until it left staging
 * (STORE/writers): -EBUSY while one still does after wait_ms.  A store
 * whose filesystem cannot lock (or that this user cannot write) commits
 * as a single node would, saying so. */
static int hold_writers(struct staged *s, unsigned wait_ms, int *fd)
{
	struct ck_error why = { { 0 } };
	int rc = ck_writers_exclusive(s->st->path, s->series, s->staged_name, wait_ms, fd, &why);

	if (rc == -EBUSY)
		return ck_fail(s->err, EBUSY, "%s", why.msg);
	if (rc < 0)
		ck_warn("%s: committed without waiting for other nodes' writers: %s", s->src, why.msg);
	return 0;
}

/* After the commit: the lock file goes with the staged directory. */
static void release_writers(struct staged *s, int fd)
{
	struct stat sb;

	if (fd >= 0 && lstat(s->src, &sb) < 0 && errno == ENOENT)
		ck_writers_done(s->st->path, s->series, s->staged_name, fd);
	else
		ck_writers_unlock(fd);
}

int ck_store_commit_staged_with(struct ck_store *st, const char *series, const char *staged_name,
				const char *final_name, ck_import_report_fn report_fn, void *ctx,
				ck_preparsed_fn preparsed, void *pctx, unsigned wait_ms, struct ck_error *err)
{
	struct staged s = { .st = st, .series = series, .staged_name = staged_name,
			    .final_name = final_name ? final_name : staged_name, .report = report_fn, .rctx = ctx,
			    .preparsed = preparsed, .pctx = pctx, .err = err, .reasons = CK_BUF_INIT };
	struct stat sb;
	int64_t step;
	int lock = -1, writers = -1, rc;
	size_t i;

	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	rc = check_names(st, series, staged_name, s.final_name, &step, err);
	if (rc < 0)
		return rc;
	s.src = ck_store_staging_path(st, series, staged_name);
	if (!s.src)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = hold_writers(&s, wait_ms, &writers);
	if (rc < 0)
		goto out;
	if (lstat(s.src, &sb) < 0) {
		rc = errno == ENOENT && committed_elsewhere(&s, 0) ? -EALREADY :
		     ck_fail(err, errno, "%s: %s", s.src, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(sb.st_mode)) {
		rc = ck_fail(err, ENOTDIR, "%s: not a directory (only checkpoint directories are staged)", s.src);
		goto out;
	}
	rc = already_committed(st, series, s.final_name, err);   /* before the work of validating */
	if (rc == -EEXIST && committed_elsewhere(&s, sb.st_ino))
		rc = -EALREADY;
	if (rc < 0)
		goto out;
	rc = validate(&s);
	if (rc < 0)
		goto out;
	ck_crash_point("validated");
	/* From here on the data/ and quarantine/ areas change: one commit or
	 * recovery at a time. */
	rc = ck_store_commit_lock(st, &lock, err);
	/* What other processes and nodes committed before the lock was ours. */
	if (rc == 0)
		rc = ck_store_follow(st, NULL, err);
	if (rc < 0)
		goto out;
	rc = still_staged(&s, &sb);
	if (rc < 0)
		goto out;
	if (s.reasons.len) {
		if (ck_buf_putc(&s.reasons, '\0') < 0) {
			rc = ck_fail(err, ENOMEM, "out of memory");
			goto out;
		}
		s.reasons.len--;
		rc = quarantine(&s);
	} else {
		rc = commit(&s, step);
	}
out:
	ck_store_unlock(lock);
	release_writers(&s, writers);
	for (i = 0; i < s.ningested; i++)
		ck_ingest_clear(&s.files[i]);
	free(s.files);
	ck_strv_free(s.rel, s.n);
	ck_buf_free(&s.reasons);
	free(s.src);
	return rc;
}
