/* The GPU health watcher of a mount (health.c, -o health=nvml): samples
 * every health_interval s on a thread, serves health.json in the control
 * directory and the emergency flag in watched series directories.
 *  - ckfs_health_setup: registers the control files (before serving);
 *    0 or -errno;
 *  - ckfs_health_start / stop: the sampling thread (once the mount serves);
 *  - ckfs_health_wrote: series is written through the mount;
 *  - ckfs_health_committed: checkpoint name of series committed;
 *  - ckfs_health_free: after stop.
 * All accept fs->health == NULL (no watcher) and do nothing then.
 * Thread-safe after setup (include/ckptfs/health.h). */
#ifndef CKPTFS_FS_HEALTH_H
#define CKPTFS_FS_HEALTH_H

#include "mount.h"

int ckfs_health_setup(struct ckfs *fs);
void ckfs_health_start(struct ckfs *fs);
void ckfs_health_stop(struct ckfs *fs);
void ckfs_health_wrote(struct ckfs *fs, const char *series);
void ckfs_health_committed(struct ckfs *fs, const char *series, const char *name);
void ckfs_health_free(struct ckfs *fs);

#endif
