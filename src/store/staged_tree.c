/* Walking a staged checkpoint directory: which files it holds, making all
 * of it durable before it is renamed into place; creating and walking the
 * store's per-series areas (staging, data, quarantine, manifests). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/str.h"
#include "manifest.h"
#include "staging.h"

#define MAX_DEPTH 32

/* A regular file seen with several links: all of them must be in the tree. */
struct linked {
	dev_t dev;
	ino_t ino;
	nlink_t nlink;
	char *rel;      /* its first name (a copy) */
};

struct tree {
	char **rel;
	size_t n, cap;
	struct linked *links;
	size_t nlinks, caplinks;
	struct ck_buf *reasons;
	struct ck_error *err;
};

static int tree_push(struct tree *t, char *s)
{
	if (t->n == t->cap) {
		char **v = ck_grow(t->rel, &t->cap, sizeof(*v), 16);

		if (!v)
			return -ENOMEM;
		t->rel = v;
	}
	t->rel[t->n++] = s;
	return 0;
}

static int note_linked(struct tree *t, const struct stat *sb, const char *rel)
{
	if (t->nlinks == t->caplinks) {
		struct linked *v = ck_grow(t->links, &t->caplinks, sizeof(*v), 8);

		if (!v)
			return -ENOMEM;
		t->links = v;
	}
	t->links[t->nlinks].dev = sb->st_dev;
	t->links[t->nlinks].ino = sb->st_ino;
	t->links[t->nlinks].nlink = sb->st_nlink;
	t->links[t->nlinks].rel = strdup(rel);
	if (!t->links[t->nlinks].rel)
		return -ENOMEM;
	t->nlinks++;
	return 0;
}

static int linked_cmp(const void *a, const void *b)
{
	const struct linked *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* A file with a link outside the tree (another checkpoint being written)
 * would be one file in two checkpoints, changed through the other after
 * this one is committed. */
static int check_links(struct tree *t)
{
	int rc = 0;

	if (t->nlinks > 1)
		qsort(t->links, t->nlinks, sizeof(*t->links), linked_cmp);
	for (size_t i = 0, j; i < t->nlinks && rc == 0; i = j) {
		for (j = i + 1; j < t->nlinks && !linked_cmp(&t->links[i], &t->links[j]); j++)
			;
		if (t->links[i].nlink > j - i)
			rc = ck_reason_add(t->reasons, "%s: also linked from outside the checkpoint", t->links[i].rel);
	}
	for (size_t i = 0; i < t->nlinks; i++)
		free(t->links[i].rel);
	free(t->links);
	return rc;
}

static int walk(struct tree *t, const char *root, const char *rel, int depth)
{
	char *dir = ck_path_join(root, rel);
	struct dirent *de;
	size_t entries = 0;
	DIR *d;
	int rc = 0;

	if (!dir)
		return ck_fail(t->err, ENOMEM, "out of memory");
	d = opendir(dir);
	if (!d) {
		rc = ck_fail(t->err, errno, "%s: %s", dir, strerror(errno));
		free(dir);
		return rc;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct stat sb;
		char *child;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		entries++;
		child = ck_path_join(rel, de->d_name);
		if (!child) {
			rc = ck_fail(t->err, ENOMEM, "out of memory");
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = ck_fail(t->err, errno, "%s/%s: %s", dir, de->d_name, strerror(errno));
		} else if (S_ISDIR(sb.st_mode)) {
			if (depth >= MAX_DEPTH)
				rc = ck_reason_add(t->reasons, "%s: directories nested deeper than %d", child,
						   MAX_DEPTH);
			else
				rc = walk(t, root, child, depth + 1);
		} else if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) {
			if (S_ISREG(sb.st_mode) && sb.st_nlink > 1)
				rc = note_linked(t, &sb, child);
			if (rc == 0)
				rc = tree_push(t, child);
			if (rc == 0)
				child = NULL;
		} else {
			rc = ck_reason_add(t->reasons, "%s: a special file (a checkpoint holds files, directories "
					   "and symbolic links)", child);
		}
		if (rc == -ENOMEM)
			ck_fail(t->err, ENOMEM, "out of memory");
		free(child);
	}
	closedir(d);
	free(dir);
	/* An empty directory is an entry of its own (the root is the checkpoint). */
	if (rc == 0 && entries == 0 && *rel) {
		char *copy = strdup(rel);

		rc = copy ? tree_push(t, copy) : -ENOMEM;
		if (rc)
			free(copy);
	}
	return rc;
}

int ck_tree_list(const char *root, char ***rel, size_t *n, struct ck_buf *reasons, struct ck_error *err)
{
	struct tree t = { .reasons = reasons, .err = err };
	int rc = walk(&t, root, "", 0), lrc = check_links(&t);

	if (rc == 0 && lrc < 0)
		rc = ck_fail(err, ENOMEM, "out of memory");
	if (rc < 0) {
		ck_strv_free(t.rel, t.n);
		return rc;
	}
	if (t.n > 1)
		qsort(t.rel, t.n, sizeof(*t.rel), ck_strp_cmp);
	*rel = t.rel;
	*n = t.n;
	return 0;
}

