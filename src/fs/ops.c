/* Namespace operations: connection setup, lookup, attributes, directory
 * listing, statfs and access.  Each turns a FUSE request into view calls;
 * view errors (-errno) become error replies as they are.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "ckptfs.h"

void ckfs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	const unsigned wanted = FUSE_CAP_ASYNC_READ | FUSE_CAP_SPLICE_READ |
				FUSE_CAP_SPLICE_WRITE | FUSE_CAP_READDIRPLUS |
				FUSE_CAP_PARALLEL_DIROPS;

	(void)userdata;
	/* max_write also sets the kernel's max_pages, which bounds reads:
	 * without it requests stay at 128 KiB whatever max_read says. */
	conn->max_write = CKFS_MAX_REQUEST;
	conn->max_read = CKFS_MAX_REQUEST;
	/* The kernel keeps the smaller of this and the bdi's readahead, so
	 * ask for no limit; the bdi value itself is raised once the
	 * handshake is over (ckfs_raise_readahead). */
	conn->max_readahead = UINT_MAX;
	conn->want |= conn->capable & wanted;
	ck_debug("connection: proto %u.%u, max_write %u, max_readahead %u, want 0x%x of 0x%x",
		 conn->proto_major, conn->proto_minor, conn->max_write,
		 conn->max_readahead, conn->want, conn->capable);
}

/* Node ids are the view's inode numbers, except that FUSE insists on 1
 * for the root: the root's number and 1 trade places if they differ.
 * The swap is its own inverse, so it maps both ways. */
static uint64_t swap_root_ino(const struct ckfs *fs, uint64_t ino)
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
	return ck_view_node(fs->view, swap_root_ino(fs, ino));
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

/* The node behind ino (into *node, unless node is NULL) and its attributes.
 * 0, -ESTALE when the view has no such node, or the view's -errno. */
static int stat_ino(struct ckfs *fs, fuse_ino_t ino, const struct ck_vnode **node, struct stat *st)
{
	const struct ck_vnode *n = ckfs_node(fs, ino);

	if (!n)
		return -ESTALE;
	if (node)
		*node = n;
	return ckfs_stat(fs, n, st);
}

static int fill_entry(struct ckfs *fs, const struct ck_vnode *n, struct fuse_entry_param *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	rc = ckfs_stat(fs, n, &e->attr);
	if (rc)
		return rc;
	e->ino = swap_root_ino(fs, e->attr.st_ino);
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
	return rc ? rc : fill_entry(fs, child, e);
}

void ckfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int rc = ckfs_view_entry(ckfs_of(req), parent, name, &e);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

/* View nodes live as long as the view: there is nothing to forget. */
void ckfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

void ckfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	(void)count;
	(void)forgets;
	fuse_reply_none(req);
}

void ckfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct stat st;
	int rc = stat_ino(fs, ino, NULL, &st);

	(void)fi;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, fs->cfg->attr_timeout);
}

void ckfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_listing *l = NULL;
	struct stat st;
	int rc = stat_ino(fs, ino, NULL, &st);

	if (rc == 0 && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	if (rc == 0)
		rc = ckfs_listing_open(fs, NULL, &l);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l;
	if (fuse_reply_open(req, fi) == -ENOENT)
		ckfs_listing_close(fs, l);	/* interrupted: no RELEASEDIR will come */
}

void ckfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	ckfs_listing_close(ckfs_of(req), (struct ckfs_listing *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* One directory entry at position pos: 0 is ".", 1 is "..", 2 + i the
 * listing's i-th entry.  Returns 0, -ENOENT past the end, or -errno. */
static int dir_entry(struct ckfs *fs, const struct ck_vnode *dir, const struct stat *dir_st,
		     struct ckfs_listing *l, off_t pos, int plus, const char **name,
		     struct fuse_entry_param *e)
{
	const struct ck_vnode *child;
	const char *staged;
	int rc;

	memset(e, 0, sizeof(*e));
	if (pos < 2) {
		/* The view has no parent links; the kernel answers ".." lookups
		 * itself, so d_ino of ".." only needs to be a directory's. */
		*name = pos == 0 ? "." : "..";
		e->attr.st_ino = dir_st->st_ino;
		e->attr.st_mode = S_IFDIR;
		return 0;
	}
	rc = ckfs_listing_entry(fs, dir, l, (size_t)(pos - 2), &child, &staged);
	if (rc)
		return rc;
	if (staged) {
		/* No node yet (ino 0): the kernel looks it up when used. */
		*name = staged;
		e->attr.st_ino = CKFS_STAGED_BIT;
		e->attr.st_mode = S_IFDIR;
		return 0;
	}
	*name = ck_vnode_name(child);
	rc = fill_entry(fs, child, e);
	if (rc) {
		/* Still list it, with unknown type; a stat will give the error.
		 * ino 0 tells the kernel not to cache an entry for it. */
		ck_debug("%s: attributes unavailable: %s", *name, strerror(-rc));
		memset(e, 0, sizeof(*e));
	} else if (!plus) {
		e->ino = 0;
	}
	return 0;
}

void ckfs_listing_reply(fuse_req_t req, const struct ck_vnode *dir, const struct stat *dir_st,
			struct ckfs_listing *l, size_t size, off_t off, int plus)
{
	struct ckfs *fs = ckfs_of(req);
	char *buf = malloc(size ? size : 1);
	size_t used = 0;
	int rc = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t pos = off; ; pos++) {
		struct fuse_entry_param e;
		const char *name;
		size_t len;

		rc = dir_entry(fs, dir, dir_st, l, pos, plus, &name, &e);
		if (rc)
			break;
		if (plus)
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, pos + 1);
		else
			len = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, pos + 1);
		if (len > size - used)
			break;	/* full: the kernel asks again from pos */
		used += len;
	}
	/* An error after some entries is reported on the next call. */
	if (rc && rc != -ENOENT && used == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	const struct ck_vnode *dir;
	struct stat dir_st;
	int rc = stat_ino(ckfs_of(req), ino, &dir, &dir_st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		ckfs_listing_reply(req, dir, &dir_st, (struct ckfs_listing *)(uintptr_t)fi->fh, size, off, plus);
}

void ckfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

void ckfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

/* Space of the filesystem holding the store: what df users care about. */
void ckfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ckfs *fs = ckfs_of(req);
	struct statvfs sv;

	(void)ino;
	if (statvfs(fs->cfg->store, &sv) != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	sv.f_namemax = NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* Only reached without default_permissions (-o nopermissions): nothing
 * is checked, and nothing committed is writable. */
void ckfs_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ckfs *fs = ckfs_of(req);
	struct stat st;
	int rc = stat_ino(fs, ino, NULL, &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_err(req, (mask & W_OK) ? EROFS : 0);
}
