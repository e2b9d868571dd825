/* The writable mount's operations on inodes, and its table.  Each request
 * goes to the view (committed checkpoints: read-only, EROFS for changes)
 * or, for an inode of the in-progress space, to the real file or
 * directory under STORE/staging: file handles are real fds (directories:
 * DIR *), writes go straight to them, bytes never stay in memory.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/writer.h"
#include "ckptfs/writer_rules.h"
#include "ckptfs/writer_staging.h"
#include "ckptfs/writer_staged_ops.h"
#include "store/staging.h"
#include "creds.h"
#include "dirs.h"
#include "listing.h"
#include "names.h"
#include "nodes.h"
#include "ops.h"
#include "read.h"
#include "readonly.h"
#include "tables.h"
#include "xattr.h"

#define COMMIT_XATTR "user.ckptfs.commit"
#define STATE_XATTR "user.ckptfs.state"

/* A staged file's handle: its descriptor, and whether it counts as
 * open for writing (a create counts so whatever its flags: it made the
 * file; the release must uncount what the open counted). */
#define FH_WRITING ((uint64_t)1 << 32)

static int fd_of(const struct fuse_file_info *fi)
{
	return (int)(fi->fh & 0xffffffffu);
}

static int fh_writing(const struct fuse_file_info *fi)
{
	return (fi->fh & FH_WRITING) != 0;
}

static uint64_t staged_fh(int fd, int writing)
{
	return (uint64_t)(unsigned)fd | (writing ? FH_WRITING : 0);
}

/* The view's node of staged node ino (at path) as committed: a marker
 * commit moved its directory into the store, maybe between the kernel's
 * lookup of the node and this request.  Waits for the commit to finish
 * (the view caught up by then).  0 with *out, or -ENOENT. */
static int committed_node(struct ckfs *fs, fuse_ino_t ino, const char *path, const struct ck_vnode **out)
{
	char *series = NULL, *name = NULL, *top = NULL, *vpath = NULL;
	int rc = -ENOENT;

	if (ck_staging_top_of(fs->staging, ino, &series, &name))
		return -ENOENT;
	ck_staging_wait_unclaimed(fs->staging, series, name);
	top = ck_staging_top_path(fs->staging, series, name);
	if (top && strncmp(path, top, strlen(top)) == 0 &&
	    asprintf(&vpath, "%s/%s%s", series, name, path + strlen(top)) >= 0 &&
	    (ck_view_resolve(fs->view, vpath, out) == 0 ||
	     (ck_writer_moved_elsewhere(fs->writer, series, name) && ck_view_resolve(fs->view, vpath, out) == 0)))
		rc = 0;
	free(vpath);
	free(top);
	free(series);
	free(name);
	return rc;
}

/* What an open of staged node ino (at path) that failed with rc answers:
 * -ESTALE when the node's checkpoint was committed under it, so the
 * kernel walks the path again (LOOKUP_REVAL) and opens the committed
 * node; rc otherwise. */
static int staged_open_error(struct ckfs *fs, fuse_ino_t ino, const char *path, int rc)
{
	const struct ck_vnode *n;

	if (rc == -ENOENT && committed_node(fs, ino, path, &n) == 0)
		return -ESTALE;
	return rc;
}

/* stat of a staged node, with our inode number. */
static int staged_stat(struct ckfs *fs, fuse_ino_t ino, struct stat *st)
{
	const struct ck_vnode *n;
	char *path = NULL;
	int rc = ck_staged_stat(fs->staging, ino, st);

	if (rc == -ENOENT && ck_staging_path(fs->staging, ino, NULL, &path) == 0 &&
	    (rc = committed_node(fs, ino, path, &n)) == 0)
		rc = ckfs_stat(fs, n, st);
	free(path);
	st->st_ino = ino;
	return rc;
}

/* What an open of staged node ino that failed with rc answers (for
 * staged_open_error, which needs the node's path). */
static int staged_open_failed(struct ckfs *fs, fuse_ino_t ino, int rc)
{
	char *path = NULL;

	if (rc == -ENOENT && ck_staging_path(fs->staging, ino, NULL, &path) == 0)
		rc = staged_open_error(fs, ino, path, rc);
	free(path);
	return rc;
}

