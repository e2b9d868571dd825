/* The torch.save container: a ZIP archive of stored entries under one root
 * folder (docs/formats.md §1).  Reader and writer are pure: the reader
 * pulls bytes through a callback, the writer pushes pieces to one, so the
 * same code serves real files, FUSE virtual files and tests.
 */
#ifndef CKPTFS_TORCHZIP_H
#define CKPTFS_TORCHZIP_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/error.h"

/* Reads exactly len bytes at off into buf; returns 0 or -errno (-EIO for short reads). */
typedef int (*tz_pread_fn)(void *ctx, void *buf, size_t len, uint64_t off);

struct tz_entry {
	char *name;            /* record name with the "<root>/" prefix removed ("data.pkl", "data/0") */
	uint64_t lho;          /* local header offset */
	uint64_t data_offset;  /* first byte of the stored data */
	uint64_t size;         /* stored == uncompressed size */
	uint32_t crc32;        /* as recorded in the central directory */
	uint16_t method;       /* 0 = stored (the only method ckptfs serves zero-copy) */
	uint64_t csize;        /* bytes the data occupies in the file (== size when stored) */
};

struct tz_archive {
	char *root;            /* "archive", "model", ... */
	size_t n;
	struct tz_entry *entries;  /* central directory order */
	uint64_t file_size;
	size_t *by_name;       /* private (tz_find): entry indexes sorted by name */
};

/* Magic checks on the first bytes of a file. */
int tz_is_zip(const uint8_t *head, size_t len);           /* "PK\3\4" */
/* Legacy (pre-1.6) torch.save: pickle protocol header followed by the magic
 * number 0x1950a86a20f9469cfc6c, or a tar file. */
int tz_is_legacy_torch(const uint8_t *head, size_t len);

/* Parses the end of central directory (zip64 included), the central
 * directory and every local header.  Validates what miniz validates plus
 * bounds: entries inside the file, no overlaps with the directory or with
 * each other, names under one root (the part before the first '/' of the
 * first entry, as PyTorch takes it), no duplicate names, local names equal
 * to central ones, no encryption, stored entries with csize == size.
 * Other methods (deflate) are listed with their method; callers that serve
 * bytes zero-copy must check method == 0.  Fails with -EINVAL and err
 * ("<what> at offset N: reason") on anything malformed, or with the pread
 * callback's -errno.  Local headers close together are read in batches, so
 * archives with many small records need few reads. */
int tz_read(tz_pread_fn pread, void *ctx, uint64_t file_size,
	    struct tz_archive *out, struct ck_error *err);
void tz_archive_free(struct tz_archive *ar);
/* Entry by record name (without root), or NULL. */
const struct tz_entry *tz_find(const struct tz_archive *ar, const char *name);

/* Writer.  Records are laid out exactly as PyTorch's miniz writer does:
 * local header with the 'FB' padding extra so data starts at a multiple of
 * `align`, stored data, a data descriptor for non-empty records, then the
 * central directory, zip64 EOCD + locator and EOCD.  Zip64 extra fields
 * appear where miniz puts them (size or local-header offset >= 0xFFFFFFFF). */
struct tz_record {
	const char *name;      /* without the root: "data.pkl", "data/0", "version" */
	uint64_t size;
	uint32_t crc32;        /* CRC-32 of the data (known up front) */
};

/* Called in file order.  record == -1: bytes[0..len) are container bytes
 * to write verbatim.  record >= 0: the len bytes of recs[record] go here
 * (bytes is NULL); every record gets exactly one such call, also when its
 * size is 0.  Returns 0 or -errno to abort. */
typedef int (*tz_emit_fn)(void *ctx, long record, const void *bytes, uint64_t len);

/* align: data alignment, 64 as PyTorch writes it (0 means 64; at most
 * 32768).  Returns 0, the emit callback's -errno, -EINVAL (empty root or
 * record name, name longer than 65535 bytes, bad align), -EFBIG (central
 * directory of 4 GiB or more, as miniz refuses) or -ENOMEM. */
int tz_write(const char *root, const struct tz_record *recs, size_t n,
	     unsigned align, tz_emit_fn emit, void *ctx);

/* CRC-32 (zlib polynomial), incremental: crc = ck_crc32(crc, p, n), start at 0. */
uint32_t ck_crc32(uint32_t crc, const void *p, size_t n);

#endif
