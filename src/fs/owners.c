/* Who asks, and who owns what the writable mount creates: the credentials
 * of a request, and the owner, group and mode of a new in-progress file or
 * directory.  The rules are include/ckptfs/perm.h's and the view's; this
 * file reads them off the request and applies them to the real files
 * under STORE/staging (the daemon creates them as root).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs.h"
#include "staged.h"

void ckfs_cred_get(fuse_req_t req, struct ckfs_cred *out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t g[CKFS_CRED_GROUPS], *groups = g;
	int n;

	memset(out, 0, sizeof(*out));
	out->c.uid = (uint32_t)ctx->uid;
	out->c.gid = (uint32_t)ctx->gid;
	out->c.groups = out->stack;
	if (ctx->uid == 0)
		return;   /* root needs no groups */
	n = fuse_req_getgroups(req, CKFS_CRED_GROUPS, g);
	if (n > CKFS_CRED_GROUPS) {
		groups = malloc((size_t)n * sizeof(*groups));
		out->heap = malloc((size_t)n * sizeof(*out->heap));
		if (!groups || !out->heap || fuse_req_getgroups(req, n, groups) != n)
			n = 0;   /* without its groups the caller gets less, never more */
		out->c.groups = out->heap;
	}
	for (int i = 0; i < n; i++)
		((uint32_t *)out->c.groups)[i] = (uint32_t)groups[i];
	out->c.ngroups = n > 0 ? (size_t)n : 0;
	if (groups != g)
		free(groups);
}

void ckfs_cred_put(struct ckfs_cred *c)
{
	free(c->heap);
	c->heap = NULL;
}

int ckfs_may(fuse_req_t req, const struct ck_vnode *n, int mask)
{
	struct ckfs *fs = ckfs_of(req);
	struct ckfs_cred c;
	int rc;

	if (!fs->cfg->permissions || fuse_req_ctx(req)->uid == 0)
		return 0;
	ckfs_cred_get(req, &c);
	rc = ck_view_access(fs->view, n, &c.c, mask);
	ckfs_cred_put(&c);
	return rc;
}

static int view_owner(struct ckfs *fs, const struct ck_vnode *n, struct ck_owner *o)
{
	struct ck_vattr a;
	int rc = ck_view_getattr(fs->view, n, &a);

	if (rc == 0) {
		o->uid = a.uid;
		o->gid = a.gid;
		o->mode = (uint32_t)a.mode & 07777;
	}
	return rc;
}

int ckfs_dir_owner(struct ckfs *fs, const struct ckfs_dir_ctx *c, struct ck_owner *o)
{
	struct stat st;
	char *path = NULL;
	int rc = 0;

	if (c->kind == CKFS_DIR_ROOT)
		return view_owner(fs, ck_view_root(fs->view), o);
	if (c->kind == CKFS_DIR_SERIES && c->view_dir)
		return view_owner(fs, c->view_dir, o);
	if (c->kind == CKFS_DIR_VIEW)
		return -EROFS;
	if (c->kind == CKFS_DIR_SERIES)
		rc = (path = ckfs_staging_top_path(fs->staging, c->series, NULL)) ? 0 : -ENOMEM;
	else
		rc = ckfs_staging_path(fs->staging, c->staged, NULL, &path);
	if (rc == 0 && lstat(path, &st) < 0)
		rc = -errno;
	if (rc == 0)
		ck_owner_from_stat(o, &st);
	free(path);
	return rc;
}

/* Applies o to the node at path (fd: open on it, or -1).  A daemon that
 * is not root can only keep what it made its own. */
static int apply(const char *path, int fd, const struct ck_owner *o)
{
	if (geteuid() == 0 && (fd >= 0 ? fchown(fd, o->uid, o->gid) : lchown(path, o->uid, o->gid)) < 0)
		return -errno;
	if ((fd >= 0 ? fchmod(fd, o->mode) : chmod(path, o->mode)) < 0)
		return -errno;
	return 0;
}

int ckfs_give_new(fuse_req_t req, const struct ck_owner *parent, const char *path, int fd, mode_t mode,
		  int is_dir)
{
	struct ckfs_cred c;
	struct ck_owner o;
	int rc;

	ckfs_cred_get(req, &c);
	ck_perm_new_owner(parent, &c.c, (uint32_t)mode, is_dir, &o);
	ckfs_cred_put(&c);
	rc = apply(path, fd, &o);
	if (rc)
		ck_warn("%s: cannot give it to uid %u gid %u mode %04o: %s", path, o.uid, o.gid, o.mode,
			strerror(-rc));
	return rc;
}

void ckfs_mirror_series(struct ckfs *fs, const struct ck_vnode *series_dir, const char *path)
{
	struct ck_owner o;
	int rc;

	if (series_dir && view_owner(fs, series_dir, &o) == 0 && (rc = apply(path, -1, &o)) < 0)
		ck_warn("%s: cannot give it the owner of its series: %s", path, strerror(-rc));
}

int ckfs_may_chown(fuse_req_t req, const char *path, int fd, uint32_t uid, uint32_t gid)
{
	struct ckfs_cred c;
	struct ck_owner o;
	struct stat st;
	int rc = (fd >= 0 ? fstat(fd, &st) : lstat(path, &st)) == 0 ? 0 : -errno;

	if (rc)
		return rc;
	ck_owner_from_stat(&o, &st);
	ckfs_cred_get(req, &c);
	rc = ck_perm_chown_ok(&o, &c.c, uid, gid);
	ckfs_cred_put(&c);
	return rc;
}

int ckfs_may_commit(fuse_req_t req, struct ckfs *fs, const char *series, const char *dir_path)
{
	const struct ck_vnode *n;
	struct ckfs_dir_ctx c = { .kind = CKFS_DIR_SERIES, .series = (char *)series };
	struct ckfs_cred cred;
	struct ck_owner sdir, dir;
	struct stat st;
	int rc;

	if (!fs->cfg->permissions || fuse_req_ctx(req)->uid == 0)
		return 0;
	if (ck_view_lookup(fs->view, ck_view_root(fs->view), series, &n) == 0)
		c.view_dir = n;
	rc = ckfs_dir_owner(fs, &c, &sdir);
	if (rc == 0 && lstat(dir_path, &st) < 0)
		rc = -errno;
	if (rc)
		return rc;
	ck_owner_from_stat(&dir, &st);
	ckfs_cred_get(req, &cred);
	rc = ck_perm_may_delete(&sdir, &dir, &cred.c);
	ckfs_cred_put(&cred);
	return rc;
}