static void reply_staged_attr(fuse_req_t req, fuse_ino_t ino)
{
	struct stat st;
	int rc = staged_stat(ckfs_of(req), ino, &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

static void rw_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	if (ck_staging_is_staged(ino))
		ck_staging_forget(ckfs_of(req)->staging, ino, nlookup);
	fuse_reply_none(req);
}

static void rw_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct ckfs *fs = ckfs_of(req);

	for (size_t i = 0; i < count; i++)
		if (ck_staging_is_staged(forgets[i].ino))
			ck_staging_forget(fs->staging, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void rw_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ck_staging_is_staged(ino))
		reply_staged_attr(req, ino);
	else
		ckfs_op_getattr(req, ino, fi);
}

static void rw_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_staged_at at;
	int rc;

	if (!ck_staging_is_staged(ino)) {
		struct ckfs_dir_ctx c;

		/* Root and series directories take new directories. */
		if (ckfs_dir_ctx(fs, ino, &c) == 0 && (c.kind == CKFS_DIR_ROOT || c.kind == CKFS_DIR_SERIES))
			mask &= ~W_OK;
		ckfs_dir_ctx_free(&c);
		ckfs_op_access(req, ino, mask);
		return;
	}
	rc = ck_staging_at(fs->staging, ino, NULL, &at);
	if (rc == 0 && faccessat(at.dir, at.name, mask, 0) != 0)
		rc = -errno;
	ck_staging_at_free(&at);
	fuse_reply_err(req, -rc);
}

/* Handles of staged series nodes are listings, tagged in the low bit
 * (both kinds of handle are malloc'd, so aligned). */
#define SERIES_LISTING 1u

/* Whether ino is a staged series node (a series with no committed
 * checkpoint when it was looked up): its handles are listings (listing.c),
 * which go on showing its checkpoints as they commit into the view. */
static int is_staged_series(struct ck_staging *s, fuse_ino_t ino, char **series)
{
	return ck_staging_is_staged(ino) && ck_staging_series(s, ino, series) == 0;
}

static void staged_series_opendir(fuse_req_t req, const char *series, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_listing *l;
	int rc = ckfs_listing_open(fs, series, &l);

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l | SERIES_LISTING;
	if (fuse_reply_open(req, fi) == -ENOENT)
		ckfs_listing_close(fs, l);
}

/* The listing of a staged series node's handle, or NULL for a staged
 * directory's (a struct ck_staged_dir). */
static struct ckfs_listing *series_listing(const struct fuse_file_info *fi)
{
	if (!(fi->fh & SERIES_LISTING))
		return NULL;
	return (struct ckfs_listing *)(uintptr_t)(fi->fh & ~(uint64_t)SERIES_LISTING);
}

static void rw_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ck_staging *s = ckfs_of(req)->staging;
	struct ck_staged_dir *d = NULL;
	char *series;
	int rc;

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_opendir(req, ino, fi);
		return;
	}
	if (is_staged_series(s, ino, &series)) {
		staged_series_opendir(req, series, fi);
		free(series);
		return;
	}
	ck_crash_point("staged-open");   /* test hook: looked up, not yet opened */
	rc = staged_open_failed(ckfs_of(req), ino, ck_staging_opendir(s, ino, &d));
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT)
		ck_staging_closedir(s, d);
}

/* A real directory's entries from off on (telldir positions).  Entries
 * carry no node (ino 0 in readdirplus): the kernel looks them up. */
static void staged_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi, int plus)
{
	DIR *d = ck_staged_dir_stream((struct ck_staged_dir *)(uintptr_t)fi->fh);
	char *buf = malloc(size ? size : 1);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off == 0)
		rewinddir(d);
	else
		seekdir(d, off);
	for (;;) {
		struct fuse_entry_param e;
		struct dirent *de;
		size_t len;
		off_t next;

		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		next = telldir(d);
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = de->d_ino;
		e.attr.st_mode = (mode_t)DTTOIF(de->d_type);
		if (plus)
			len = fuse_add_direntry_plus(req, buf + used, size - used, de->d_name, &e, next);
		else
			len = fuse_add_direntry(req, buf + used, size - used, de->d_name, &e.attr, next);
		if (len > size - used)
			break;
		used += len;
	}
	if (errno && used == 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void any_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi,
			int plus)
{
	struct stat st;

	if (!ck_staging_is_staged(ino)) {
		if (plus)
			ckfs_op_readdirplus(req, ino, size, off, fi);
		else
			ckfs_op_readdir(req, ino, size, off, fi);
	} else if (series_listing(fi)) {
		memset(&st, 0, sizeof(st));
		st.st_ino = ino;
		st.st_mode = S_IFDIR;
		ckfs_listing_reply(req, NULL, &st, series_listing(fi), size, off, plus);
	} else {
		staged_readdir(req, size, off, fi, plus);
	}
}

