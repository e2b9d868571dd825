/* FUSE over io_uring (uring.c): where the kernel offers it (Linux 6.14+,
 * the fuse module's parameter enable_uring=Y) and -o io_uring asks for it
 * (off by default: it pays only where the reader and the daemon share a
 * scheduling group), requests come through one ring queue per CPU instead
 * of read(2) on /dev/fuse.  Each queue is served by threads pinned to its
 * CPU, so a reader that waits for a reply hands its CPU to the thread that
 * answers, and the reply goes back with the fetch of the next request: one
 * system call per request (docs/design.md, "FUSE over io_uring";
 * docs/bench.md, fuse_rtt).  What the kernel never sends
 * through a ring (FORGET, INTERRUPT, everything before the queues are
 * registered) still comes through /dev/fuse and libfuse's loop.
 *
 * libfuse 3.14 knows nothing of it: the ring threads hand each request to
 * fuse_session_process_buf, and the session's custom I/O
 * (fuse_session_custom_io) sends a reply to the ring when it answers the
 * request the calling thread is serving, else to /dev/fuse.
 *
 * Thread rules: install after fuse_session_mount and before the handshake;
 * negotiate and forget from the handshake (handshake.c); start after it,
 * before the request loop; stop after the unmount, on the main thread.
 * ckfs_uring_reply_buffer from any request thread.
 */
#ifndef CKPTFS_FS_URING_H
#define CKPTFS_FS_URING_H

#include <stddef.h>

#include "lowlevel.h"

struct ckfs;
struct fuse_init_in;
struct fuse_init_out;

/* Routes the session's I/O through uring.c's custom I/O (plain read, splice
 * and writev on /dev/fuse until a ring serves).  0 or -errno (then nothing
 * changed and the ring is not asked for). */
int ckfs_uring_install(struct ckfs *fs, struct fuse_session *se);
/* At INIT: asks for the ring in out when the kernel offered it in in and
 * ckfs_uring_install succeeded, and records the reply buffers' size. */
void ckfs_uring_negotiate(struct ckfs *fs, const struct fuse_init_in *in, struct fuse_init_out *out);
/* The INIT answer was not sent: nothing was negotiated. */
void ckfs_uring_forget(struct ckfs *fs);
/* When negotiated: starts cfg->uring_threads threads per CPU, each
 * registering one ring entry.  A registration the kernel refuses is logged
 * and leaves every request on /dev/fuse.  0 or -errno. */
int ckfs_uring_start(struct ckfs *fs);
/* After the unmount: stops and joins the ring threads, frees the state. */
void ckfs_uring_stop(struct ckfs *fs);
/* The reply buffer of the ring request the calling thread is answering
 * (*cap bytes), or NULL (no ring, or a request from /dev/fuse).  A reply
 * whose data was built there (fuse_reply_buf(req, buffer, n)) is sent
 * without another copy.  The request's arguments are not in it, except a
 * WRITE's data. */
void *ckfs_uring_reply_buffer(size_t *cap);

#endif
