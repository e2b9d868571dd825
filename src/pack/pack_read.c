/* Reading packs: the file header, one record by offset, and a scan over all. */
#include "config.h"
#include "pack_int.h"
#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ck_pack_file_header(uint8_t out[CK_PACK_HEADER])
{
	uint32_t crc;

	memcpy(out, CK_PACK_MAGIC, 8);
	for (int i = 0; i < 4; i++)
		out[8 + i] = (uint8_t)(CK_PACK_VERSION >> (8 * i));
	crc = ck_crc32(0, out, 12);
	for (int i = 0; i < 4; i++)
		out[12 + i] = (uint8_t)(crc >> (8 * i));
}

int ck_pack_check_header(int fd, uint32_t *version, struct ck_error *err)
{
	uint8_t h[CK_PACK_HEADER];
	int rc = ck_pread_full(fd, h, sizeof(h), 0);

	if (rc == -EIO)
		return ck_fail(err, EIO, "pack: file shorter than its %d-byte header", CK_PACK_HEADER);
	if (rc)
		return ck_fail(err, -rc, "pack: reading the header: %s", strerror(-rc));
	if (memcmp(h, CK_PACK_MAGIC, 8) != 0)
		return ck_fail(err, EINVAL, "pack: not a pack file (bad magic)");
	if (ck_le32(h + 12) != ck_crc32(0, h, 12))
		return ck_fail(err, EINVAL, "pack: file header CRC-32 mismatch");
	if (ck_le32(h + 8) < CK_PACK_VERSION_MIN || ck_le32(h + 8) > CK_PACK_VERSION)
		return ck_fail(err, EINVAL, "pack: unsupported version %" PRIu32 " (this build reads %d to %d)",
			       ck_le32(h + 8), CK_PACK_VERSION_MIN, CK_PACK_VERSION);
	if (version)
		*version = ck_le32(h + 8);
	return 0;
}

/* Puts "pack record at OFF: " before the reason already in err. */
static int at_offset(struct ck_error *err, int rc, uint64_t off)
{
	char why[sizeof(err->msg)];

	if (!err)
		return rc;
	memcpy(why, err->msg, sizeof(why));
	why[sizeof(why) - 1] = 0;
	return ck_fail(err, -rc, "pack record at %" PRIu64 ": %s", off, why);
}

/* Bytes of payload read together with a record's header: the zip headers
 * and pickles a composite's parse decodes are records of a few dozen
 * bytes, and one read instead of two halves the system calls there. */
#define PAYLOAD_AHEAD 4096

