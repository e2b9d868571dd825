/* The control directory in the mount, MNT/.ckptfs (include/ckptfs/ctldir.h),
 * and the series files registered there (MNT/SERIES/NAME: the GPU health
 * flag).
 *
 * The daemon's operation table (read-only or writable) is wrapped: a
 * request about an inode of the control directory (CK_CTL_INO_BIT), the
 * lookup of ".ckptfs" in the root or of a series file's name in a series
 * directory, goes to the FUSE-free src/ctl; every other request to the
 * table wrapped, unchanged, after noting for the GPU health watcher which
 * series a mkdir or create writes into (health.h).  The root's listing never
 * has .ckptfs (the view's listing is served as before), so ls, du, cp -r
 * and rsync of the mount see no view twice; a lookup by name finds it.
 *
 * Names are cached by the kernel for a second at most (they follow the
 * store), attributes as long as the view's (a node's bytes never change).
 * Directory handles hold the listing taken at OPENDIR.  READDIRPLUS gives
 * names and types only (no attributes): a file's size may mean building it
 * (a layer's safetensors header), which a listing must not wait for.
 * Files are ck_vfiles like composites and are read by the same code
 * (read.c); they keep the page cache (their bytes never change), except
 * registered volatile entries, opened with direct I/O.
 *
 * Owners and modes are src/ctl's (ck_ctl_getattr), which the kernel checks
 * (default_permissions); as for composites, the daemon adds at open and for
 * the attributes what one mode cannot say: the physical files a file reads
 * (ck_ctl_access).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/ctldir.h"
#include "ckptfs/writer_staging.h"
#include "control.h"
#include "creds.h"
#include "dirs.h"
#include "health.h"
#include "mount.h"
#include "read.h"

/* The table wrapped (one session per daemon). */
static const struct fuse_lowlevel_ops *base_ops;

static int is_ctl(fuse_ino_t ino)
{
	return ck_ctl_owns(ino);
}

/* Whether the user of req may do mask on node ino (ck_ctl_access): the
 * kernel checks the modes shown; this adds the physical files a file
 * reads.  Always 0 with -o nopermissions, and for root. */
static int ctl_may(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ckfs_cred c;
	int rc;

	if (!ckfs_checks(req))
		return 0;
	ckfs_cred_get(req, &c);
	rc = ck_ctl_access(ckfs_of(req)->ctl, ino, &c.c, mask);
	ckfs_cred_put(&c);
	return rc;
}

static void to_stat(const struct ck_vattr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_blksize = CKFS_BLKSIZE;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_mtim.tv_sec = a->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a->mtime_ns % 1000000000;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static void reply_entry(fuse_req_t req, struct ckfs *fs, int rc, const struct ck_vattr *a)
{
	struct fuse_entry_param e;

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&e, 0, sizeof(e));
	to_stat(a, &e.attr);
	e.ino = a->ino;
	e.generation = 1;    /* never reused while mounted */
	e.attr_timeout = ck_ctl_volatile(fs->ctl, a->ino) ? 0 : fs->cfg->attr_timeout;
	/* Names follow the store (a checkpoint deleted leaves weights/,
	 * layers/...): cached a second at most, a recipe's not at all. */
	e.entry_timeout = ck_ctl_renamable(fs->ctl, a->ino) ? 0 : fs->cfg->entry_timeout < 1 ? fs->cfg->entry_timeout : 1;
	fuse_reply_entry(req, &e);
}

/* The series whose committed or in-progress series directory ino is, or
 * NULL (allocated). */
static char *series_dir_of(struct ckfs *fs, fuse_ino_t ino)
{
	struct ckfs_dir_ctx c;
	char *series = NULL;

	if (ino == FUSE_ROOT_ID || is_ctl(ino) || ckfs_dir_ctx(fs, ino, &c))
		return NULL;
	if (c.kind == CKFS_DIR_SERIES) {
		series = c.series;
		c.series = NULL;
	}
	ckfs_dir_ctx_free(&c);
	return series;
}

/* Whether name in parent is a series file's place. */
static int series_file_name(struct ckfs *fs, fuse_ino_t parent, const char *name)
{
	char *series;

	if (!ck_ctl_is_series_file(fs->ctl, name) || !(series = series_dir_of(fs, parent)))
		return 0;
	free(series);
	return 1;
}

