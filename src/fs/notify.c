/* Telling the kernel what changed (notify.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/log.h"
#include "nodes.h"
#include "health.h"
#include "notify.h"
#include "passthrough.h"

void ckfs_inval_inodes(struct ckfs *fs, const uint64_t *inos, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t ino = ckfs_fuse_ino(fs, inos[i]);
		int rc = fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);

		if (rc && rc != -ENOENT)
			ck_debug("invalidating inode %llu: %s", (unsigned long long)ino, strerror(-rc));
	}
}

static void forget_one(void *arg, const struct ck_vnode *n, uint64_t parent, const char *name)
{
	struct ckfs *fs = arg;
	int rc = fuse_lowlevel_notify_inval_entry(fs->se, ckfs_fuse_ino(fs, parent), name, strlen(name));
	uint64_t *inos;
	size_t count;

	if (rc && rc != -ENOENT)
		ck_debug("forgetting %s: %s", name, strerror(-rc));
	/* A checkpoint deleted by another process: its files are not opened
	 * again, so the kernel may let go of their backing files (a
	 * materialized file's space, a deleted raw file's) once those open
	 * now are closed, as after a delete through the mount.  Not a
	 * reloaded series' old directory: its files are still the series'
	 * bytes, which a process inside it may open by name. */
	if (!ck_vnode_is_series_dir(fs->view, n) && ck_view_files_made(fs->view, n, &inos, &count) == 0) {
		for (size_t i = 0; i < count; i++)
			ckfs_passthrough_release(fs, ckfs_fuse_ino(fs, inos[i]));
		free(inos);
	}
}

void ckfs_forget_hidden(struct ckfs *fs)
{
	ck_view_drain_hidden(fs->view, forget_one, fs);
}

static void inval_entry(struct ckfs *fs, fuse_ino_t dir, const char *name)
{
	int rc;

	if (!name)
		return;
	rc = fuse_lowlevel_notify_inval_entry(fs->se, dir, name, strlen(name));
	if (rc && rc != -ENOENT)
		ck_debug("invalidating %s: %s", name, strerror(-rc));
}

void ckfs_inval_commit_names(struct ckfs *fs, fuse_ino_t dir, const char *old_name, const char *new_name)
{
	ckfs_forget_hidden(fs);	/* a reloaded series' old name */
	if (!dir)
		return;	/* a new series: the root changed in the catch-up */
	inval_entry(fs, dir, old_name);
	if (!old_name || strcmp(old_name, new_name) != 0)
		inval_entry(fs, dir, new_name);
	fuse_lowlevel_notify_inval_inode(fs->se, dir, 0, 0);
}

static void inodes_changed(void *ctx, const uint64_t *inos, size_t n)
{
	ckfs_inval_inodes(ctx, inos, n);
}

static void names_changed(void *ctx, const char *series, const char *old_name, const char *new_name)
{
	struct ckfs *fs = ctx;

	if (!series)
		ckfs_forget_hidden(fs);
	else
		ckfs_inval_commit_names(fs, ckfs_series_dir_ino(fs, series), old_name, new_name);
}

static void committed(void *ctx, const char *series, const char *name)
{
	ckfs_health_committed(ctx, series, name);   /* answers the series' emergency flag */
}

void ckfs_writer_notify(struct ckfs *fs, struct ck_writer_notify *out)
{
	out->ctx = fs;
	out->inodes_changed = inodes_changed;
	out->names_changed = names_changed;
	out->committed = committed;
}
