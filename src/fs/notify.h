/* Telling the kernel what changed (notify.c): after a commit, a deletion,
 * a compaction or a refresh, the inodes and names the kernel may hold in
 * its caches.  Invalidations of inodes take no directory lock; those of
 * names take the directory's, so they are sent only after the request
 * that changed the directory was answered (the kernel holds its lock until
 * then, and taking the parent's meanwhile could deadlock with an rmdir).
 * Thread-safe: any thread, once the kernel's INIT was answered. */
#ifndef CKPTFS_FS_NOTIFY_H
#define CKPTFS_FS_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/writer.h"
#include "lowlevel.h"
#include "mount.h"

/* The writer's callbacks (ctx fs): inodes_changed invalidates the inodes,
 * names_changed the names of the series directory (ckfs_inval_commit_names),
 * committed tells the GPU health watcher (health.h). */
void ckfs_writer_notify(struct ckfs *fs, struct ck_writer_notify *out);
/* Attributes and listings of these view inodes changed. */
void ckfs_inval_inodes(struct ckfs *fs, const uint64_t *inos, size_t n);
/* Names of checkpoints and series the view hid since the last call
 * (deleted by this mount or another process, or a series reloaded). */
void ckfs_forget_hidden(struct ckfs *fs);
/* After a commit of old_name as new_name in directory dir (a FUSE node id;
 * 0: a new series, whose root entry changed in the catch-up): the names
 * the view hid, then old_name and new_name in dir, and dir's listing.
 * Only after the request that changed dir was answered. */
void ckfs_inval_commit_names(struct ckfs *fs, fuse_ino_t dir, const char *old_name, const char *new_name);

#endif