static void ctl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_vattr a;
	char *series;

	if (parent == FUSE_ROOT_ID && !strcmp(name, CK_CTL_NAME)) {
		reply_entry(req, fs, ck_ctl_getattr(fs->ctl, CK_CTL_ROOT_INO, &a), &a);
	} else if (is_ctl(parent)) {
		reply_entry(req, fs, ck_ctl_lookup(fs->ctl, parent, name, &a), &a);
	} else if (ck_ctl_is_series_file(fs->ctl, name) && (series = series_dir_of(fs, parent))) {
		reply_entry(req, fs, ck_ctl_lookup_series_file(fs->ctl, series, name, &a), &a);
		free(series);
	} else {
		base_ops->lookup(req, parent, name);
	}
}

static void ctl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_vattr a;
	struct stat st;
	int rc;

	if (!is_ctl(ino)) {
		base_ops->getattr(req, ino, fi);
		return;
	}
	rc = ck_ctl_getattr(fs->ctl, ino, &a);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	to_stat(&a, &st);
	fuse_reply_attr(req, &st, ck_ctl_volatile(fs->ctl, ino) ? 0 : fs->cfg->attr_timeout);
}

static void ctl_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_vattr a;
	int rc;

	if (!is_ctl(ino)) {
		base_ops->access(req, ino, mask);
		return;
	}
	rc = ck_ctl_getattr(fs->ctl, ino, &a);
	if (!rc && (mask & W_OK))
		rc = -EROFS;
	if (!rc)
		rc = ctl_may(req, ino, mask & (R_OK | X_OK));
	fuse_reply_err(req, -rc);
}

/* A directory handle: the listing taken at opendir. */
struct ctl_listing {
	struct ck_ctl_dirent *d;
	size_t n;
};

static void ctl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ctl_listing *l;
	int rc;

	if (!is_ctl(ino)) {
		base_ops->opendir(req, ino, fi);
		return;
	}
	l = calloc(1, sizeof(*l));
	rc = l ? ck_ctl_readdir(fs->ctl, ino, &l->d, &l->n) : -ENOMEM;
	if (rc) {
		free(l);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l;
	fi->cache_readdir = 0;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		ck_ctl_dirents_free(l->d, l->n);   /* interrupted: no RELEASEDIR will come */
		free(l);
	}
}

static void ctl_readdir_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi,
			    int plus)
{
	struct ctl_listing *l = (struct ctl_listing *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t pos = off; pos < (off_t)l->n + 2; pos++) {
		struct fuse_entry_param e;
		const char *name = pos == 0 ? "." : pos == 1 ? ".." : l->d[pos - 2].name;
		size_t len;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = pos < 2 ? ino : l->d[pos - 2].ino;
		e.attr.st_mode = pos < 2 || l->d[pos - 2].is_dir ? S_IFDIR : S_IFREG;
		/* ino 0 in READDIRPLUS: a name and a type, no entry to cache. */
		if (plus)
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, pos + 1);
		else
			len = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, pos + 1);
		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (is_ctl(ino))
		ctl_readdir_any(req, ino, size, off, fi, 0);
	else
		base_ops->readdir(req, ino, size, off, fi);
}

static void ctl_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (is_ctl(ino))
		ctl_readdir_any(req, ino, size, off, fi, 1);
	else
		base_ops->readdirplus(req, ino, size, off, fi);
}

static void ctl_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ctl_listing *l = (struct ctl_listing *)(uintptr_t)fi->fh;

	if (!is_ctl(ino)) {
		base_ops->releasedir(req, ino, fi);
		return;
	}
	ck_ctl_dirents_free(l->d, l->n);
	free(l);
	fuse_reply_err(req, 0);
}

static void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_vfile *f;
	int rc;

	if (!is_ctl(ino)) {
		base_ops->open(req, ino, fi);
		return;
	}
	if (ckfs_refuse_write_open(req, fi))
		return;
	rc = ck_ctl_open_file(fs->ctl, ino, &f);
	/* After the open, which looked at the sources' owners and modes now. */
	if (!rc && (rc = ctl_may(req, ino, CK_MAY_READ)) != 0)
		ck_vfile_put(f);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	ckfs_hold_vfile(fi, f);
	ckfs_reply_open_vfile(req, fi, f, ck_ctl_volatile(fs->ctl, ino));
}

static void ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (is_ctl(ino))
		ckfs_op_read(req, ino, size, off, fi);   /* a ck_vfile, as a composite's */
	else
		base_ops->read(req, ino, size, off, fi);
}

static void ctl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (is_ctl(ino))
		ckfs_op_release(req, ino, fi);
	else
		base_ops->release(req, ino, fi);
}

static void reply_xattr(fuse_req_t req, int rc, const struct ck_buf *v, size_t size)
{
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, v->len);
	else if (v->len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, (const char *)v->data, v->len);
}

