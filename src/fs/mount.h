/* The state of one mounted filesystem (src/fs): the userdata of every
 * request.  The daemon is a thin adapter: it turns FUSE requests into
 * calls of the view (include/ckptfs/view.h: committed checkpoints) and,
 * in a writable mount, of the writer (include/ckptfs/writer.h:
 * in-progress directories and their commits), and -errno results into
 * replies.
 *
 * Thread rules: set up by main.c before the request loop and torn down
 * after it; request threads only read these fields (the view, writer and
 * passthrough state lock themselves; listings has its own lock).
 */
#ifndef CKPTFS_FS_MOUNT_H
#define CKPTFS_FS_MOUNT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckptfs/ctldir.h"
#include "ckptfs/view.h"
#include "ckptfs/writer.h"
#include "lowlevel.h"
#include "options.h"
#include "passthrough.h"

/* The preferred I/O size reported to readers (st_blksize), which Python's io
 * and stdio size their buffers by.  Not a full request: torch.load reads
 * one buffer at every storage's zip header, so a large buffer copies (and
 * on packed files decodes) bytes it does not need (docs/bench.md,
 * composite_read).  128 KiB is the kernel's readahead window; larger reads
 * bypass the buffer. */
#define CKFS_BLKSIZE (128u * 1024u)

struct ckfs_listing;
struct ckfs_health;
struct ckfs_uring;

struct ckfs {
	const struct ckfs_config *cfg;
	struct ck_view *view;
	struct ck_ctl *ctl;     /* MNT/.ckptfs, and series files such as the GPU health flag (control.c) */
	uint64_t root_ino;      /* the view's inode number of its root */
	struct fuse_session *se;        /* for invalidations after a commit */
	struct ck_writer *writer;       /* in-progress directories and commits; NULL with -o ro */
	struct ck_staging *staging;     /* the writer's namespace (ck_writer_staging); NULL with -o ro */
	struct ckfs_passthrough passthrough;
	pthread_mutex_t listings_lock;
	struct ckfs_listing *listings;  /* open directory handles (listing.c) */
	struct ckfs_health *health;     /* the GPU health watcher (health.c); NULL unless -o health= */
	struct ckfs_uring *uring;       /* FUSE over io_uring (uring.c); NULL with -o noio_uring */
};

static inline struct ckfs *ckfs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

#endif
