/* The FUSE INIT handshake (handshake.c): libfuse 3.14 answers INIT without
 * the protocol's newer features, so the daemon answers it itself, from
 * libfuse's own answer with what passthrough (passthrough.h) and FUSE over
 * io_uring (uring.h) add to it.
 * Thread rules: once, between fuse_session_mount and the request loop, on
 * the main thread. */
#ifndef CKPTFS_FS_HANDSHAKE_H
#define CKPTFS_FS_HANDSHAKE_H

#include "lowlevel.h"

struct ckfs;

/* Reads the kernel's INIT, which must not have been read yet, lets libfuse
 * answer it, and sends that answer with the features of fs->cfg the kernel
 * offered (recorded in fs as negotiated).  0, or -errno when no INIT was
 * answered here (the loop then reads it, and nothing is negotiated). */
int ckfs_init_handshake(struct ckfs *fs, struct fuse_session *se);

#endif
