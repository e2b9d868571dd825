/* Credentials of requests (creds.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/writer_staging.h"
#include "creds.h"

void ckfs_cred_get(fuse_req_t req, struct ckfs_cred *out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t g[CKFS_CRED_GROUPS], *groups = g;
	uint32_t *ids = out->stack;
	int n;

	memset(out, 0, sizeof(*out));
	out->c.uid = (uint32_t)ctx->uid;
	out->c.gid = (uint32_t)ctx->gid;
	out->c.groups = out->stack;
	if (ctx->uid == 0)
		return;
	n = fuse_req_getgroups(req, CKFS_CRED_GROUPS, g);
	if (n > CKFS_CRED_GROUPS) {
		groups = malloc((size_t)n * sizeof(*groups));
		ids = out->heap = malloc((size_t)n * sizeof(*out->heap));
		if (!groups || !ids || fuse_req_getgroups(req, n, groups) != n)
			n = 0;   /* without its groups the caller gets less, never more */
	}
	for (int i = 0; i < n; i++)
		ids[i] = (uint32_t)groups[i];
	out->c.groups = ids;
	out->c.ngroups = n > 0 ? (size_t)n : 0;
	if (groups != g)
		free(groups);
}

void ckfs_cred_put(struct ckfs_cred *c)
{
	free(c->heap);
	c->heap = NULL;
}

int ckfs_checks(fuse_req_t req)
{
	return ckfs_of(req)->cfg->permissions && fuse_req_ctx(req)->uid != 0;
}

int ckfs_may(fuse_req_t req, const struct ck_vnode *n, int mask)
{
	struct ckfs_cred c;
	int rc;

	if (!ckfs_checks(req))
		return 0;
	ckfs_cred_get(req, &c);
	rc = ck_view_access(ckfs_of(req)->view, n, &c.c, mask);
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
	struct ck_staged_at at = { -1, NULL };
	struct stat st;
	int rc = 0;

	if (c->kind == CKFS_DIR_ROOT)
		return view_owner(fs, ck_view_root(fs->view), o);
	if (c->kind == CKFS_DIR_SERIES && c->view_dir)
		return view_owner(fs, c->view_dir, o);
	if (c->kind == CKFS_DIR_VIEW)
		return -EROFS;
	if (c->kind == CKFS_DIR_SERIES)
		rc = ck_staging_top_at(fs->staging, c->series, NULL, &at);
	else
		rc = ck_staging_at(fs->staging, c->staged, NULL, &at);
	if (rc == 0 && fstatat(at.dir, at.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (rc == 0)
		ck_owner_from_stat(o, &st);
	ck_staging_at_free(&at);
	return rc;
}
