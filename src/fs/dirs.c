/* What a directory of a writable mount is (dirs.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dirs.h"
#include "nodes.h"

/* The series name of a view directory right under the root, or NULL. */
static const char *view_series(struct ckfs *fs, const struct ck_vnode *n)
{
	return ck_vnode_is_series_dir(fs->view, n) ? ck_vnode_name(n) : NULL;
}

int ckfs_dir_ctx(struct ckfs *fs, fuse_ino_t ino, struct ckfs_dir_ctx *c)
{
	const struct ck_vnode *n, *root = ck_view_root(fs->view);
	const char *series;
	int rc;

	memset(c, 0, sizeof(*c));
	if (ck_staging_is_staged(ino)) {
		rc = ck_staging_series(fs->staging, ino, &c->series);
		if (rc == -ENOMEM)
			return rc;
		c->kind = rc == 0 ? CKFS_DIR_SERIES : CKFS_DIR_STAGED;
		c->staged = ino;
		/* A new series gets its view directory with its first commit. */
		if (c->kind == CKFS_DIR_SERIES && ck_view_lookup(fs->view, root, c->series, &n) == 0)
			c->view_dir = n;
		return 0;
	}
	n = ckfs_node(fs, ino);
	if (!n)
		return -ESTALE;
	c->view_dir = n;
	if (ino == FUSE_ROOT_ID) {
		c->kind = CKFS_DIR_ROOT;
		return 0;
	}
	series = view_series(fs, n);
	if (!series) {
		c->kind = CKFS_DIR_VIEW;
		return 0;
	}
	c->kind = CKFS_DIR_SERIES;
	/* A series reloaded by a refresh: the kernel may still hold its old
	 * directory for a moment; its committed entries are the new one's. */
	if (ck_view_lookup(fs->view, root, series, &n) == 0)
		c->view_dir = n;
	c->series = strdup(series);
	return c->series ? 0 : -ENOMEM;
}

void ckfs_dir_ctx_free(struct ckfs_dir_ctx *c)
{
	free(c->series);
	c->series = NULL;
}

int ckfs_dir_in_view(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name)
{
	const struct ck_vnode *n;

	return c->view_dir && ck_view_lookup(fs->view, c->view_dir, name, &n) == 0;
}

int ckfs_child_at(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name, struct ck_staged_at *at)
{
	at->dir = -1;
	at->name = NULL;
	switch (c->kind) {
	case CKFS_DIR_ROOT:
		return ck_staging_top_at(fs->staging, name, NULL, at);
	case CKFS_DIR_SERIES:
		return ck_staging_top_at(fs->staging, c->series, name, at);
	case CKFS_DIR_STAGED:
		return ck_staging_at(fs->staging, c->staged, name, at);
	default:
		return -EROFS;
	}
}
