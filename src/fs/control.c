/* Control files in the mount: a thin adapter over include/ckptfs/ctl.h.
 *
 * The operation table the daemon serves is the read-only or writable one
 * with the operations that can meet a control file wrapped: a request
 * about a control inode (CK_CTL_INO_BIT), a lookup of .ckptfs in the root
 * or of a series file (the GPU health flag) in a series directory, is
 * answered here; every other request goes on to fs->base_ops unchanged.
 * Control files are read-only and change under their readers, so their
 * entries and attributes are never cached and an open reads one snapshot
 * taken at open (direct I/O: the size of the snapshot, not of the getattr
 * before it, is what a reader gets). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/ctl.h"
#include "ckptfs/writer_staging.h"
#include "control.h"
#include "dirs.h"
#include "health.h"
#include "mount.h"

static void fill_stat(const struct ckfs *fs, uint64_t ino, const struct ck_ctl_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = a->mode;
	st->st_nlink = S_ISDIR(a->mode) ? 2 : 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_mtim.tv_sec = a->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a->mtime_ns % 1000000000;
	st->st_atim = st->st_ctim = st->st_mtim;
}

static int ctl_entry(struct ckfs *fs, uint64_t ino, struct fuse_entry_param *e)
{
	struct ck_ctl_attr a;
	int rc = ck_ctl_getattr(fs->ctl, ino, &a);

	if (rc)
		return rc;
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->generation = 1;
	fill_stat(fs, ino, &a, &e->attr);
	/* The directory stays; its files come and go and change. */
	e->entry_timeout = S_ISDIR(a.mode) ? fs->cfg->entry_timeout : 0;
	e->attr_timeout = S_ISDIR(a.mode) ? fs->cfg->attr_timeout : 0;
	return 0;
}

/* The series whose directory ino is, or NULL (allocated). */
static char *series_dir_of(struct ckfs *fs, fuse_ino_t ino)
{
	struct ckfs_dir_ctx c;
	char *series = NULL;

	if (ino == FUSE_ROOT_ID || ck_ctl_is_ino(ino) || ckfs_dir_ctx(fs, ino, &c))
		return NULL;
	if (c.kind == CKFS_DIR_SERIES) {
		series = c.series;
		c.series = NULL;
	}
	ckfs_dir_ctx_free(&c);
	return series;
}

/* The series a new entry (parent, name) is written into, or NULL
 * (allocated): the new series itself in the root, else the series of the
 * directory it is made in. */
static char *written_series(struct ckfs *fs, fuse_ino_t parent, const char *name)
{
	char *series = NULL, *top = NULL;

	if (parent == FUSE_ROOT_ID)
		return strdup(name);
	if (ck_staging_is_staged(parent) && fs->staging && ck_staging_top_of(fs->staging, parent, &series, &top) == 0) {
		free(top);
		return series;
	}
	return series_dir_of(fs, parent);
}

static void ctl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ckfs *fs = ckfs_of(req);
	struct fuse_entry_param e;
	uint64_t ino = 0;
	char *series;
	int rc = -ENOENT;

	if (parent == FUSE_ROOT_ID && strcmp(name, CK_CTL_DIR_NAME) == 0) {
		rc = ctl_entry(fs, ck_ctl_dir_ino(), &e);
	} else if (parent == ck_ctl_dir_ino()) {
		rc = ck_ctl_lookup(fs->ctl, name, &ino);
		rc = rc ? rc : ctl_entry(fs, ino, &e);
	} else if (ck_ctl_is_ino(parent)) {
		rc = -ENOTDIR;
	} else if (!ck_ctl_is_ino(parent) && ck_ctl_is_series_file(fs->ctl, name) &&
		   (series = series_dir_of(fs, parent))) {
		rc = ck_ctl_lookup_series(fs->ctl, series, name, &ino);
		rc = rc ? rc : ctl_entry(fs, ino, &e);
		free(series);
	} else {
		fs->base_ops->lookup(req, parent, name);
		return;
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void ctl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_ctl_attr a;
	struct stat st;
	int rc;

	if (!ck_ctl_is_ino(ino)) {
		fs->base_ops->getattr(req, ino, fi);
		return;
	}
	rc = ck_ctl_getattr(fs->ctl, ino, &a);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fill_stat(fs, ino, &a, &st);
	fuse_reply_attr(req, &st, 0);
}

static void ctl_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->access(req, ino, mask);
	else
		fuse_reply_err(req, mask & W_OK ? EACCES : 0);
}

static void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_buf *snap;
	int rc;

	if (!ck_ctl_is_ino(ino)) {
		fs->base_ops->open(req, ino, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	snap = calloc(1, sizeof(*snap));
	if (!snap) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = ck_ctl_render(fs->ctl, ino, snap);
	if (rc) {
		ck_buf_free(snap);
		free(snap);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)snap;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (fuse_reply_open(req, fi) == -ENOENT) {   /* interrupted: no release comes */
		ck_buf_free(snap);
		free(snap);
	}
}

static void ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	const struct ck_buf *snap;

	if (!ck_ctl_is_ino(ino)) {
		ckfs_of(req)->base_ops->read(req, ino, size, off, fi);
		return;
	}
	snap = (const struct ck_buf *)(uintptr_t)fi->fh;
	if (off < 0 || (uint64_t)off >= snap->len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, (const char *)snap->data + off,
			       size < snap->len - (size_t)off ? size : snap->len - (size_t)off);
}

