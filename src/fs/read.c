/* The read path: open a composite as a ck_vfile, answer each read with the
 * extents the view maps it to, and let libfuse splice the file-backed ones
 * straight from the physical checkpoint files into /dev/fuse.  Extents of
 * packed files are decoded into memory first (the view's chunk cache and
 * prefetch make that a copy for forward readers).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "ckptfs/log.h"
#include "ckptfs/records.h"
#include "ckptfs/view.h"
#include "creds.h"
#include "mount.h"
#include "nodes.h"
#include "passthrough.h"
#include "read.h"
#include "uring.h"

/* Extents a read usually needs; more come from the heap. */
#define STACK_EXTENTS 32

static struct ck_vfile *vfile_of(const struct fuse_file_info *fi)
{
	return (struct ck_vfile *)(uintptr_t)fi->fh;
}

int ckfs_refuse_write_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) == O_RDONLY && !(fi->flags & O_TRUNC))
		return 0;
	fuse_reply_err(req, EROFS);
	return 1;
}

void ckfs_hold_vfile(struct fuse_file_info *fi, struct ck_vfile *f)
{
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->noflush = 1;
}

void ckfs_reply_open_vfile(fuse_req_t req, struct fuse_file_info *fi, struct ck_vfile *f, int direct_io)
{
	/* Its bytes never change: keep the page cache across opens, unless
	 * told to bypass it. */
	fi->direct_io = direct_io != 0;
	fi->keep_cache = !direct_io;
	/* -ENOENT: the open was interrupted and no release will come. */
	if (fuse_reply_open(req, fi) == -ENOENT)
		ck_vfile_put(f);
}

void ckfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ckfs *fs = ckfs_of(req);
	const struct ck_vnode *n;
	struct ck_vfile *f;
	int rc;

	if (ckfs_refuse_write_open(req, fi))
		return;
	n = ckfs_node(fs, ino);
	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	rc = ck_view_open_file(fs->view, n, &f);
	/* After the open, which looked at the sources' owners and modes now. */
	if (!rc && (rc = ckfs_may(req, n, CK_MAY_READ)) != 0)
		ck_vfile_put(f);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	ckfs_hold_vfile(fi, f);
	/* A file served as it was saved: the kernel reads it itself. */
	rc = ckfs_passthrough_open(fs, req, ino, f, fi);
	if (rc != -ENOTSUP) {
		if (rc == -ECANCELED)
			ck_vfile_put(f);	/* interrupted: no release will come */
		return;
	}
	/* -o direct_io: see CKFS_DIO_NONE. */
	ckfs_reply_open_vfile(req, fi, f, fs->cfg->direct_io == CKFS_DIO_ALL ||
				(fs->cfg->direct_io == CKFS_DIO_TORCH && ck_vnode_file_kind(n) == CK_FILE_TORCH));
}

void ckfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	ck_vfile_put(vfile_of(fi));
	fuse_reply_err(req, 0);
}

/* Room for at least one more extent after *n used ones. */
static int grow_extents(struct ck_extent **ext, size_t *cap, struct ck_extent *stack)
{
	size_t new_cap = *cap * 2;
	struct ck_extent *bigger;

	if (*ext == stack) {
		bigger = malloc(new_cap * sizeof(*bigger));
		if (bigger)
			memcpy(bigger, stack, *cap * sizeof(*bigger));
	} else {
		bigger = realloc(*ext, new_cap * sizeof(*bigger));
	}
	if (!bigger)
		return -ENOMEM;
	*ext = bigger;
	*cap = new_cap;
	return 0;
}

/* Maps [off, off+size) into *ext (growing it as needed); returns the
 * number of extents (0 at or past EOF) or -errno. */
static int map_range(struct ck_vfile *f, uint64_t off, uint64_t size,
		     struct ck_extent **ext, size_t *cap, struct ck_extent *stack)
{
	uint64_t done = 0;
	size_t n = 0;

	while (done < size) {
		size_t room;
		uint64_t added = 0;
		int got;

		if (n == *cap && grow_extents(ext, cap, stack))
			return -ENOMEM;
		room = *cap - n;
		got = ck_vfile_map(f, off + done, size - done, *ext + n, room);
		if (got < 0)
			return got;
		for (int i = 0; i < got; i++)
			added += (*ext)[n + i].len;
		n += (size_t)got;
		done += added;
		/* Fewer extents than room means the range (clipped to EOF) is
		 * fully described; no bytes means EOF. */
		if ((size_t)got < room || added == 0)
			break;
	}
	return (int)n;
}

/* Each worker thread decodes into a buffer of its own, kept between
 * requests: a fresh 1 MiB malloc per read is an mmap, page faults and an
 * munmap each time, which cost more than the copy. */
static pthread_key_t decode_key;
static pthread_once_t decode_once = PTHREAD_ONCE_INIT;
static int decode_key_failed;

struct decode_buf {
	uint8_t *p;
	size_t cap;
};

static void decode_buf_free(void *arg)
{
	struct decode_buf *b = arg;

	free(b->p);
	free(b);
}

static void decode_key_init(void)
{
	decode_key_failed = pthread_key_create(&decode_key, decode_buf_free) != 0;
}

