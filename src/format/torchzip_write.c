/* torch.save container writer: the exact byte layout of PyTorch's
 * PyTorchStreamWriter (miniz in zip64 mode, docs/formats.md §1.3), so that
 * a container rebuilt from the same records is byte-identical to the file
 * torch.save wrote.
 *
 * Container bytes are gathered in a buffer and handed to the emit callback
 * just before each record's data (and once at the end), so a record costs
 * two callbacks: its data descriptor and the next local header travel
 * together.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"
#include "zip_layout.h"

#define DEFAULT_ALIGN 64
#define MAX_ALIGN 32768     /* padding + other extras must fit a u16 extra length */

struct writer {
	tz_emit_fn emit;
	void *ctx;
	struct ck_buf pending;   /* container bytes not emitted yet */
	struct ck_buf cd;        /* central directory, built as records go */
	struct ck_buf name;      /* "<root>/<record>" */
	uint64_t cursor;         /* file offset of the next byte */
};

static int flush(struct writer *w)
{
	int rc = 0;

	if (w->pending.len)
		rc = w->emit(w->ctx, -1, w->pending.data, w->pending.len);
	w->cursor += w->pending.len;
	w->pending.len = 0;
	return rc;
}

/* The zip64 extended-information field as miniz writes it (id, length,
 * then usize and csize when the size needs 64 bits, then the local header
 * offset when it does).  Appends nothing when neither needs it. */
static int put_zip64_extra(struct ck_buf *b, uint64_t size, uint64_t csize, uint64_t lho)
{
	int big_size = size >= ZIP_MAX32, big_ofs = lho >= ZIP_MAX32;
	int rc = 0;

	if (!big_size && !big_ofs)
		return 0;
	rc = ck_buf_put_le16(b, ZIP64_EXTRA_ID);
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)(8 * (2 * big_size + big_ofs)));
	if (!rc && big_size && !(rc = ck_buf_put_le64(b, size)))
		rc = ck_buf_put_le64(b, csize);
	if (!rc && big_ofs)
		rc = ck_buf_put_le64(b, lho);
	return rc;
}

static size_t zip64_extra_len(uint64_t size, uint64_t lho)
{
	int big_size = size >= ZIP_MAX32, big_ofs = lho >= ZIP_MAX32;

	return big_size || big_ofs ? 4 + 8 * (2 * (size_t)big_size + (size_t)big_ofs) : 0;
}

static int put_header_common(struct ck_buf *b, unsigned flags)
{
	int rc = ck_buf_put_le16(b, 0);          /* version needed: 0 (stored) */

	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)flags);
	if (!rc)
		rc = ck_buf_put_le16(b, 0);      /* method: stored */
	if (!rc)
		rc = ck_buf_put_le32(b, 0);      /* DOS time and date: 0 */
	return rc;
}

/* Local header, name, zip64 extra and the 'FB' padding so the data starts
 * at a multiple of align.  Returns the data offset in *data_off. */
static int put_local(struct writer *w, uint64_t size, unsigned align, uint64_t *data_off)
{
	struct ck_buf *b = &w->pending;
	uint64_t lho = w->cursor + b->len;
	size_t z64 = zip64_extra_len(size, lho);
	uint64_t start = lho + ZIP_LOCAL_SIZE + w->name.len + z64 + 4;
	unsigned pad = (unsigned)((align - start % align) % align);
	int rc;

	rc = ck_buf_put_le32(b, ZIP_LOCAL_SIG);
	if (!rc)
		rc = put_header_common(b, size ? ZIP_FLAG_UTF8 | ZIP_FLAG_DESCRIPTOR : ZIP_FLAG_UTF8);
	/* CRC and sizes are 0 here: they follow the data in the descriptor. */
	for (int i = 0; !rc && i < 3; i++)
		rc = ck_buf_put_le32(b, 0);
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)w->name.len);
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)(z64 + 4 + pad));
	if (!rc)
		rc = ck_buf_put(b, w->name.data, w->name.len);
	/* miniz writes the local zip64 field before the data exists: csize 0. */
	if (!rc)
		rc = put_zip64_extra(b, size, 0, lho);
	if (!rc)
		rc = ck_buf_put(b, (const uint8_t[]){ TORCH_PAD_ID_0, TORCH_PAD_ID_1 }, 2);
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)pad);
	if (!rc && (rc = ck_buf_reserve(b, pad)) == 0) {
		memset(b->data + b->len, TORCH_PAD_BYTE, pad);
		b->len += pad;
	}
	*data_off = start + pad;
	return rc;
}

/* Data descriptor: 64-bit sizes exactly when the record had a zip64 field. */
static int put_descriptor(struct ck_buf *b, const struct tz_record *rec, uint64_t lho)
{
	int rc = ck_buf_put_le32(b, ZIP_DESCRIPTOR_SIG);

	if (!rc)
		rc = ck_buf_put_le32(b, rec->crc32);
	if (!rc && zip64_extra_len(rec->size, lho)) {
		if (!(rc = ck_buf_put_le64(b, rec->size)))
			rc = ck_buf_put_le64(b, rec->size);
	} else if (!rc) {
		if (!(rc = ck_buf_put_le32(b, (uint32_t)rec->size)))
			rc = ck_buf_put_le32(b, (uint32_t)rec->size);
	}
	return rc;
}

