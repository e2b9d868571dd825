/* Appending to packs, and finding where a pack really ends after a crash. */
#include "config.h"
#include "pack_int.h"
#include "ckptfs/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Appends are gathered in memory and written in large aligned blocks with
 * O_DIRECT: a compaction streams gigabytes of records that nobody reads
 * soon, and copying them into the page cache can cost as much CPU as
 * encoding them (docs/bench.md).  The partial last block is written through
 * a second, buffered descriptor whenever the records must be readable
 * (flush, sync, close), and rewritten whole by the next direct write.
 * Where O_DIRECT is refused (tmpfs, some FUSE filesystems) everything goes
 * through the buffered descriptor. */
#define DIRECT_ALIGN 4096u
#define WRITE_BUF (8u << 20)

struct ck_pack_writer {
	int fd;                 /* buffered */
	int dfd;                /* O_DIRECT, or -1 */
	uint64_t end;           /* logical end: every record appended */
	uint8_t *buf;           /* bytes [buf_off, end), buf_off aligned */
	uint64_t buf_off;
	uint64_t readable;      /* [0, readable) is in the file */
	pthread_mutex_t lock;   /* serializes appends */
};

static int fsync_parent(const char *path)
{
	char *copy = strdup(path);
	int fd, rc = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

static int pwrite_full(int fd, const struct iovec *iov_in, int n, uint64_t off)
{
	struct iovec iov[2];

	memcpy(iov, iov_in, sizeof(iov[0]) * (size_t)n);
	while (n > 0) {
		ssize_t put = pwritev(fd, iov, n, (off_t)off);

		if (put < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (uint64_t)put;
		while (n > 0 && (size_t)put >= iov[0].iov_len) {
			put -= (ssize_t)iov[0].iov_len;
			memmove(iov, iov + 1, sizeof(iov[0]) * (size_t)(n - 1));
			n--;
		}
		if (n > 0) {
			iov[0].iov_base = (uint8_t *)iov[0].iov_base + put;
			iov[0].iov_len -= (size_t)put;
		}
	}
	return 0;
}

/* A new pack: the header, durable with its directory entry. */
static int create_pack(int fd, const char *path, struct ck_error *err)
{
	uint8_t h[CK_PACK_HEADER];
	struct iovec iov = { h, sizeof(h) };
	int rc;

	ck_pack_file_header(h);
	rc = pwrite_full(fd, &iov, 1, 0);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (!rc)
		rc = fsync_parent(path);
	return rc ? ck_fail(err, -rc, "pack %s: creating: %s", path, strerror(-rc)) : 0;
}

/* Shorter than a file header: nothing in it can be a record. */
static int short_header(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_size < CK_PACK_HEADER;
}

static int count_record(void *cb, uint64_t off, const struct ck_chunk_desc *d, const uint8_t *payload)
{
	(*(uint64_t *)cb)++;
	return 0;
}

/* Finds the end of the last good record; cuts a torn tail after it away. */
static int recover_tail(int fd, const char *path, uint64_t durable_end, struct ck_pack_open_info *info,
			struct ck_error *err)
{
	struct stat st;
	uint64_t end;
	int rc = ck_pack_scan(fd, count_record, &info->records, &end, err);

	if (rc == 0 && end < durable_end)
		return ck_fail(err, EIO, "pack %s: ends at %" PRIu64 ", before its durable end %" PRIu64,
			       path, end, durable_end);
	if (rc == 0) {
		info->end = end;
		return 0;
	}
	if (rc != -EIO && rc != -EINVAL)
		return rc;
	if (end < CK_PACK_HEADER)
		return rc;      /* the file header itself is bad */
	if (end < durable_end) {
		char why[sizeof(err->msg)] = "bad record";

		if (err)
			snprintf(why, sizeof(why), "%s", err->msg);
		return ck_fail(err, EIO, "pack %s: damaged before its durable end %" PRIu64 ": %s",
			       path, durable_end, why);
	}
	if (fstat(fd, &st) < 0)
		return ck_fail(err, errno, "pack %s: fstat: %s", path, strerror(errno));
	if (ftruncate(fd, (off_t)end) < 0 || fsync(fd) < 0)
		return ck_fail(err, errno, "pack %s: cutting a torn tail at %" PRIu64 ": %s",
			       path, end, strerror(errno));
	info->dropped = (uint64_t)st.st_size - end;
	info->end = end;
	return 0;
}

int ck_pack_writer_open(const char *path, uint64_t durable_end, struct ck_pack_writer **out,
			struct ck_pack_open_info *info_out, struct ck_error *err)
{
	struct ck_pack_open_info info = { 0 };
	struct ck_pack_writer *w;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		info.created = fd >= 0;
	}
	if (fd < 0)
		return ck_fail(err, errno, "pack %s: %s", path, strerror(errno));
	if (!info.created && durable_end == 0 && short_header(fd)) {
		/* a crash between creating the file and its header being durable */
		info.created = ftruncate(fd, 0) == 0;
		if (!info.created) {
			rc = ck_fail(err, errno, "pack %s: %s", path, strerror(errno));
			goto fail;
		}
	}
	if (info.created) {
		rc = create_pack(fd, path, err);
		info.end = CK_PACK_HEADER;
		info.version = CK_PACK_VERSION;
	} else {
		rc = recover_tail(fd, path, durable_end, &info, err);
		if (rc == 0)
			rc = ck_pack_check_header(fd, &info.version, err);
	}
	if (rc)
		goto fail;
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = pthread_mutex_init(&w->lock, NULL);
	if (rc) {
		free(w);
		rc = -rc;
		goto fail;
	}
	w->fd = fd;
	w->end = w->readable = info.end;
	w->dfd = -1;
	w->buf_off = info.end & ~(uint64_t)(DIRECT_ALIGN - 1);
	if (posix_memalign((void **)&w->buf, DIRECT_ALIGN, WRITE_BUF) != 0) {
		w->buf = NULL;
	} else if (w->buf_off < w->end &&
		   ck_pread_full(fd, w->buf, (size_t)(w->end - w->buf_off), w->buf_off) < 0) {
		free(w->buf);   /* the partial block cannot be carried: all buffered */
		w->buf = NULL;
	}
	if (w->buf)
		w->dfd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (w->dfd < 0) {
		free(w->buf);
		w->buf = NULL;
	}
	*out = w;
	if (info_out)
		*info_out = info;
	return 0;
fail:
	close(fd);
	return rc;
}

/* Buffered mode: the record straight into the file. */
static int append_buffered(struct ck_pack_writer *w, const struct iovec *iov)
{
	int rc = pwrite_full(w->fd, iov, 2, w->end);

	if (rc) {
		/* Leave no partial record behind the end.  If even this fails, a
		 * reopen cuts it away as a torn tail. */
		if (ftruncate(w->fd, (off_t)w->end) < 0)
			ck_debug("pack: cutting a failed append: %s", strerror(errno));
		return rc;
	}
	w->readable = w->end + iov[0].iov_len + iov[1].iov_len;
	return 0;
}

/* Leaves the buffer for good after a refused direct write: what it holds
 * goes through the buffered descriptor. */
static int leave_direct(struct ck_pack_writer *w)
{
	struct iovec iov[2] = { { w->buf + (w->readable - w->buf_off), (size_t)(w->end - w->readable) },
				{ NULL, 0 } };
	int rc = w->end > w->readable ? pwrite_full(w->fd, iov, 2, w->readable) : 0;

	close(w->dfd);
	w->dfd = -1;
	free(w->buf);
	w->buf = NULL;
	if (rc == 0)
		w->readable = w->end;
	return rc;
}

/* Writes the whole blocks of the buffer with O_DIRECT and keeps the partial
 * last one at its start.  0 or -errno. */
static int flush_blocks(struct ck_pack_writer *w)
{
	size_t have = (size_t)(w->end - w->buf_off);
	size_t whole = have & ~(size_t)(DIRECT_ALIGN - 1);
	size_t done = 0;

	while (done < whole) {
		ssize_t put = pwrite(w->dfd, w->buf + done, whole - done, (off_t)(w->buf_off + done));

		if (put < 0 && errno == EINTR)
			continue;
		if (put < 0 && errno == EINVAL && done == 0)
			return leave_direct(w);   /* the filesystem's alignment is not ours */
		if (put < 0)
			return -errno;
		done += (size_t)put & ~(size_t)(DIRECT_ALIGN - 1);
		if ((size_t)put % DIRECT_ALIGN)
			return -EIO;   /* a short direct write: not expected of a local file */
	}
	if (w->buf_off + whole > w->readable)
		w->readable = w->buf_off + whole;
	memmove(w->buf, w->buf + whole, have - whole);
	w->buf_off += whole;
	return 0;
}

/* Makes every appended record readable through the file: whole blocks
 * direct, the partial one buffered. */
static int flush_locked(struct ck_pack_writer *w)
{
	struct iovec iov[2] = { { NULL, 0 }, { NULL, 0 } };
	int rc;

	if (!w->buf || w->readable == w->end)
		return 0;
	rc = flush_blocks(w);
	if (rc || !w->buf || w->readable >= w->end)
		return rc;
	iov[0].iov_base = w->buf + (w->readable - w->buf_off);
	iov[0].iov_len = (size_t)(w->end - w->readable);
	rc = pwrite_full(w->fd, iov, 2, w->readable);
	if (rc == 0)
		w->readable = w->end;
	return rc;
}

int ck_pack_append(struct ck_pack_writer *w, const struct ck_chunk_desc *d, const uint8_t *payload,
		   uint64_t *offset)
{
	uint8_t hdr[CK_PACK_REC_HEADER_MAX];
	int rc = ck_pack_rec_header(d, payload, hdr);
	size_t hl = rc > 0 ? (size_t)rc : 0, len = hl + d->enc_len;
	struct iovec iov[2] = { { hdr, hl }, { (void *)payload, d->enc_len } };

	if (rc < 0)
		return rc;
	rc = 0;
	pthread_mutex_lock(&w->lock);
	if (w->end > (uint64_t)INT64_MAX - CK_PACK_REC_MAX) {
		rc = -EFBIG;
		goto out;
	}
	if (w->buf && w->end - w->buf_off + len > WRITE_BUF)
		rc = flush_blocks(w);
	if (rc)
		goto out;
	if (!w->buf) {
		rc = append_buffered(w, iov);
	} else {
		uint8_t *at = w->buf + (w->end - w->buf_off);

		memcpy(at, hdr, hl);
		memcpy(at + hl, payload, d->enc_len);
	}
	if (rc == 0) {
		*offset = w->end;
		w->end += len;
	}
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int ck_pack_flush(struct ck_pack_writer *w)
{
	int rc;

	pthread_mutex_lock(&w->lock);
	rc = flush_locked(w);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int ck_pack_sync(struct ck_pack_writer *w)
{
	int rc = ck_pack_flush(w);

	if (rc == 0 && fdatasync(w->fd) < 0)
		rc = -errno;
	return rc;
}

uint64_t ck_pack_writer_end(struct ck_pack_writer *w)
{
	uint64_t end;

	pthread_mutex_lock(&w->lock);
	end = w->end;
	pthread_mutex_unlock(&w->lock);
	return end;
}

int ck_pack_writer_close(struct ck_pack_writer *w)
{
	int rc = 0;

	if (!w)
		return 0;
	rc = flush_locked(w);
	if (w->dfd >= 0)
		close(w->dfd);
	free(w->buf);
	if (close(w->fd) < 0 && rc == 0)
		rc = -errno;
	pthread_mutex_destroy(&w->lock);
	free(w);
	return rc;
}
