/* The control directory in the mount, MNT/.ckptfs (control.c, over
 * include/ckptfs/ctldir.h). */
#ifndef CKPTFS_FS_CONTROL_H
#define CKPTFS_FS_CONTROL_H

#include "lowlevel.h"

/* out is base with the requests about .ckptfs (its inodes, and the lookup
 * of ".ckptfs" in the root) routed to fs->ctl, and the others to base
 * unchanged.  One session per process: base is kept.  Called by main.c
 * before fuse_session_new. */
void ckfs_control_ops(const struct fuse_lowlevel_ops *base, struct fuse_lowlevel_ops *out);

#endif