static uint8_t *decode_buf_get(size_t len)
{
	struct decode_buf *b;

	pthread_once(&decode_once, decode_key_init);
	if (decode_key_failed)
		return NULL;
	b = pthread_getspecific(decode_key);
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b || pthread_setspecific(decode_key, b)) {
			free(b);
			return NULL;
		}
	}
	if (b->cap < len) {
		uint8_t *p = realloc(b->p, len);

		if (!p)
			return NULL;
		b->p = p;
		b->cap = len;
	}
	return b->p;
}

/* Decodes the packed extents of ext[0..n) into the thread's buffer and
 * turns them into memory extents (valid until the thread's next read).
 * 0 or -errno. */
static int decode_packed(struct ck_extent *ext, int n)
{
	uint64_t total = 0;
	uint8_t *p;

	for (int i = 0; i < n; i++)
		if (ext[i].packed)
			total += ext[i].len;
	if (!total)
		return 0;
	p = decode_buf_get(total);
	if (!p)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		int rc;

		if (!ext[i].packed)
			continue;
		rc = ck_extent_read(&ext[i], p);
		if (rc)
			return rc;
		ext[i].mem = p;
		ext[i].packed = NULL;
		p += ext[i].len;
	}
	return 0;
}

static int all_in_memory(const struct ck_extent *ext, int n)
{
	for (int i = 0; i < n; i++)
		if (!ext[i].mem)
			return 0;
	return 1;
}

/* Decoded (packed) bytes go to the kernel with one writev, which copies
 * them straight into the file's page cache.  fuse_reply_data would splice
 * several memory buffers: a copy into freshly allocated pipe pages, then a
 * second copy out of them (docs/bench.md, composite_read). */
static void reply_from_memory(fuse_req_t req, const struct ck_extent *ext, int n)
{
	struct iovec stack_iov[STACK_EXTENTS];
	struct iovec *iov = n <= STACK_EXTENTS ? stack_iov : malloc((size_t)n * sizeof(*iov));
	int rc;

	if (!iov) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (int i = 0; i < n; i++) {
		iov[i].iov_base = (void *)(uintptr_t)ext[i].mem;	/* only read from */
		iov[i].iov_len = ext[i].len;
	}
	rc = fuse_reply_iov(req, iov, n);
	if (rc < 0 && rc != -ENOENT)
		ck_debug("read reply of %d buffers failed: %s", n, strerror(-rc));
	if (iov != stack_iov)
		free(iov);
}

/* A request from a FUSE ring (uring.h): every extent is copied once, into
 * the ring's reply buffer, which the kernel copies from.  Splicing a file's
 * bytes is not possible there.  1 when answered this way, else 0. */
static int reply_in_ring(fuse_req_t req, const struct ck_extent *ext, int n)
{
	uint64_t total = 0;
	size_t cap = 0;
	uint8_t *buf = ckfs_uring_reply_buffer(&cap);

	if (!buf)
		return 0;
	for (int i = 0; i < n; i++)
		total += ext[i].len;
	if (total > cap)
		return 0;
	total = 0;
	for (int i = 0; i < n; i++) {
		int rc = ck_extent_read(&ext[i], buf + total);

		if (rc) {
			fuse_reply_err(req, -rc);
			return 1;
		}
		total += ext[i].len;
	}
	fuse_reply_buf(req, (const char *)buf, total);
	return 1;
}

void ckfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct ck_extent stack[STACK_EXTENTS];
	struct ck_extent *ext = stack;
	size_t cap = STACK_EXTENTS;
	struct fuse_bufvec *bv;
	/* The kernel may send the release as soon as the reply's bytes are
	 * in, while this thread is still returning from writev (ASan checks
	 * the buffers then): the file lives until this read is done. */
	struct ck_vfile *f = ck_vfile_get(vfile_of(fi));
	int n, rc;

	(void)ino;
	n = map_range(f, (uint64_t)off, size, &ext, &cap, stack);
	if (n > 0 && reply_in_ring(req, ext, n))
		goto out;
	if (n > 0) {
		rc = decode_packed(ext, n);
		if (rc)
			n = rc;
	}
	if (n <= 0) {
		if (n == 0)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_err(req, -n);
		goto out;
	}
	if (all_in_memory(ext, n)) {
		reply_from_memory(req, ext, n);
		goto out;
	}
	/* struct fuse_bufvec ends in buf[1]: room for n buffers. */
	bv = malloc(sizeof(*bv) + (size_t)(n - 1) * sizeof(bv->buf[0]));
	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		goto out;
	}
	bv->count = (size_t)n;
	bv->idx = 0;
	bv->off = 0;
	for (int i = 0; i < n; i++) {
		struct fuse_buf *b = &bv->buf[i];

		memset(b, 0, sizeof(*b));
		b->size = ext[i].len;
		if (ext[i].mem) {
			b->mem = (void *)(uintptr_t)ext[i].mem;	/* only read from */
		} else {
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			b->fd = ext[i].fd;
			b->pos = (off_t)ext[i].fd_off;
		}
	}
	/* Splices fd-backed buffers when the kernel and the pipe allow it,
	 * else copies; either way the reply is complete or an error. */
	rc = fuse_reply_data(req, bv, 0);
	if (rc < 0 && rc != -ENOENT)
		ck_debug("read reply of %zu bytes at %lld failed: %s", size,
			 (long long)off, strerror(-rc));
	free(bv);
out:
	if (ext != stack)
		free(ext);
	ck_vfile_put(f);
}
