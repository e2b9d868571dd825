/* Pack files: append-only files of encoded chunks (docs/format.md, "Pack
 * files").
 *
 * A pack is a 16-byte file header followed by records, each a header
 * (codec, element size, lengths, the XXH3-128 of the raw bytes and of a
 * delta's reference, CRC-32 of header and payload) and the chunk's
 * payload.  Records are only ever appended;
 * what identifies one is its offset.  After a crash the file may end in a
 * torn record: reopening for append finds the end of the last complete one
 * and cuts the rest away.
 *
 * Threads: a writer may be shared (appends are serialized inside); reading
 * functions work on a file descriptor with pread and keep no state, so any
 * number of threads may read one pack at once, each with its own buffers
 * and struct ck_chunk_ctx.
 */
#ifndef CKPTFS_PACK_H
#define CKPTFS_PACK_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/chunk.h"
#include "ckptfs/error.h"

#define CK_PACK_MAGIC "ckptpack"        /* 8 bytes, no NUL */
/* Version 2 added the rot codec and sparse planes, version 3 compact
 * record headers and payloads, version 4 the lossy codecs (quant,
 * qdelta).  Readers read every version; writers write only the newest
 * and never append to an older pack (compaction starts a new one), so a
 * pack holds only what readers of its version know. */
#define CK_PACK_VERSION 4
#define CK_PACK_VERSION_MIN 1
#define CK_PACK_HEADER 16               /* file header bytes */
/* Record headers.  Versions 1 and 2: 52 bytes starting "CKCH".  Version 3:
 * 22 to 46 bytes starting CK_PACK_REC_MAGIC3 (docs/format.md). */
#define CK_PACK_REC_MAGIC "CKCH"        /* 4 bytes, no NUL */
#define CK_PACK_REC_HEADER_V2 52
#define CK_PACK_REC_MAGIC3 0xC3
#define CK_PACK_REC_HEADER_MAX 52       /* the larger of the two forms */
/* Largest record: header and a payload of at most CK_CHUNK_MAX bytes. */
#define CK_PACK_REC_MAX (CK_PACK_REC_HEADER_MAX + CK_CHUNK_MAX)

/* Header of a record in the compact form (version 3): fills out for desc
 * and payload (the CRC covers both).  Returns its length in bytes, or
 * -EINVAL for a descriptor the format cannot hold. */
int ck_pack_rec_header(const struct ck_chunk_desc *desc, const uint8_t *payload,
		       uint8_t out[CK_PACK_REC_HEADER_MAX]);
/* Bytes of the header ck_pack_rec_header writes for desc. */
size_t ck_pack_rec_header_len(const struct ck_chunk_desc *desc);
/* Parses and checks a record header of either form at the start of the
 * avail bytes at hdr (magic, codec, element size, lengths, reserved bits)
 * into desc; the CRC is checked by ck_pack_rec_check once the payload is
 * there.  Returns the header's length, -EINVAL with err for a malformed
 * header, or -EIO with err when avail ends inside it. */
int ck_pack_rec_parse(const uint8_t *hdr, size_t avail, struct ck_chunk_desc *desc,
		      struct ck_error *err);
/* Checks the CRC (the header's last 4 bytes) over the hdr_len-byte header
 * and the enc_len-byte payload: 0 or -EIO with err. */
int ck_pack_rec_check(const uint8_t *hdr, size_t hdr_len, const uint8_t *payload, uint32_t enc_len,
		      struct ck_error *err);

/* Writer. */
struct ck_pack_writer;

struct ck_pack_open_info {
	uint64_t end;        /* where the next record goes */
	uint64_t records;    /* complete records found */
	uint64_t dropped;    /* bytes of a torn tail cut away */
	int created;         /* the file was new */
	uint32_t version;    /* the file header's version */
};

/* Opens path for appending, creating it (header written, file and
 * directory fsynced) when it does not exist.  An existing pack is scanned:
 * records are valid up to the first one that is incomplete or does not
 * check (a torn tail from a crash), and the file is truncated there and
 * fsynced.  durable_end is the end of the last record the caller knows was
 * made durable (ck_pack_sync) and referenced — the store's index knows it;
 * 0 when nothing is: a bad record before it, or a file that ends before
 * it, is damage, not a torn tail, and the open fails with -EIO rather than
 * cut anything away.  With durable_end 0, a file shorter than its header
 * (a crash right after creating it) is started again.  info may be NULL.
 * Returns 0, -EINVAL (not a pack, unsupported version), -EIO or -errno. */
int ck_pack_writer_open(const char *path, uint64_t durable_end, struct ck_pack_writer **out,
			struct ck_pack_open_info *info, struct ck_error *err);
