/* The view's nodes as FUSE nodes (nodes.c): inode numbers, attributes and
 * entries.  Node ids are the view's inode numbers, except that FUSE
 * insists on 1 for the root: the root's number and 1 trade places if they
 * differ.  Thread-safe (the view is). */
#ifndef CKPTFS_FS_NODES_H
#define CKPTFS_FS_NODES_H

#include <stdint.h>
#include <sys/stat.h>

#include "ckptfs/view.h"
#include "lowlevel.h"
#include "mount.h"

/* The FUSE node id of view inode ino, and back (the swap is its own inverse). */
uint64_t ckfs_fuse_ino(const struct ckfs *fs, uint64_t ino);
/* The view node behind a FUSE node id, or NULL. */
const struct ck_vnode *ckfs_node(struct ckfs *fs, fuse_ino_t ino);
/* stat of a node, with the owners and modes the view derives: 0 or -errno
 * from the view. */
int ckfs_stat(struct ckfs *fs, const struct ck_vnode *n, struct stat *st);
/* The entry of node n, cached for the -o attr/entry_timeout: 0 or -errno. */
int ckfs_fill_entry(struct ckfs *fs, const struct ck_vnode *n, struct fuse_entry_param *e);
/* The entry for the view's child name of FUSE node parent: 0, -ESTALE
 * for an unknown parent, or -errno from the view. */
int ckfs_view_entry(struct ckfs *fs, fuse_ino_t parent, const char *name, struct fuse_entry_param *e);
/* The FUSE node id of the view's directory of series, or 0 when the view
 * has none yet (a new series). */
fuse_ino_t ckfs_series_dir_ino(struct ckfs *fs, const char *series);

#endif
