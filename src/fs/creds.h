/* Who asks (creds.c): the credentials of a request's user, the checks the
 * daemon adds to the kernel's (default_permissions), and the owner a
 * directory of a writable mount shows.  The rules are include/ckptfs/perm.h's
 * and the view's (ck_view_access); this file only reads the request. */
#ifndef CKPTFS_FS_CREDS_H
#define CKPTFS_FS_CREDS_H

#include <stdint.h>

#include "ckptfs/perm.h"
#include "ckptfs/view.h"
#include "dirs.h"
#include "lowlevel.h"
#include "mount.h"

/* fsuid, fsgid and supplementary groups of the user of a request (the
 * groups read from /proc by libfuse; none for root, who needs none).  Put
 * what get took. */
#define CKFS_CRED_GROUPS 64
struct ckfs_cred {
	struct ck_cred c;
	uint32_t stack[CKFS_CRED_GROUPS];
	uint32_t *heap;
};
void ckfs_cred_get(fuse_req_t req, struct ckfs_cred *out);
void ckfs_cred_put(struct ckfs_cred *c);

/* Whether -o permissions holds and the user of req is not root: the daemon
 * then checks what the kernel cannot. */
int ckfs_checks(fuse_req_t req);

/* Whether the user of req may do mask (CK_MAY_*) on view node n, by what n
 * is made of (ck_view_access): 0, or -EACCES.  The kernel checks the modes
 * it is shown; this adds what one mode cannot say, a composite's sources.
 * Always 0 with -o nopermissions. */
int ckfs_may(fuse_req_t req, const struct ck_vnode *n, int mask);

/* The owner, group and mode directory c shows: the view's for the root and
 * a committed series, the real directory's in the in-progress space.  0,
 * -EROFS inside a committed checkpoint, or -errno. */
int ckfs_dir_owner(struct ckfs *fs, const struct ckfs_dir_ctx *c, struct ck_owner *o);

#endif
