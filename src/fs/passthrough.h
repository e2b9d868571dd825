/* FUSE passthrough (passthrough.c): files served as they were saved are
 * read by the kernel from the physical file, never through the daemon.
 * Thread rules: negotiated once at INIT, before the request loop; open and
 * state from any request thread (one lock guards the ids). */
#ifndef CKPTFS_FS_PASSTHROUGH_H
#define CKPTFS_FS_PASSTHROUGH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckptfs/view.h"
#include "lowlevel.h"

struct ckfs;
struct fuse_init_in;
struct fuse_init_out;

struct ckfs_passthrough {
	int on;                 /* negotiated at INIT */
	int disabled;           /* registration refused (no CAP_SYS_ADMIN): stop asking */
	int warned;             /* a registration failed otherwise: logged once */
	uint64_t max_size;      /* larger files are served by the daemon */
	pthread_mutex_t lock;
	pthread_cond_t settled; /* a claimed node was settled */
	int32_t *ids;           /* by FUSE node id: backing id, -1 through the daemon, 0 undecided */
	size_t cap;
};

/* At INIT (handshake.c): adds passthrough to libfuse's answer out when the
 * kernel offered it in in, and records that it is on. */
void ckfs_passthrough_negotiate(struct ckfs *fs, const struct fuse_init_in *in, struct fuse_init_out *out);
/* Answers an open of node ino (fi as it would be answered) with
 * passthrough when ino has a backing file, or gets one now: f is one whole
 * raw file and verifies.  A node decided either way stays so for the mount
 * (the kernel wants every open of an inode alike).  0 once answered;
 * -ECANCELED when answered but the open was interrupted (no release will
 * come); -ENOTSUP, nothing sent, to answer through the daemon. */
int ckfs_passthrough_open(struct ckfs *fs, fuse_req_t req, fuse_ino_t ino, struct ck_vfile *f,
			  const struct fuse_file_info *fi);
/* ino's backing id (> 0: its reads bypass the daemon), -1 (served by the
 * daemon) or 0 (not opened yet); waits while ino is claimed. */
int32_t ckfs_passthrough_state(struct ckfs_passthrough *pt, fuse_ino_t ino);
/* For a file the daemon would serve, whose bytes are being written into a
 * file of their own (materialize.h): 1 when ino was undecided and is now
 * claimed (opens of it wait until it is settled), else 0 (passthrough off,
 * or ino decided already).  Every claim must be settled. */
int ckfs_passthrough_claim(struct ckfs_passthrough *pt, fuse_ino_t ino);
/* Settles a claimed ino: fd (>= 0, not taken over: the kernel keeps its
 * own reference) registered as its backing file, or (fd < 0, or the
 * registration fails) undecided again.  1 when ino is now read by
 * passthrough, else 0. */
int ckfs_passthrough_settle(struct ckfs *fs, fuse_ino_t ino, int fd);
/* After ino was deleted (through the mount, or by another process and
 * hidden by a refresh): the kernel lets go of its backing file once the
 * files open on it are closed (a materialized file's space, a deleted raw
 * file's), instead of at the unmount.  ino is not opened again. */
void ckfs_passthrough_release(struct ckfs *fs, fuse_ino_t ino);
void ckfs_passthrough_destroy(struct ckfs_passthrough *pt);

#endif