static void rw_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	any_readdir(req, ino, size, off, fi, 0);
}

static void rw_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	any_readdir(req, ino, size, off, fi, 1);
}

static void rw_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!ck_staging_is_staged(ino)) {
		ckfs_op_releasedir(req, ino, fi);
		return;
	}
	if (series_listing(fi)) {
		ckfs_listing_close(ckfs_of(req), series_listing(fi));
		fuse_reply_err(req, 0);
		return;
	}
	ck_staging_closedir(ckfs_of(req)->staging, (struct ck_staged_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* Where create may make a file: inside an in-progress directory, or a
 * series marker right in a series directory (elsewhere EPERM: a series
 * holds checkpoints; EROFS in a committed one).  Where the new name is,
 * node parent, series (for a marker) and owner of the directory of the
 * new name; 0 or -errno. */
static int create_target(struct ckfs *fs, fuse_ino_t parent, const char *name, struct ck_staged_at *at,
			 uint64_t *node_parent, char **series, struct ck_owner *dir_owner)
{
	struct ckfs_dir_ctx c;
	int rc = ckfs_dir_ctx(fs, parent, &c);

	if (rc)
		return rc;
	if (c.kind == CKFS_DIR_STAGED)
		rc = ck_staging_busy(fs->staging, c.staged) ? -EBUSY : 0;
	else if (c.kind == CKFS_DIR_SERIES && ck_rule_series_marker(name))
		rc = 0;
	else
		rc = c.kind == CKFS_DIR_VIEW ? -EROFS : -EPERM;	/* files only inside in-progress directories */
	if (rc == 0)
		rc = ckfs_child_at(fs, &c, name, at);
	if (rc == 0)
		rc = ckfs_dir_owner(fs, &c, dir_owner);
	if (rc == 0 && c.kind == CKFS_DIR_SERIES) {
		/* a series with no staging directory yet: it shows as the series */
		ck_staging_series_dir(fs->staging, c.series, c.view_dir ? dir_owner : NULL);
		*node_parent = 0;
		*series = c.series;
		c.series = NULL;
	} else {
		*node_parent = c.staged;
	}
	ckfs_dir_ctx_free(&c);
	return rc;
}

static void rw_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct fuse_entry_param e;
	struct ck_owner dir_owner;
	struct ck_staged_at at = { -1, NULL };
	char *series = NULL;
	uint64_t node_parent = 0, ino = 0;
	int fd = -1, counted = 0, rc = create_target(fs, parent, name, &at, &node_parent, &series, &dir_owner);

	/* The handle counts (and holds its directory's writers lock, which a
	 * commit on another node may hold) before the file exists. */
	if (rc == 0)
		rc = ck_staging_get(fs->staging, node_parent, series, name, NULL, &ino);
	if (rc == 0) {
		rc = ck_staging_open_begin(fs->staging, ino, 1);
		if (rc)
			ck_staging_forget(fs->staging, ino, 1);
		counted = rc == 0;
	}
	if (rc == 0) {
		/* A file made now belongs to whoever asked; one that was there
		 * already keeps its owner (O_CREAT without O_EXCL). */
		int flags = (fi->flags | O_CLOEXEC | O_NOFOLLOW) & ~O_NOCTTY;

		fd = openat(at.dir, at.name, flags | O_CREAT | O_EXCL, mode);
		if (fd >= 0) {
			struct ckfs_cred c;
			int given;

			ckfs_cred_get(req, &c);
			given = ck_staging_give(NULL, fd, &dir_owner, &c.c, mode, 0);
			ckfs_cred_put(&c);
			if (given < 0)
				ck_warn("%s: cannot give it to its creator: %s", name, strerror(-given));
		} else if (errno == EEXIST && !(fi->flags & O_EXCL)) {
			fd = openat(at.dir, at.name, flags & ~O_CREAT);
		}
		if (fd < 0)
			rc = -errno;
	}
	ck_staging_at_free(&at);
	if (rc == 0) {
		memset(&e, 0, sizeof(e));
		if (fstat(fd, &e.attr) != 0)
			rc = -errno;
		e.ino = ino;
		e.attr.st_ino = ino;
		e.generation = 1;
	}
	free(series);
	if (rc) {
		if (fd >= 0)
			close(fd);
		if (counted) {
			ck_staging_open_end(fs->staging, ino, 1);
			ck_staging_forget(fs->staging, ino, 1);
		}
		fuse_reply_err(req, -rc);
		return;
	}
	ck_staging_hold(fs->staging, ino, fd);
	fi->fh = staged_fh(fd, 1);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		close(fd);
		ck_staging_open_end(fs->staging, ino, 1);
	}
}

