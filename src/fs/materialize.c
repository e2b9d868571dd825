/* -o materialize: composites read by passthrough from a file of their own.
 *
 * A synthesized composite has no physical file the kernel could read, so
 * its reads come to the daemon, and its pages live in FUSE's page cache,
 * which this kernel fills with 4 KiB folios: a warm load from it trails a
 * load of the same bytes from ext4's cache (docs/bench.md).  Written once
 * into an O_TMPFILE on a local disk, the bytes become such a physical
 * file: the kernel reads it by passthrough, and the daemon sees no request
 * at all.  The bytes written are those a read would have served, checked
 * first under verify=first (ck_vfile_pages); a file with a byte that fails
 * its check is not materialized, so that its reads reach the daemon, which
 * refuses those bytes alone.  The unnamed file belongs to the daemon (mode
 * 0600) and cannot be opened by name.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "materialize.h"

/* Bytes per write, each ending on a multiple of this size in the file:
 * the page cache takes folios of the write's size where the write is
 * aligned to it, and smaller ones where not (the pieces handed out end at
 * tensor boundaries, anywhere in a page run).  Folios of 256 KiB read
 * within about 10 % of the largest ones while costing far less to fill
 * where large blocks come back cold from a hypervisor (docs/bench.md). */
#define WRITE_PIECE (256u << 10)

struct sink {
	int fd;
	uint64_t pos;	/* bytes written so far */
};

/* ck_pages_fn: the next bytes of the unnamed file.  A gap (pages left out
 * after a failed check) ends the copy: such a file is not materialized. */
static int write_piece(void *arg, uint64_t off, const void *bytes, size_t len)
{
	struct sink *s = arg;
	int rc;

	if (off != s->pos)
		return -EIO;
	for (size_t at = 0, n; at < len; at += n) {
		n = WRITE_PIECE - (size_t)((off + at) % WRITE_PIECE);
		if (n > len - at)
			n = len - at;
		rc = ck_write_all(s->fd, (const uint8_t *)bytes + at, n);
		if (rc)
			return rc;
	}
	s->pos += len;
	return 0;
}

int ckfs_materialize(struct ckfs *fs, fuse_ino_t ino, struct ck_vfile *f, const atomic_int *stop, void *buf,
		     size_t cap, size_t page)
{
	const char *dir = fs->cfg->materialize_dir;
	uint64_t size = ck_vfile_size(f), done = 0;
	struct sink sink = { -1, 0 };
	int rc, ok = 0;

	if (!dir || !ckfs_passthrough_claim(&fs->passthrough, ino))
		return 0;
	sink.fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (sink.fd < 0) {
		rc = -errno;
		ckfs_passthrough_settle(fs, ino, -1);
		return rc;
	}
	/* The space first, where the filesystem can (not posix_fallocate,
	 * which would write zeros elsewhere): a full disk fails here, not
	 * halfway. */
	rc = size && fallocate(sink.fd, 0, 0, (off_t)size) != 0 ? -errno : 0;
	if (rc == -EOPNOTSUPP || rc == -EINVAL)
		rc = 0;
	if (rc == 0)
		rc = ck_vfile_pages(f, size, page, buf, cap, stop, write_piece, &sink, &done);
	if (rc == 0 && done == size && !atomic_load(stop))
		ok = ckfs_passthrough_settle(fs, ino, sink.fd);
	else
		ckfs_passthrough_settle(fs, ino, -1);
	close(sink.fd);	/* a registered file stays open in the kernel */
	if (rc < 0)
		ck_debug("materialize: node %llu: %s", (unsigned long long)ino, strerror(-rc));
	return ok;
}