static int put_central(struct writer *w, const struct tz_record *rec, uint64_t lho)
{
	struct ck_buf *b = &w->cd;
	size_t z64 = zip64_extra_len(rec->size, lho);
	uint32_t size32 = rec->size >= ZIP_MAX32 ? ZIP_MAX32 : (uint32_t)rec->size;
	int rc;

	/* miniz refuses central directories of 4 GiB and more. */
	if (b->len + ZIP_CENTRAL_SIZE + w->name.len + z64 >= ZIP_MAX32)
		return -EFBIG;
	rc = ck_buf_put_le32(b, ZIP_CENTRAL_SIG);
	if (!rc)
		rc = ck_buf_put_le16(b, 0);      /* version made by */
	if (!rc)
		rc = put_header_common(b, rec->size ? ZIP_FLAG_UTF8 | ZIP_FLAG_DESCRIPTOR : ZIP_FLAG_UTF8);
	if (!rc)
		rc = ck_buf_put_le32(b, rec->crc32);
	if (!rc)
		rc = ck_buf_put_le32(b, size32);  /* compressed */
	if (!rc)
		rc = ck_buf_put_le32(b, size32);  /* uncompressed */
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)w->name.len);
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)z64);
	/* comment length, disk, internal attributes: 0; external attributes: 0 */
	if (!rc)
		rc = ck_buf_put(b, (const uint8_t[10]){ 0 }, 10);
	if (!rc)
		rc = ck_buf_put_le32(b, lho >= ZIP_MAX32 ? ZIP_MAX32 : (uint32_t)lho);
	if (!rc)
		rc = ck_buf_put(b, w->name.data, w->name.len);
	if (!rc)
		rc = put_zip64_extra(b, rec->size, rec->size, lho);
	return rc;
}

/* Zip64 end of central directory, its locator, and the classic EOCD. */
static int put_end(struct ck_buf *b, uint64_t n, uint64_t cd_off, uint64_t cd_size)
{
	uint64_t z64_off = cd_off + cd_size;
	int rc;

	rc = ck_buf_put_le32(b, ZIP64_EOCD_SIG);
	if (!rc)
		rc = ck_buf_put_le64(b, ZIP64_EOCD_SIZE - 12);
	if (!rc)
		rc = ck_buf_put_le16(b, 0x031e);  /* made by: Unix, spec 3.0 (miniz's constant) */
	if (!rc)
		rc = ck_buf_put_le16(b, 0x002d);  /* needed: 4.5 (zip64) */
	if (!rc)
		rc = ck_buf_put_le64(b, 0);       /* this disk, disk with the CD */
	if (!rc)
		rc = ck_buf_put_le64(b, n);
	if (!rc)
		rc = ck_buf_put_le64(b, n);
	if (!rc)
		rc = ck_buf_put_le64(b, cd_size);
	if (!rc)
		rc = ck_buf_put_le64(b, cd_off);

	if (!rc)
		rc = ck_buf_put_le32(b, ZIP64_LOCATOR_SIG);
	if (!rc)
		rc = ck_buf_put_le32(b, 0);
	if (!rc)
		rc = ck_buf_put_le64(b, z64_off);
	if (!rc)
		rc = ck_buf_put_le32(b, 1);       /* total disks */

	if (!rc)
		rc = ck_buf_put_le32(b, ZIP_EOCD_SIG);
	if (!rc)
		rc = ck_buf_put_le32(b, 0);       /* disk numbers */
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)(n >= ZIP_MAX16 ? ZIP_MAX16 : n));
	if (!rc)
		rc = ck_buf_put_le16(b, (uint16_t)(n >= ZIP_MAX16 ? ZIP_MAX16 : n));
	if (!rc)
		rc = ck_buf_put_le32(b, cd_size >= ZIP_MAX32 ? ZIP_MAX32 : (uint32_t)cd_size);
	if (!rc)
		rc = ck_buf_put_le32(b, cd_off >= ZIP_MAX32 ? ZIP_MAX32 : (uint32_t)cd_off);
	if (!rc)
		rc = ck_buf_put_le16(b, 0);       /* comment length */
	return rc;
}

static int set_name(struct ck_buf *name, const char *root, const char *record)
{
	name->len = 0;
	if (ck_buf_puts(name, root) || ck_buf_putc(name, '/') || ck_buf_puts(name, record))
		return -ENOMEM;
	return name->len > ZIP_MAX16 ? -EINVAL : 0;
}

static int write_records(struct writer *w, const char *root, const struct tz_record *recs,
			 size_t n, unsigned align)
{
	uint64_t lho, data_off;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (!recs[i].name)
			return -EINVAL;
		rc = set_name(&w->name, root, recs[i].name);
		if (rc)
			return rc;
		lho = w->cursor + w->pending.len;
		rc = put_local(w, recs[i].size, align, &data_off);
		if (!rc)
			rc = put_central(w, &recs[i], lho);
		if (!rc)
			rc = flush(w);
		if (!rc)
			rc = w->emit(w->ctx, (long)i, NULL, recs[i].size);
		if (rc)
			return rc;
		if (__builtin_add_overflow(w->cursor, recs[i].size, &w->cursor))
			return -EFBIG;
		if (recs[i].size && (rc = put_descriptor(&w->pending, &recs[i], lho)))
			return rc;
	}
	return 0;
}

int tz_write(const char *root, const struct tz_record *recs, size_t n,
	     unsigned align, tz_emit_fn emit, void *ctx)
{
	struct writer w = { .emit = emit, .ctx = ctx };
	uint64_t cd_off;
	int rc;

	if (!align)
		align = DEFAULT_ALIGN;
	if (!root || !*root || align > MAX_ALIGN || n > ZIP_MAX32)
		return -EINVAL;
	rc = write_records(&w, root, recs, n, align);
	if (!rc) {
		cd_off = w.cursor + w.pending.len;
		rc = ck_buf_put(&w.pending, w.cd.data, w.cd.len);
		if (!rc)
			rc = put_end(&w.pending, n, cd_off, w.cd.len);
		if (!rc)
			rc = flush(&w);
	}
	ck_buf_free(&w.pending);
	ck_buf_free(&w.cd);
	ck_buf_free(&w.name);
	return rc;
}