static void rw_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	/* What release sees (the kernel drops O_TRUNC from the flags it keeps). */
	int writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	int fd = -1, rc;

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_open(req, ino, fi);
		return;
	}
	/* A truncation is a change too: not while the directory is committed. */
	rc = !writing && (fi->flags & O_TRUNC) && ck_staging_busy(fs->staging, ino) ? -EBUSY :
	     ck_staging_open_begin(fs->staging, ino, writing);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	ck_crash_point("staged-open");   /* test hook: looked up, not yet opened */
	fd = ck_staged_open(fs->staging, ino, fi->flags);
	if (fd < 0) {
		ck_staging_open_end(fs->staging, ino, writing);
		fuse_reply_err(req, -staged_open_failed(fs, ino, fd));
		return;
	}
	ck_staging_hold(fs->staging, ino, fd);
	fi->fh = staged_fh(fd, writing);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		close(fd);
		ck_staging_open_end(fs->staging, ino, writing);
	}
}

static void rw_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_read(req, ino, size, off, fi);
		return;
	}
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = fd_of(fi);
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* The request's bytes go from the FUSE buffer (a spliced pipe when the
 * kernel sent one) straight to the file: no copy out of the pipe first.
 * A short write answers what was written, as pwrite would. */
static void rw_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	ssize_t n;

	if (!ck_staging_is_staged(ino)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	dst.buf[0].fd = fd_of(fi);
	dst.buf[0].pos = off;
	n = fuse_buf_copy(&dst, in, 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* close() of a dup reports delayed write errors, as a local close would. */
static void rw_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc = 0;

	if (ck_staging_is_staged(ino)) {
		int fd = dup(fd_of(fi));

		if (fd < 0 || close(fd) != 0)
			rc = errno;
	}
	fuse_reply_err(req, rc);
}

static void rw_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int rc = 0;

	if (ck_staging_is_staged(ino) && (datasync ? fdatasync(fd_of(fi)) : fsync(fd_of(fi))) != 0)
		rc = errno;
	fuse_reply_err(req, rc);
}

static void rw_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_release(req, ino, fi);
		return;
	}
	int wrote = fh_writing(fi);
	unsigned left;

	close(fd_of(fi));
	left = ck_staging_open_end(fs->staging, ino, wrote);
	fuse_reply_err(req, 0);
	/* After the reply: the last close of a marker may commit. */
	ck_writer_released(fs->writer, ino, wrote, left);
}

static int staged_setattr(fuse_req_t req, struct ckfs *fs, fuse_ino_t ino, const struct stat *attr, int to_set,
			  struct fuse_file_info *fi)
{
	struct ck_staged_set set = { 0 };
	struct ckfs_cred c;
	int rc;

	set.what = (to_set & FUSE_SET_ATTR_MODE ? CK_SET_MODE : 0) | (to_set & FUSE_SET_ATTR_UID ? CK_SET_UID : 0) |
		   (to_set & FUSE_SET_ATTR_GID ? CK_SET_GID : 0) | (to_set & FUSE_SET_ATTR_SIZE ? CK_SET_SIZE : 0) |
		   (to_set & FUSE_SET_ATTR_ATIME ? CK_SET_ATIME : 0) | (to_set & FUSE_SET_ATTR_MTIME ? CK_SET_MTIME : 0);
	set.mode = attr->st_mode;
	set.uid = (uint32_t)attr->st_uid;
	set.gid = (uint32_t)attr->st_gid;
	set.size = attr->st_size;
	set.atime = attr->st_atim;
	set.mtime = attr->st_mtim;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		set.atime.tv_nsec = UTIME_NOW;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		set.mtime.tv_nsec = UTIME_NOW;
	ckfs_cred_get(req, &c);
	rc = ck_staged_setattr(fs->staging, ino, fi ? fd_of(fi) : -1, &c.c, &set);
	ckfs_cred_put(&c);
	return rc;
}