/* The directories of the tree: root and every directory a listed file is in. */
static int fsync_dirs(const char *root, char *const *rel, size_t n, struct ck_error *err)
{
	size_t i;
	int rc = ck_fsync_dir(root);

	if (rc < 0)
		return ck_fail(err, -rc, "%s: fsync: %s", root, strerror(-rc));
	for (i = 0; i < n; i++) {
		char *path = ck_path_join(root, rel[i]), *slash;

		if (!path)
			return ck_fail(err, ENOMEM, "out of memory");
		/* Each parent up to root; directories shared by several files are synced again, which is cheap. */
		while ((slash = strrchr(path, '/')) != NULL && (size_t)(slash - path) > strlen(root)) {
			*slash = '\0';
			rc = ck_fsync_dir(path);
			if (rc < 0) {
				rc = ck_fail(err, -rc, "%s: fsync: %s", path, strerror(-rc));
				free(path);
				return rc;
			}
		}
		free(path);
	}
	return 0;
}

int ck_tree_fsync(const char *root, char *const *rel, size_t n, struct ck_error *err)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		char *path = ck_path_join(root, rel[i]);
		struct stat sb;

		if (!path)
			return ck_fail(err, ENOMEM, "out of memory");
		/* A symbolic link is made durable by its directory's fsync. */
		if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
			rc = 0;
		else
			rc = S_ISDIR(sb.st_mode) ? ck_fsync_dir(path) : ck_fsync_file(path);
		if (rc < 0) {
			rc = ck_fail(err, -rc, "%s: fsync: %s", path, strerror(-rc));
			free(path);
			return rc;
		}
		free(path);
	}
	return fsync_dirs(root, rel, n, err);
}

int ck_reason_add(struct ck_buf *reasons, const char *fmt, ...)
{
	va_list ap;
	char *line;
	int n, rc = 0;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	line = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (!line)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(line, (size_t)n + 1, fmt, ap);
	va_end(ap);
	for (const char *p = line; *p && rc == 0; p++)
		rc = *p == '\\' ? ck_buf_puts(reasons, "\\\\") : *p == '\n' ? ck_buf_puts(reasons, "\\n")
									      : ck_buf_putc(reasons, (uint8_t)*p);
	if (rc == 0)
		rc = ck_buf_putc(reasons, '\n');
	free(line);
	return rc < 0 ? -ENOMEM : 0;
}

static int mkdir_durable(const char *path, struct ck_error *err)
{
	int rc = ck_mkdir_durable(path);

	return rc < 0 ? ck_fail(err, -rc, "%s: %s", path, strerror(-rc)) : 0;
}

/* A series directory made under data/ or quarantine/ takes the owner,
 * group and mode of the series' directory under staging/ (the one a
 * writable mount made for whoever created the series), which the mount
 * shows for the series once its first checkpoint is committed. */
static int copy_series_owner(const char *store, const char *series, const char *dir, struct ck_error *err)
{
	char *top = ck_path_join(store, CK_STORE_STAGING_DIR), *staged = top ? ck_path_join(top, series) : NULL;
	struct stat sb;
	int rc = 0;

	if (!staged)
		rc = ck_fail(err, ENOMEM, "out of memory");
	else if (stat(staged, &sb) == 0 && S_ISDIR(sb.st_mode) &&
		 (chown(dir, sb.st_uid, sb.st_gid) < 0 || chmod(dir, sb.st_mode & 07777) < 0))
		rc = ck_fail(err, errno, "%s: %s", dir, strerror(errno));
	free(top);
	free(staged);
	return rc;
}

int ck_store_area_dir(const char *store, const char *area, const char *series, char **out, struct ck_error *err)
{
	char *top = ck_path_join(store, area), *dir = top ? ck_path_join(top, series) : NULL;
	struct stat sb;
	int rc, made;

	if (!top || !dir) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = mkdir_durable(top, err);
	made = rc == 0 && stat(dir, &sb) < 0;
	if (rc == 0)
		rc = mkdir_durable(dir, err);
	if (rc == 0 && made && strcmp(area, CK_STORE_STAGING_DIR) != 0)
		rc = copy_series_owner(store, series, dir, err);
	if (rc == 0) {
		*out = dir;
		dir = NULL;
	}
out:
	free(top);
	free(dir);
	return rc;
}

static int is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

int ck_store_area_each(const char *store, const char *area, ck_area_entry_fn fn, void *ctx)
{
	char *top = ck_path_join(store, area);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!top)
		return -ENOMEM;
	d = opendir(top);
	if (!d) {
		rc = errno == ENOENT ? 0 : -errno;
		free(top);
		return rc;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		char *sdir;
		struct dirent *e;
		DIR *sd;

		if (is_dot(de->d_name))
			continue;
		sdir = ck_path_join(top, de->d_name);
		if (!sdir) {
			rc = -ENOMEM;
			break;
		}
		sd = opendir(sdir);
		while (sd && rc == 0 && (e = readdir(sd)) != NULL) {
			char *path;

			if (is_dot(e->d_name))
				continue;
			path = ck_path_join(sdir, e->d_name);
			rc = path ? fn(ctx, de->d_name, e->d_name, path) : -ENOMEM;
			free(path);
		}
		if (sd)
			closedir(sd);
		free(sdir);
	}
	closedir(d);
	free(top);
	return rc;
}
