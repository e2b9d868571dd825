/* How long a directory tree has rested (tree_age.c): what the marker
 * grace and the idle commits wait for.  mtimes, not a write clock: the
 * files are the truth, and a remount sees the same age; compare with
 * ck_now_ns() (include/ckptfs/clock.h).  Thread-safe. */
#ifndef CKPTFS_WRITER_TREE_AGE_H
#define CKPTFS_WRITER_TREE_AGE_H

#include <stddef.h>
#include <stdint.h>

/* The newest mtime (ns) of directory dir and everything under it (64
 * levels deep at most; symlinks not followed), and how many regular files
 * it holds.  0 or -errno (dir cannot be opened: gone, or not a directory). */
int ckw_tree_newest(const char *dir, int64_t *newest_ns, size_t *files);
/* The same for the directory open as fd, which is closed here. */
int ckw_tree_newest_fd(int fd, int64_t *newest_ns, size_t *files);

#endif