static void ctl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ck_buf *snap;

	if (!ck_ctl_is_ino(ino)) {
		ckfs_of(req)->base_ops->release(req, ino, fi);
		return;
	}
	snap = (struct ck_buf *)(uintptr_t)fi->fh;
	ck_buf_free(snap);
	free(snap);
	fuse_reply_err(req, 0);
}

static void ctl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->opendir(req, ino, fi);
	else if (ino != ck_ctl_dir_ino())
		fuse_reply_err(req, ENOTDIR);
	else
		fuse_reply_open(req, fi);
}

/* The control directory's listing: ".", "..", then its files. */
static void ctl_dir_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct ckfs *fs = ckfs_of(req);
	char *buf = calloc(1, size ? size : 1);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t i = off; ; i++) {
		struct fuse_entry_param e;
		const char *name;
		uint64_t child;
		size_t len;

		memset(&e, 0, sizeof(e));
		if (i < 2) {
			name = i == 0 ? "." : "..";
			child = i == 0 ? ino : FUSE_ROOT_ID;
			e.attr.st_ino = child;
			e.attr.st_mode = S_IFDIR;
		} else if (ck_ctl_dir_entry(fs->ctl, (size_t)(i - 2), &name, &child) == 0) {
			if (ctl_entry(fs, child, &e))
				continue;
		} else {
			break;
		}
		if (plus) {
			/* "." and ".." carry no lookup count; files do. */
			if (i < 2)
				e.ino = 0;
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
		} else {
			len = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, i + 1);
		}
		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->readdir(req, ino, size, off, fi);
	else
		ctl_dir_read(req, ino, size, off, 0);
}

static void ctl_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->readdirplus(req, ino, size, off, fi);
	else
		ctl_dir_read(req, ino, size, off, 1);
}

static void ctl_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->releasedir(req, ino, fi);
	else
		fuse_reply_err(req, 0);
}

static void ctl_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->getxattr(req, ino, name, size);
	else
		fuse_reply_err(req, ENODATA);
}

static void ctl_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->listxattr(req, ino, size);
	else if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

static void ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	if (!ck_ctl_is_ino(ino))
		ckfs_of(req)->base_ops->setattr(req, ino, attr, to_set, fi);
	else
		fuse_reply_err(req, EPERM);
}

/* A name of the control space: .ckptfs in the root, a series file in a
 * series directory.  Nothing may be made, removed or renamed there. */
static int ctl_name(struct ckfs *fs, fuse_ino_t parent, const char *name)
{
	char *series;

	if (ck_ctl_is_ino(parent) || (parent == FUSE_ROOT_ID && strcmp(name, CK_CTL_DIR_NAME) == 0))
		return 1;
	if (!ck_ctl_is_series_file(fs->ctl, name) || !(series = series_dir_of(fs, parent)))
		return 0;
	free(series);
	return 1;
}

static void note_write(struct ckfs *fs, fuse_ino_t parent, const char *name)
{
	char *series;

	if (!fs->health || !fs->staging)   /* no watcher, or a read-only mount */
		return;
	series = written_series(fs, parent, name);
	if (series)
		ckfs_health_wrote(fs, series);
	free(series);
}

static void ctl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ckfs *fs = ckfs_of(req);

	if (ctl_name(fs, parent, name)) {
		fuse_reply_err(req, ck_ctl_is_ino(parent) ? EROFS : EEXIST);
		return;
	}
	note_write(fs, parent, name);
	fs->base_ops->mkdir(req, parent, name, mode);
}

static void ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);

	if (ctl_name(fs, parent, name)) {
		fuse_reply_err(req, ck_ctl_is_ino(parent) ? EROFS : EEXIST);
		return;
	}
	note_write(fs, parent, name);
	fs->base_ops->create(req, parent, name, mode, fi);
}

static void ctl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ckfs *fs = ckfs_of(req);

	if (ctl_name(fs, parent, name))
		fuse_reply_err(req, EPERM);
	else
		fs->base_ops->unlink(req, parent, name);
}

static void ctl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ckfs *fs = ckfs_of(req);

	if (ctl_name(fs, parent, name))
		fuse_reply_err(req, EPERM);
	else
		fs->base_ops->rmdir(req, parent, name);
}

static void ctl_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	struct ckfs *fs = ckfs_of(req);

	if (ctl_name(fs, parent, name) || ctl_name(fs, newparent, newname))
		fuse_reply_err(req, EPERM);
	else
		fs->base_ops->rename(req, parent, name, newparent, newname, flags);
}

void ckfs_ctl_table(const struct fuse_lowlevel_ops *base, struct fuse_lowlevel_ops *out)
{
	*out = *base;
	out->lookup = ctl_lookup;
	out->getattr = ctl_getattr;
	out->access = ctl_access;
	out->open = ctl_open;
	out->read = ctl_read;
	out->release = ctl_release;
	out->opendir = ctl_opendir;
	out->readdir = ctl_readdir;
	out->readdirplus = ctl_readdirplus;
	out->releasedir = ctl_releasedir;
	out->getxattr = ctl_getxattr;
	out->listxattr = ctl_listxattr;
	out->setattr = ctl_setattr;
	out->mkdir = ctl_mkdir;
	out->create = ctl_create;
	out->unlink = ctl_unlink;
	out->rmdir = ctl_rmdir;
	out->rename = ctl_rename;
}
