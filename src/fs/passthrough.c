/* FUSE passthrough for committed files that are served as they were saved.
 *
 * When a composite's bytes are exactly one raw physical file (a full save,
 * the newest checkpoint of a series, a json file), the kernel can read that
 * file itself: the open reply names a "backing file" registered on
 * /dev/fuse, and reads and mmaps of the open file go straight to the backing
 * file's page cache without a request to the daemon (Linux 6.9+,
 * CONFIG_FUSE_PASSTHROUGH, CAP_SYS_ADMIN for the registration).  That is
 * native page-cache speed, which the FUSE page cache does not reach
 * (docs/bench.md, composite_read).
 *
 * libfuse 3.14 has no API for it, so two protocol messages are written by
 * hand, both through documented libfuse calls:
 *   - INIT (handshake.c): the passthrough flag and a stacking depth of 2
 *     are added to libfuse's answer when the kernel offered passthrough.
 *   - OPEN: fuse_reply_iov() sends a struct fuse_open_out whose padding is
 *     the backing id (protocol 7.40).
 * The kernel insists that every open of an inode use the same backing file,
 * so each node keeps one backing id for the life of the mount: once a node
 * is served by passthrough it always is (its bytes are immutable, so an
 * older registration stays right even after compaction removed the raw
 * file).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "ckptfs/log.h"
#include "mount.h"
#include "passthrough.h"

/* Protocol 7.40 pieces that Debian 12's <linux/fuse.h> (7.38) lacks. */
#define PT_FUSE_PASSTHROUGH_FLAG2 (1u << (37 - 32))  /* FUSE_PASSTHROUGH, in flags2 */
#define PT_FOPEN_PASSTHROUGH (1u << 7)
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct pt_backing_map)
#define PT_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* Largest file handed to the kernel: a quarter of the machine's memory. */
static uint64_t passthrough_max_size(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || page <= 0)
		return 1ull << 30;
	return (uint64_t)pages * (uint64_t)page / 4;
}

/* Whether this process may register backing files (CAP_SYS_ADMIN in its
 * effective set); when unsure, yes (a refused registration says so). */
