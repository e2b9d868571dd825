/* Fuzz target: pack records and the chunk decoder.
 *
 * Input: one record (a header of either form, then the payload) followed
 * by the reference chunk of a delta (the bytes after the payload).
 * The header is parsed; the payload is decoded whether or not its CRC
 * matches, so that crafted payloads reach the decoder.  Whatever decodes
 * must hash as recorded and survive a re-encode round trip.  Then the same
 * bytes behind a pack file header go through the scanner and the reader
 * by offset, from a memfd.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckptfs/pack.h"
#include "ckptfs/torchzip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ck_chunk_ctx *ctx;
static uint8_t *out, *again, *buf;

static void need(int ok)
{
	if (!ok)
		abort();
}

static void decode_record(const uint8_t *data, size_t size)
{
	struct ck_chunk_desc d, d2;
	struct ck_error err = { "" };
	const uint8_t *payload, *ref, *p2;
	size_t ref_len, hl;
	int rc;

	rc = ck_pack_rec_parse(data, size, &d, &err);
	if (rc < 0) {
		need((rc == -EINVAL || rc == -EIO) && err.msg[0]);
		return;
	}
	hl = (size_t)rc;
	need(hl <= size && hl <= CK_PACK_REC_HEADER_MAX);
	if (d.enc_len > size - hl)
		return;
	payload = data + hl;
	rc = ck_pack_rec_check(data, hl, payload, d.enc_len, &err);
	need(rc == 0 || (rc == -EIO && err.msg[0]));
	if (data[0] == CK_PACK_REC_MAGIC3 && rc == 0) {
		/* a compact header that checks is the one the writer makes */
		uint8_t again_hdr[CK_PACK_REC_HEADER_MAX];

		need(ck_pack_rec_header(&d, payload, again_hdr) == (int)hl && memcmp(again_hdr, data, hl) == 0);
	}
	ref = payload + d.enc_len;
	ref_len = size - hl - d.enc_len;
	err.msg[0] = 0;
	rc = ck_chunk_decode(ctx, &d, payload, ref_len ? ref : NULL, ref_len, out, &err);
	if (rc) {
		need((rc == -EINVAL || rc == -EIO) && err.msg[0]);
		return;
	}
	need(ck_hash128_eq(ck_chunk_hash(out, d.raw_len), d.raw_hash));
	/* what decoded encodes and decodes back to the same bytes */
	need(ck_chunk_encode(ctx, out, d.raw_len, d.elem_size, ref, ref_len, &d2, &p2) == 0);
	need(d2.enc_len <= d2.raw_len && ck_hash128_eq(d2.raw_hash, d.raw_hash));
	memcpy(buf, p2, d2.enc_len);
	need(ck_chunk_decode(ctx, &d2, buf, ref, ref_len, again, &err) == 0);
	need(memcmp(again, out, d.raw_len) == 0);
}

struct scan {
	int fd;
	const uint8_t *ref;
	size_t ref_len;
};

static int on_record(void *cb, uint64_t off, const struct ck_chunk_desc *d, const uint8_t *payload)
{
	struct scan *s = cb;
	struct ck_chunk_desc d2;
	struct ck_error err = { "" };
	int rc = ck_pack_read_chunk(s->fd, off, ctx, buf, s->ref, s->ref_len, NULL, out, &d2, &err);

	need(rc == 0 || ((rc == -EINVAL || rc == -EIO) && err.msg[0]));
	need(d2.raw_len == d->raw_len && d2.enc_len == d->enc_len);
	need(rc || ck_hash128_eq(ck_chunk_hash(out, d2.raw_len), d2.raw_hash));
	return 0;
}

static void scan_file(const uint8_t *data, size_t size)
{
	uint8_t hdr[CK_PACK_HEADER];
	struct scan s = { -1, NULL, 0 };
	struct ck_error err = { "" };
	uint64_t end;
	int rc;

	s.fd = memfd_create("fuzz_pack", MFD_CLOEXEC);
	if (s.fd < 0)
		return;
	/* a valid file header from a real writer's first bytes */
	memcpy(hdr, CK_PACK_MAGIC, 8);
	hdr[8] = CK_PACK_VERSION;
	hdr[9] = hdr[10] = hdr[11] = 0;
	for (int i = 0; i < 4; i++)
		hdr[12 + i] = (uint8_t)(ck_crc32(0, hdr, 12) >> (8 * i));
	if (write(s.fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr) &&
	    write(s.fd, data, size) == (ssize_t)size) {
		rc = ck_pack_scan(s.fd, on_record, &s, &end, &err);
		need(rc == 0 || ((rc == -EINVAL || rc == -EIO) && err.msg[0]));
		need(end >= CK_PACK_HEADER && end <= CK_PACK_HEADER + size);
	}
	close(s.fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ctx) {
		need(ck_chunk_ctx_new(NULL, &ctx) == 0);
		out = malloc(CK_CHUNK_MAX);
		again = malloc(CK_CHUNK_MAX);
		buf = malloc(CK_CHUNK_MAX);
		need(out && again && buf);
	}
	decode_record(data, size);
	scan_file(data, size);
	return 0;
}
