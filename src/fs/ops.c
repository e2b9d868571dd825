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

#include "ckptfs/log.h"
#include "listing.h"
#include "nodes.h"
#include "ops.h"

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

/* A symbolic link a checkpoint was committed with, from the index. */
void ckfs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ckfs *fs = ckfs_of(req);
	const struct ck_vnode *n = ckfs_node(fs, ino);
	const char *target;
	int rc = n ? ck_view_readlink(fs->view, n, &target) : -ESTALE;

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
}
