/* Preloading (preload.c, -o preload): pushes the bytes of the newest
 * checkpoints' files that the daemon serves into the kernel's page cache
 * of the mount (fuse_lowlevel_notify_store), checked first exactly as a
 * read would be (ck_vfile_read: verify=first), so that a trainer that
 * mounts and resumes reads cached pages instead of waiting for requests.
 * Up to cfg->preload_mib in all; files the kernel reads by passthrough,
 * and direct_io ones, are skipped.  The kernel only takes pages for an
 * inode it knows, so each file is looked up through the mountpoint first.
 *
 * Thread rules: one thread (the warm-up's) uses a preload from begin to
 * end; ckfs_preload_file is its ck_warm_fn for ck_view_warm_newest, which
 * returns 1 to stop the walk; *stop ends it at the next piece. */
#ifndef CKPTFS_FS_PRELOAD_H
#define CKPTFS_FS_PRELOAD_H

#include <stdatomic.h>

#include "ckptfs/view.h"
#include "mount.h"

struct ckfs_preload;

/* *out: a preload, or NULL when it is off (-o preload=0, or no
 * mountpoint path to look files up by).  0 or -ENOMEM. */
int ckfs_preload_begin(struct ckfs *fs, const atomic_int *stop, struct ckfs_preload **out);
/* Pushes one file (arg: the preload; see ck_warm_fn). */
int ckfs_preload_file(void *arg, const struct ck_vnode *n, const char *path, struct ck_vfile *f,
		      int served_as_saved);
/* Logs what was pushed and frees p (NULL is fine). */
void ckfs_preload_end(struct ckfs_preload *p);

#endif