static int may_register(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data) != 0)
		return 1;
	return (data[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

void ckfs_passthrough_negotiate(struct ckfs *fs, const struct fuse_init_in *in, struct fuse_init_out *out)
{
	if (!(in->flags & FUSE_INIT_EXT) || !(in->flags2 & PT_FUSE_PASSTHROUGH_FLAG2)) {
		ck_debug("FUSE handshake: passthrough not offered by the kernel");
		return;
	}
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= PT_FUSE_PASSTHROUGH_FLAG2;
	/* max_stack_depth since 7.40: backing files may be on one stacked
	 * filesystem (a store on overlayfs, as in containers). */
	out->unused[0] = 2;
	fs->passthrough.on = 1;
	fs->passthrough.max_size = passthrough_max_size();
	if (!may_register()) {
		/* Known now, not at the first open: the preload then
		 * materializes nothing it could not hand over. */
		fs->passthrough.disabled = 1;
		ck_info("FUSE passthrough needs CAP_SYS_ADMIN: every read goes through the daemon");
	}
	ck_debug("FUSE handshake: passthrough on");
}

/* Room for node ino in pt->ids (under pt->lock).  0 or -ENOMEM. */
static int ids_reserve(struct ckfs_passthrough *pt, fuse_ino_t ino)
{
	size_t cap = pt->cap ? pt->cap : 1024;
	int32_t *ids;

	if (ino < pt->cap)
		return 0;
	while (cap <= ino)
		cap *= 2;
	ids = realloc(pt->ids, cap * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	memset(ids + pt->cap, 0, (cap - pt->cap) * sizeof(*ids));
	pt->ids = ids;
	pt->cap = cap;
	return 0;
}

/* ino's state: a backing id (> 0), NODE_THROUGH_DAEMON, NODE_PENDING (a
 * backing file is being written: ckfs_passthrough_claim), or 0
 * (undecided). */
enum { NODE_THROUGH_DAEMON = -1, NODE_PENDING = -2 };

/* ino's state once no backing file is being written for it (pt->lock
 * held). */
static int32_t settled_state(struct ckfs_passthrough *pt, fuse_ino_t ino)
{
	int32_t id;

	while ((id = ino < pt->cap ? pt->ids[ino] : 0) == NODE_PENDING)
		pthread_cond_wait(&pt->settled, &pt->lock);
	return id;
}

static int32_t node_state(struct ckfs_passthrough *pt, fuse_ino_t ino)
{
	int32_t id;

	pthread_mutex_lock(&pt->lock);
	id = settled_state(pt, ino);
	pthread_mutex_unlock(&pt->lock);
	return id;
}

/* Decides an undecided node: registers fd (>= 0) as its backing file, or
 * (fd < 0, or the registration fails) settles it on the daemon.  A node
 * another open decided meanwhile keeps that decision: every open of an
 * inode must agree; pending: the caller claimed it (ckfs_passthrough_claim).
 * Returns the node's backing id, or NODE_THROUGH_DAEMON. */
static int32_t node_decide(struct ckfs_passthrough *pt, int dev_fd, fuse_ino_t ino, int fd, int pending)
{
	struct pt_backing_map map = { .fd = fd };
	int32_t id;

	pthread_mutex_lock(&pt->lock);
	if (ids_reserve(pt, ino)) {
		id = NODE_THROUGH_DAEMON;	/* nothing recorded: it stays undecided */
		goto out;
	}
	id = pending ? pt->ids[ino] : settled_state(pt, ino);
	if (id && !(id == NODE_PENDING && pending))
		goto out;
	id = NODE_THROUGH_DAEMON;
	if (fd >= 0 && !pt->disabled) {
		int got = ioctl(dev_fd, PT_DEV_IOC_BACKING_OPEN, &map);

		if (got > 0) {
			id = got;
		} else if (errno == EPERM) {
			pt->disabled = 1;
			ck_info("FUSE passthrough needs CAP_SYS_ADMIN: every read goes through the daemon");
		} else if (!pt->warned) {
			pt->warned = 1;
			ck_warn("FUSE passthrough: registering a backing file: %s; such files are served "
				"by the daemon", strerror(errno));
		}
	}
	pt->ids[ino] = id;
out:
	pthread_mutex_unlock(&pt->lock);
	return id;
}

int32_t ckfs_passthrough_state(struct ckfs_passthrough *pt, fuse_ino_t ino)
{
	return node_state(pt, ino);
}

int ckfs_passthrough_claim(struct ckfs_passthrough *pt, fuse_ino_t ino)
{
	int claimed = 0;

	if (!pt->on || pt->disabled)
		return 0;
	pthread_mutex_lock(&pt->lock);
	if (ids_reserve(pt, ino) == 0 && pt->ids[ino] == 0) {
		pt->ids[ino] = NODE_PENDING;
		claimed = 1;
	}
	pthread_mutex_unlock(&pt->lock);
	return claimed;
}

int ckfs_passthrough_settle(struct ckfs *fs, fuse_ino_t ino, int fd)
{
	struct ckfs_passthrough *pt = &fs->passthrough;
	int32_t id = 0;

	if (fd >= 0)
		id = node_decide(pt, fuse_session_fd(fs->se), ino, fd, 1);
	pthread_mutex_lock(&pt->lock);
	if (id <= 0)
		pt->ids[ino] = 0;	/* decided by its first open, as if never claimed */
	pthread_cond_broadcast(&pt->settled);
	pthread_mutex_unlock(&pt->lock);
	return id > 0;
}

void ckfs_passthrough_release(struct ckfs *fs, fuse_ino_t ino)
{
	struct ckfs_passthrough *pt = &fs->passthrough;
	uint32_t id;

	pthread_mutex_lock(&pt->lock);
	if (settled_state(pt, ino) > 0) {
		id = (uint32_t)pt->ids[ino];
		if (ioctl(fuse_session_fd(fs->se), PT_DEV_IOC_BACKING_CLOSE, &id) != 0)
			ck_debug("FUSE passthrough: closing backing file %u: %s", id, strerror(errno));
		pt->ids[ino] = NODE_THROUGH_DAEMON;
	}
	pthread_mutex_unlock(&pt->lock);
}

int ckfs_passthrough_open(struct ckfs *fs, fuse_req_t req, fuse_ino_t ino, struct ck_vfile *f,
			  const struct fuse_file_info *fi)
{
	struct ckfs_passthrough *pt = &fs->passthrough;
	struct fuse_open_out out;
	struct iovec iov = { &out, sizeof(out) };
	int32_t id;
	int fd = -1;

	if (!pt->on)
		return -ENOTSUP;
	id = node_state(pt, ino);
	if (id == 0) {
		/* Only one whole raw file qualifies, verified now since no
		 * read of it will reach the daemon.  A damaged one is served
		 * by the daemon, which refuses the damaged ranges alone; so is
		 * one too large to stay cached between its check and its
		 * reads (it would be read from disk twice), which the daemon
		 * checks as it is read. */
		if (ck_vfile_size(f) > pt->max_size || ck_vfile_whole_file(f, &fd))
			fd = -1;
		id = node_decide(pt, fuse_session_fd(fs->se), ino, fd, 0);
	}
	if (id < 0)
		return -ENOTSUP;
	memset(&out, 0, sizeof(out));
	out.fh = fi->fh;
	out.open_flags = PT_FOPEN_PASSTHROUGH | (fi->noflush ? FOPEN_NOFLUSH : 0);
	out.padding = (uint32_t)id;	/* backing_id since 7.40 */
	return fuse_reply_iov(req, &iov, 1) == -ENOENT ? -ECANCELED : 0;
}

void ckfs_passthrough_destroy(struct ckfs_passthrough *pt)
{
	free(pt->ids);
	pt->ids = NULL;
	pt->cap = 0;
	pthread_cond_destroy(&pt->settled);
	pthread_mutex_destroy(&pt->lock);
}
