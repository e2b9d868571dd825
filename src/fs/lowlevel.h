/* libfuse's low-level API at the version the daemon is written for: every
 * file of src/fs that talks to libfuse includes it through here. */
#ifndef CKPTFS_FS_LOWLEVEL_H
#define CKPTFS_FS_LOWLEVEL_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

/* Largest read and write request we ask the kernel for (INIT, max_read=). */
#define CKFS_MAX_REQUEST (1024u * 1024u)

#endif