static void rw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	int rc;

	if (!ck_staging_is_staged(ino)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && ck_staging_busy(ckfs_of(req)->staging, ino)) {
		fuse_reply_err(req, EBUSY);	/* being committed */
		return;
	}
	/* Directory handles are DIR *, not fds: use the path for them. */
	if (fi) {
		struct stat st;

		if (staged_stat(ckfs_of(req), ino, &st) == 0 && S_ISDIR(st.st_mode))
			fi = NULL;
	}
	rc = staged_setattr(req, ckfs_of(req), ino, attr, to_set, fi);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_staged_attr(req, ino);
}

/* setxattr user.ckptfs.commit on an in-progress directory commits it:
 * under the name its value gives when that carries a step (ckptctl
 * commit STORE SERIES/DIR FINAL sends it), else under its own name, which
 * must then carry one. */
static void rw_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct ckfs *fs = ckfs_of(req);
	char *series = NULL, *dir = NULL, *final = NULL;
	int rc;

	if (!ck_staging_is_staged(ino)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (strcmp(name, COMMIT_XATTR) != 0) {
		fuse_reply_err(req, -ck_staged_setxattr(fs->staging, ino, name, value, size, flags));
		return;
	}
	rc = ck_staging_top(fs->staging, ino, &series, &dir);
	if (rc == 0)
		rc = ck_writer_commit_target(fs->writer, series, dir, value, size, &final);
	if (rc == 0 && ckfs_checks(req)) {
		/* A commit renames the directory within its series: it needs
		 * what the rename needs, besides the write permission on it
		 * that the kernel checked. */
		struct ckfs_dir_ctx c = { .kind = CKFS_DIR_SERIES, .series = series };
		const struct ck_vnode *n;
		struct ckfs_cred cred;
		struct ck_owner sdir;

		if (ck_view_lookup(fs->view, ck_view_root(fs->view), series, &n) == 0)
			c.view_dir = n;
		rc = ckfs_dir_owner(fs, &c, &sdir);
		ckfs_cred_get(req, &cred);
		if (rc == 0)
			rc = ck_staging_may_commit(fs->staging, series, dir, &sdir, &cred.c);
		ckfs_cred_put(&cred);
	}
	if (rc)
		fuse_reply_err(req, -rc);	/* -EINVAL: no step in the name: rename it instead */
	else
		ckfs_commit_and_reply(req, fs, ckfs_series_dir_ino(fs, series), series, dir, final);
	free(series);
	free(dir);
	free(final);
}

static void reply_xattr_value(fuse_req_t req, const struct ck_buf *v, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, v->len);
	else if (size < v->len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, (const char *)v->data, v->len);
}

/* In-progress regular files have user.ckptfs.state: what the parse at
 * their last close found ("in progress: parsed: torch, 12 tensors",
 * "in progress: does not parse: ...", "in progress: being written"). */
static int staged_state(struct ckfs *fs, fuse_ino_t ino, struct ck_buf *out)
{
	struct stat st;
	char *path = NULL;
	int rc = ck_staged_stat(fs->staging, ino, &st);

	if (rc == 0 && (!S_ISREG(st.st_mode) || ck_staging_is_series_file(fs->staging, ino)))
		rc = -ENODATA;
	if (rc == 0)
		rc = ck_staging_path(fs->staging, ino, NULL, &path);
	if (rc == 0)
		rc = ck_writer_file_state(fs->writer, path, out);
	free(path);
	return rc;
}

/* A user.* attribute of an in-progress node, kept in its real file. */
static void reply_user_xattr(fuse_req_t req, struct ck_staging *s, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	ssize_t n;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = ck_staged_getxattr(s, ino, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void rw_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ck_buf v = CK_BUF_INIT;
	int rc;

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_getxattr(req, ino, name, size);
		return;
	}
	if (strcmp(name, STATE_XATTR) != 0) {
		reply_user_xattr(req, ckfs_of(req)->staging, ino, name, size);
		return;
	}
	rc = staged_state(ckfs_of(req), ino, &v);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_xattr_value(req, &v, size);
	ck_buf_free(&v);
}