/* Up to len bytes at off, fewer only at the end of the file. */
static int pread_upto(int fd, uint8_t *buf, size_t len, uint64_t off, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t n = pread(fd, buf + *got, len - *got, (off_t)(off + *got));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

/* Reads the record at off; *rec_len (unless NULL) is set to its length,
 * header and payload. */
static int read_record(int fd, uint64_t off, struct ck_chunk_desc *desc, uint8_t *payload, int check,
		       uint64_t *rec_len, struct ck_error *err)
{
	uint8_t first[CK_PACK_REC_HEADER_MAX + PAYLOAD_AHEAD];
	size_t got, have, hl;
	int rc;

	if (off < CK_PACK_HEADER)
		return ck_fail(err, EINVAL, "pack record at %" PRIu64 ": inside the file header", off);
	rc = pread_upto(fd, first, sizeof(first), off, &got);
	if (rc)
		return ck_fail(err, -rc, "pack record at %" PRIu64 ": %s", off, strerror(-rc));
	rc = ck_pack_rec_parse(first, got, desc, err);
	if (rc < 0)
		return at_offset(err, rc, off);
	hl = (size_t)rc;
	have = got - hl;
	if (have > desc->enc_len)
		have = desc->enc_len;
	memcpy(payload, first + hl, have);
	if (have < desc->enc_len) {
		rc = ck_pread_full(fd, payload + have, desc->enc_len - have, off + hl + have);
		if (rc == -EIO)
			return ck_fail(err, EIO, "pack record at %" PRIu64 ": payload cut short by the end of the file",
				       off);
		if (rc)
			return ck_fail(err, -rc, "pack record at %" PRIu64 ": %s", off, strerror(-rc));
	}
	rc = check ? ck_pack_rec_check(first, hl, payload, desc->enc_len, err) : 0;
	if (rc)
		return at_offset(err, rc, off);
	if (rec_len)
		*rec_len = hl + (uint64_t)desc->enc_len;
	return 0;
}

int ck_pack_read_record(int fd, uint64_t off, struct ck_chunk_desc *desc, uint8_t *payload,
			struct ck_error *err)
{
	return read_record(fd, off, desc, payload, 1, NULL, err);
}

int ck_pack_read_record_unchecked(int fd, uint64_t off, struct ck_chunk_desc *desc, uint8_t *payload,
				  struct ck_error *err)
{
	return read_record(fd, off, desc, payload, 0, NULL, err);
}

int ck_pack_read_chunk(int fd, uint64_t off, struct ck_chunk_ctx *ctx, uint8_t *buf,
		       const void *ref, size_t ref_len, const struct ck_hash128 *ref_hash, void *out,
		       struct ck_chunk_desc *desc, struct ck_error *err)
{
	int rc = ck_pack_read_record(fd, off, desc, buf, err);

	if (rc)
		return rc;
	if (ref && ref_hash)
		rc = ck_chunk_decode_known_ref(ctx, desc, buf, ref, ref_len, *ref_hash, out, err);
	else
		rc = ck_chunk_decode(ctx, desc, buf, ref, ref_len, out, err);
	return rc && rc != -ENOMEM ? at_offset(err, rc, off) : rc;
}

/* What both scans start with: the pack's header checked, the first
 * record's offset (*off, also *end) and where the scan stops (*size: the
 * file's end, or to), and a buffer of cap bytes (*buf, the caller frees
 * it).  0 or -errno with err. */
static int scan_begin(int fd, uint64_t from, uint64_t to, size_t cap, uint8_t **buf, uint64_t *off,
		      uint64_t *size, uint64_t *end, struct ck_error *err)
{
	struct stat st;
	int rc;

	*end = 0;
	rc = ck_pack_check_header(fd, NULL, err);
	if (rc)
		return rc;
	if (fstat(fd, &st) < 0)
		return ck_fail(err, errno, "pack: fstat: %s", strerror(errno));
	*size = (uint64_t)st.st_size < to ? (uint64_t)st.st_size : to;
	*buf = malloc(cap);
	if (!*buf)
		return -ENOMEM;
	*off = *end = from < CK_PACK_HEADER ? CK_PACK_HEADER : from;
	return 0;
}

int ck_pack_scan_headers(int fd, uint64_t from, uint64_t to, ck_pack_scan_fn fn, void *cb, uint64_t *end,
			 struct ck_error *err)
{
	enum { WINDOW = 256 << 10 };
	uint8_t *win;
	uint64_t off, size, wstart = 0;
	size_t wlen = 0;
	int rc = scan_begin(fd, from, to, WINDOW, &win, &off, &size, end, err);

	if (rc)
		return rc;
	while (off < size) {
		struct ck_chunk_desc d;
		uint64_t hl;
		size_t avail;

		/* Headers a window at a time: the payloads between them are skipped. */
		if (off < wstart || off + CK_PACK_REC_HEADER_MAX > wstart + wlen) {
			wstart = off;
			rc = pread_upto(fd, win, WINDOW, off, &wlen);
			if (rc) {
				ck_fail(err, -rc, "pack record at %" PRIu64 ": %s", off, strerror(-rc));
				break;
			}
		}
		avail = wlen - (size_t)(off - wstart);
		rc = ck_pack_rec_parse(win + (off - wstart), avail, &d, err);
		if (rc < 0) {
			at_offset(err, rc, off);
			break;
		}
		hl = (uint64_t)rc;
		if (off + hl + d.enc_len > size) {
			rc = ck_fail(err, EIO, "pack record at %" PRIu64 ": payload cut short by the end of the file",
				     off);
			break;
		}
		if (fn && (rc = fn(cb, off, &d, NULL)) != 0)
			break;
		off += hl + d.enc_len;
		*end = off;
		rc = 0;
	}
	free(win);
	return rc;
}

int ck_pack_scan(int fd, ck_pack_scan_fn fn, void *cb, uint64_t *end, struct ck_error *err)
{
	return ck_pack_scan_range(fd, CK_PACK_HEADER, UINT64_MAX, fn, cb, end, err);
}

int ck_pack_scan_range(int fd, uint64_t from, uint64_t to, ck_pack_scan_fn fn, void *cb, uint64_t *end,
		       struct ck_error *err)
{
	uint8_t *payload;
	uint64_t off, size;
	int rc = scan_begin(fd, from, to, CK_CHUNK_MAX, &payload, &off, &size, end, err);

	if (rc)
		return rc;
	while (off < size) {
		struct ck_chunk_desc d;
		uint64_t len = 0;

		rc = read_record(fd, off, &d, payload, 1, &len, err);
		if (!rc && fn)
			rc = fn(cb, off, &d, payload);
		if (rc)
			break;
		off += len;
		*end = off;
	}
	free(payload);
	return rc;
}
