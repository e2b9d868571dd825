/* Extended attributes: provenance of composites ("user.ckptfs.sources" is
 * JSON), step and kind, all produced by the view.  Read-only: setting or
 * removing attributes is EROFS (readonly.c).
 */
#include "config.h"

#include <errno.h>

#include "ckptfs.h"

/* The xattr protocol: size 0 asks for the length, a short buffer is ERANGE. */
static void reply_xattr_value(fuse_req_t req, int rc, const struct ck_buf *value, size_t size)
{
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, value->len);
	else if (value->len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, (const char *)value->data, value->len);
}

void ckfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ckfs *fs = ckfs_of(req);
	const struct ck_vnode *n = ckfs_node(fs, ino);
	struct ck_buf value = CK_BUF_INIT;
	int rc = n ? ck_view_getxattr(fs->view, n, name, &value) : -ESTALE;

	reply_xattr_value(req, rc, &value, size);
	ck_buf_free(&value);
}

void ckfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ckfs *fs = ckfs_of(req);
	const struct ck_vnode *n = ckfs_node(fs, ino);
	struct ck_buf names = CK_BUF_INIT;
	int rc = n ? ck_view_listxattr(fs->view, n, &names) : -ESTALE;

	reply_xattr_value(req, rc, &names, size);
	ck_buf_free(&names);
}