static void rw_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ckfs *fs = ckfs_of(req);
	struct ck_buf v = CK_BUF_INIT;
	struct ck_buf names = CK_BUF_INIT;
	ssize_t n;
	int rc = 0;

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_listxattr(req, ino, size);
		return;
	}
	if (staged_state(fs, ino, &v) == 0)
		rc = ck_buf_put(&names, STATE_XATTR, sizeof(STATE_XATTR));
	/* Then the user.* names of the real file (a retry if they grew). */
	for (int tries = 0; rc == 0 && tries < 3; tries++) {
		n = ck_staged_listxattr(fs->staging, ino, NULL, 0);
		if (n < 0) {
			rc = (int)n;
		} else if ((rc = ck_buf_reserve(&names, (size_t)n)) == 0) {
			n = ck_staged_listxattr(fs->staging, ino, (char *)names.data + names.len, (size_t)n);
			if (n == -ERANGE)
				continue;
			if (n < 0)
				rc = (int)n;
			else
				names.len += (size_t)n;
		}
		break;
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_xattr_value(req, &names, size);	/* size 0 is also a valid empty list */
	ck_buf_free(&v);
	ck_buf_free(&names);
}

static void rw_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (!ck_staging_is_staged(ino))
		fuse_reply_err(req, EROFS);
	else
		fuse_reply_err(req, -ck_staged_removexattr(ckfs_of(req)->staging, ino, name));
}

static void rw_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[PATH_MAX];
	ssize_t n;

	if (!ck_staging_is_staged(ino)) {
		ckfs_op_readlink(req, ino);
		return;
	}
	n = ck_staged_readlink(ckfs_of(req)->staging, ino, target, sizeof(target));
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_readlink(req, target);
}

/* fallocate on the real file; a size change is a change: not while committed. */
static void rw_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	int rc = 0;

	if (!ck_staging_is_staged(ino))
		rc = EROFS;
	else if (ck_staging_busy(ckfs_of(req)->staging, ino))
		rc = EBUSY;
	else if (fallocate(fd_of(fi), mode, offset, length) != 0)
		rc = errno;
	fuse_reply_err(req, rc);
}

/* Between two in-progress files the real files copy (reflinks where the
 * store's filesystem has them); from a committed file, EXDEV: the caller
 * copies by reading. */
static void rw_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			       fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
			       int flags)
{
	ssize_t n;

	if (!ck_staging_is_staged(ino_out)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!ck_staging_is_staged(ino_in)) {
		fuse_reply_err(req, EXDEV);
		return;
	}
	if (ck_staging_busy(ckfs_of(req)->staging, ino_out)) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	n = copy_file_range(fd_of(fi_in), &off_in, fd_of(fi_out), &off_out, len, (unsigned)flags);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

const struct fuse_lowlevel_ops ckfs_rw_ops = {
	.init = ckfs_op_init,
	.lookup = ckfs_rw_lookup,
	.forget = rw_forget,
	.forget_multi = rw_forget_multi,
	.getattr = rw_getattr,
	.opendir = rw_opendir,
	.readdir = rw_readdir,
	.readdirplus = rw_readdirplus,
	.releasedir = rw_releasedir,
	.statfs = ckfs_op_statfs,
	.access = rw_access,
	.open = rw_open,
	.read = rw_read,
	.write_buf = rw_write_buf,
	.flush = rw_flush,
	.fsync = rw_fsync,
	.release = rw_release,
	.create = rw_create,
	.setattr = rw_setattr,
	.mkdir = ckfs_rw_mkdir,
	.unlink = ckfs_rw_unlink,
	.rmdir = ckfs_rw_rmdir,
	.rename = ckfs_rw_rename,
	.getxattr = rw_getxattr,
	.listxattr = rw_listxattr,
	.setxattr = rw_setxattr,
	.removexattr = rw_removexattr,
	.readlink = rw_readlink,
	.mknod = ckfs_rw_mknod,
	.symlink = ckfs_rw_symlink,
	.link = ckfs_rw_link,
	.fallocate = rw_fallocate,
	.copy_file_range = rw_copy_file_range,
};
