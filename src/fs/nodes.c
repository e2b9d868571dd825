/* The view's nodes as FUSE nodes (nodes.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "nodes.h"

uint64_t ckfs_fuse_ino(const struct ckfs *fs, uint64_t ino)
{
	if (ino == fs->root_ino)
		return FUSE_ROOT_ID;
	if (ino == FUSE_ROOT_ID)
		return fs->root_ino;
	return ino;
}

const struct ck_vnode *ckfs_node(struct ckfs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return ck_view_root(fs->view);
	return ck_view_node(fs->view, ckfs_fuse_ino(fs, ino));
}

int ckfs_stat(struct ckfs *fs, const struct ck_vnode *n, struct stat *st)
{
	struct ck_vattr a;
	int rc = ck_view_getattr(fs->view, n, &a);

	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->st_ino = a.ino;
	st->st_mode = a.mode;
	st->st_nlink = a.nlink;
	st->st_size = (off_t)a.size;
	st->st_blocks = (blkcnt_t)((a.size + 511) / 512);
	st->st_blksize = CKFS_BLKSIZE;
	st->st_uid = a.uid;
	st->st_gid = a.gid;
	st->st_mtim.tv_sec = a.mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a.mtime_ns % 1000000000;
	if (st->st_mtim.tv_nsec < 0) {
		st->st_mtim.tv_sec--;
		st->st_mtim.tv_nsec += 1000000000;
	}
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
	return 0;
}

int ckfs_fill_entry(struct ckfs *fs, const struct ck_vnode *n, struct fuse_entry_param *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	rc = ckfs_stat(fs, n, &e->attr);
	if (rc)
		return rc;
	e->ino = ckfs_fuse_ino(fs, e->attr.st_ino);
	e->generation = 1;	/* nodes are never reused while mounted */
	e->attr_timeout = fs->cfg->attr_timeout;
	e->entry_timeout = fs->cfg->entry_timeout;
	return 0;
}

int ckfs_view_entry(struct ckfs *fs, fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	const struct ck_vnode *dir = ckfs_node(fs, parent);
	const struct ck_vnode *child;
	int rc;

	if (!dir)
		return -ESTALE;
	rc = ck_view_lookup(fs->view, dir, name, &child);
	return rc ? rc : ckfs_fill_entry(fs, child, e);
}

fuse_ino_t ckfs_series_dir_ino(struct ckfs *fs, const char *series)
{
	const struct ck_vnode *n;
	struct ck_vattr a;

	if (ck_view_lookup(fs->view, ck_view_root(fs->view), series, &n) ||
	    ck_view_getattr(fs->view, n, &a))
		return 0;
	return ckfs_fuse_ino(fs, a.ino);
}