static void ctl_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ck_buf v = CK_BUF_INIT;
	int rc;

	if (!is_ctl(ino)) {
		base_ops->getxattr(req, ino, name, size);
		return;
	}
	/* Provenance names the physical files: for whoever may read them all. */
	rc = ctl_may(req, ino, CK_MAY_READ);
	if (!rc)
		rc = ck_ctl_getxattr(ckfs_of(req)->ctl, ino, name, &v);
	reply_xattr(req, rc, &v, size);
	ck_buf_free(&v);
}

static void ctl_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ck_buf v = CK_BUF_INIT;

	if (!is_ctl(ino)) {
		base_ops->listxattr(req, ino, size);
		return;
	}
	reply_xattr(req, ck_ctl_listxattr(ckfs_of(req)->ctl, ino, &v), &v, size);
	ck_buf_free(&v);
}

/* Changes: nothing under .ckptfs can change, .ckptfs itself cannot be
 * made, removed or renamed in the root, nor a series file's name in a
 * series directory. */
static int refuse(struct ckfs *fs, fuse_ino_t parent, const char *name)
{
	return is_ctl(parent) || (parent == FUSE_ROOT_ID && name && !strcmp(name, CK_CTL_NAME)) ||
	       (name && series_file_name(fs, parent, name));
}

/* The GPU health watcher flags only series written through the mount:
 * the new series itself in the root, else the series of the directory
 * (committed or in progress) written into. */
static void note_write(struct ckfs *fs, fuse_ino_t parent, const char *name)
{
	char *series = NULL, *top = NULL;

	if (!fs->health || !fs->staging)   /* no watcher, or a read-only mount */
		return;
	if (parent == FUSE_ROOT_ID)
		series = strdup(name);
	else if (ck_staging_is_staged(parent) && ck_staging_top_of(fs->staging, parent, &series, &top) == 0)
		free(top);
	else
		series = series_dir_of(fs, parent);
	if (series)
		ckfs_health_wrote(fs, series);
	free(series);
}

static void ctl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ckfs *fs = ckfs_of(req);

	if (refuse(fs, parent, name)) {
		fuse_reply_err(req, is_ctl(parent) ? EROFS : EEXIST);
		return;
	}
	note_write(fs, parent, name);
	base_ops->mkdir(req, parent, name, mode);
}

static void ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);

	if (refuse(fs, parent, name)) {
		fuse_reply_err(req, is_ctl(parent) ? EROFS : EEXIST);
		return;
	}
	note_write(fs, parent, name);
	base_ops->create(req, parent, name, mode, fi);
}

static void ctl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (refuse(ckfs_of(req), parent, name))
		fuse_reply_err(req, EROFS);
	else
		base_ops->unlink(req, parent, name);
}

static void ctl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (refuse(ckfs_of(req), parent, name))
		fuse_reply_err(req, EROFS);
	else
		base_ops->rmdir(req, parent, name);
}

static void ctl_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	struct ckfs *fs = ckfs_of(req);

	if (refuse(fs, parent, name) || refuse(fs, newparent, newname))
		fuse_reply_err(req, EROFS);
	else
		base_ops->rename(req, parent, name, newparent, newname, flags);
}

static void ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	if (is_ctl(ino))
		fuse_reply_err(req, EROFS);
	else
		base_ops->setattr(req, ino, attr, to_set, fi);
}

static void ctl_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			 int flags)
{
	if (is_ctl(ino))
		fuse_reply_err(req, EROFS);
	else
		base_ops->setxattr(req, ino, name, value, size, flags);
}

void ckfs_control_ops(const struct fuse_lowlevel_ops *base, struct fuse_lowlevel_ops *out)
{
	base_ops = base;
	*out = *base;
	out->lookup = ctl_lookup;
	out->getattr = ctl_getattr;
	out->access = ctl_access;
	out->opendir = ctl_opendir;
	out->readdir = ctl_readdir;
	out->readdirplus = ctl_readdirplus;
	out->releasedir = ctl_releasedir;
	out->open = ctl_open;
	out->read = ctl_read;
	out->release = ctl_release;
	out->getxattr = ctl_getxattr;
	out->listxattr = ctl_listxattr;
	out->mkdir = ctl_mkdir;
	out->create = ctl_create;
	out->unlink = ctl_unlink;
	out->rmdir = ctl_rmdir;
	out->rename = ctl_rename;
	out->setattr = ctl_setattr;
	out->setxattr = ctl_setxattr;
}
