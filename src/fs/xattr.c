/* Extended attributes: provenance of composites ("user.ckptfs.sources" is
 * JSON), step and kind, produced by the view, the user.* attributes a
 * trainer gave a file it wrote through the mount (the view reads them
 * from the file), and "user.ckptfs.io", how the daemon serves a file's
 * reads.  Read-only: setting or removing attributes is EROFS (readonly.c).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "creds.h"
#include "mount.h"
#include "nodes.h"
#include "passthrough.h"
#include "xattr.h"

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

/* The daemon's own attribute: how reads of a file are served. */
#define IO_XATTR "user.ckptfs.io"

static int is_file(struct ckfs *fs, const struct ck_vnode *n)
{
	struct ck_vattr a;

	return ck_view_getattr(fs->view, n, &a) == 0 && S_ISREG(a.mode);
}

/* "passthrough" (the kernel reads the physical file, no request reaches
 * the daemon), "daemon", or "unopened" (decided at the first open). */
static int io_xattr(struct ckfs *fs, fuse_ino_t ino, const struct ck_vnode *n, struct ck_buf *out)
{
	int32_t state;

	if (!is_file(fs, n))
		return -ENODATA;
	state = ckfs_passthrough_state(&fs->passthrough, ino);
	return ck_buf_puts(out, state > 0 ? "passthrough" : state < 0 || !fs->passthrough.on ?
			   "daemon" : "unopened");
}

void ckfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ckfs *fs = ckfs_of(req);
	const struct ck_vnode *n = ckfs_node(fs, ino);
	struct ck_buf value = CK_BUF_INIT;
	int rc;

	/* Provenance names the physical files: for whoever may read them all. */
	if (!n)
		rc = -ESTALE;
	else if ((rc = ckfs_may(req, n, CK_MAY_READ)) != 0)
		;
	else if (strcmp(name, IO_XATTR) == 0)
		rc = io_xattr(fs, ino, n, &value);
	else
		rc = ck_view_getxattr(fs->view, n, name, &value);

	reply_xattr_value(req, rc, &value, size);
	ck_buf_free(&value);
}

void ckfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ckfs *fs = ckfs_of(req);
	const struct ck_vnode *n = ckfs_node(fs, ino);
	struct ck_buf names = CK_BUF_INIT;
	int rc = n ? ck_view_listxattr(fs->view, n, &names) : -ESTALE;

	if (!rc && is_file(fs, n))
		rc = ck_buf_put(&names, IO_XATTR, sizeof(IO_XATTR));

	reply_xattr_value(req, rc, &names, size);
	ck_buf_free(&names);
}