/* Appends a record and sets *offset to where it starts.  Safe to call from
 * several threads.  The record may wait in the writer's memory (records are
 * written in large O_DIRECT blocks where the filesystem allows): it is in
 * the file for readers once ck_pack_flush, ck_pack_sync or
 * ck_pack_writer_close returned 0.  On a failed write this record is not
 * appended (in the buffered fallback the file is cut back).  Returns 0,
 * -EINVAL (bad descriptor), -EFBIG or -errno. */
int ck_pack_append(struct ck_pack_writer *w, const struct ck_chunk_desc *desc,
		   const uint8_t *payload, uint64_t *offset);
/* Writes every record appended so far into the file (not durably): other
 * descriptors read them from then on.  0 or -errno. */
int ck_pack_flush(struct ck_pack_writer *w);
/* Flush and fdatasync: records appended before the call are durable when
 * it returns 0. */
int ck_pack_sync(struct ck_pack_writer *w);
/* Offset where the next record goes. */
uint64_t ck_pack_writer_end(struct ck_pack_writer *w);
/* Flushes (not durably) and closes the file; returns 0, or the flush's
 * or close()'s -errno.  NULL is a no-op. */
int ck_pack_writer_close(struct ck_pack_writer *w);

/* Reader. */

/* Checks the file header at the start of fd: 0, -EINVAL with err (not a
 * pack, a version outside CK_PACK_VERSION_MIN..CK_PACK_VERSION, bad header
 * CRC) or -EIO for a short file.  version, unless NULL, is set to the
 * header's version. */
int ck_pack_check_header(int fd, uint32_t *version, struct ck_error *err);

/* Reads the record at off into desc and payload (room for CK_CHUNK_MAX
 * bytes), checking its header and CRC.  Returns 0; -EINVAL with err for a
 * malformed header; -EIO with err for a CRC mismatch or a record cut short
 * by the end of the file; or pread's -errno. */
int ck_pack_read_record(int fd, uint64_t off, struct ck_chunk_desc *desc, uint8_t *payload,
			struct ck_error *err);
/* As ck_pack_read_record without the CRC (the header's fields are still
 * checked): for a reader that hashes what it decodes anyway, and reads
 * again with the CRC to say why when that hash does not match. */
int ck_pack_read_record_unchecked(int fd, uint64_t off, struct ck_chunk_desc *desc, uint8_t *payload,
				  struct ck_error *err);

/* Reads the record at off and decodes it into out (room for CK_CHUNK_MAX
 * bytes; desc->raw_len of them are the chunk), given the reference chunk
 * when the record is a delta (ref may be NULL otherwise; out may be ref,
 * for a chain decoded in place) and, when its bytes were checked already,
 * their hash (ref_hash, else NULL: see ck_chunk_decode_known_ref).  buf is
 * scratch for the payload (CK_CHUNK_MAX bytes).  Returns what
 * ck_pack_read_record and ck_chunk_decode return. */
int ck_pack_read_chunk(int fd, uint64_t off, struct ck_chunk_ctx *ctx, uint8_t *buf,
		       const void *ref, size_t ref_len, const struct ck_hash128 *ref_hash, void *out,
		       struct ck_chunk_desc *desc, struct ck_error *err);

/* Scanner: calls fn for every complete, checked record in file order (the
 * payload is valid during the call).  A non-zero return from fn stops the
 * scan and is returned.  On return *end is the offset after the last good
 * record.  Returns 0 when the records run cleanly to the end of the file,
 * or the -EINVAL / -EIO of the first bad or incomplete record (err names
 * its offset and why), or -errno. */
typedef int (*ck_pack_scan_fn)(void *cb, uint64_t off, const struct ck_chunk_desc *desc,
			       const uint8_t *payload);
int ck_pack_scan(int fd, ck_pack_scan_fn fn, void *cb, uint64_t *end, struct ck_error *err);
/* The same over the records from offset from (a record boundary) up to to
 * (or the end of the file, whichever comes first). */
/* Headers only, over the records from offset from up to to: fn gets each
 * record's offset and descriptor and a NULL payload; payloads are skipped,
 * neither read nor checked (a reader checks each chunk's hash when it
 * decodes it).  A few hundred bytes read per record, where the scan above
 * reads the whole pack: what another node does to locate the records
 * compaction appended (src/store/follow.c).  Ends at the first header that
 * does not parse or whose payload runs past the end, as the scan does. */
int ck_pack_scan_headers(int fd, uint64_t from, uint64_t to, ck_pack_scan_fn fn, void *cb, uint64_t *end,
			 struct ck_error *err);
int ck_pack_scan_range(int fd, uint64_t from, uint64_t to, ck_pack_scan_fn fn, void *cb, uint64_t *end,
		       struct ck_error *err);

#endif
