/* torch.save container reader: end of central directory (zip64 included),
 * central directory, local headers; every offset checked against the file.
 *
 * Reads, in order: the tail of the file (where the EOCD must be), the zip64
 * locator and EOCD if present, the whole central directory in one read,
 * then the local headers in batches of close neighbours (torch archives
 * with thousands of small records need a handful of reads, not thousands,
 * and the tensor bytes between headers far apart are not read at all).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"
#include "zip_layout.h"

/* The EOCD is within the last 22 + 65535 (comment) bytes. */
#define EOCD_SCAN (ZIP_EOCD_SIZE + ZIP_MAX_COMMENT)
/* Upper bound of a central directory we are willing to hold in memory. */
#define MAX_CD_BYTES ((uint64_t)1 << 30)
/* Local-header batching: a batch spans at most this many bytes ... */
#define BATCH_MAX ((uint64_t)1 << 20)
/* ... and each header is assumed to need at most its CD name plus this
 * much extra (PyTorch: 4 + 63 padding + 28 zip64); longer ones are re-read. */
#define LOCAL_EXTRA_GUESS 128
/* A header joins the batch only if the record data it would read past to
 * get there (bytes the parse does not need) is shorter than this: reading
 * the headers of a file of 256 KiB tensors must not read the tensors. */
#define BATCH_GAP_MAX ((uint64_t)32 << 10)

struct reader {
	tz_pread_fn pread;
	void *ctx;
	uint64_t size;
	struct ck_error *err;
};

static int bad(struct reader *r, const char *what, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "<what> at offset N: reason", -EINVAL. */
static int bad(struct reader *r, const char *what, uint64_t off, const char *fmt, ...)
{
	char why[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return ck_fail(r->err, EINVAL, "zip: %s at offset %llu: %s", what, (unsigned long long)off, why);
}

static int read_at(struct reader *r, void *buf, size_t len, uint64_t off, const char *what)
{
	int rc = r->pread(r->ctx, buf, len, off);

	if (rc > 0)
		rc = -EIO;
	if (rc)
		return ck_fail(r->err, -rc, "zip: reading %s (%zu bytes at offset %llu): %s", what, len,
			       (unsigned long long)off, strerror(-rc));
	return 0;
}

/* a + b <= limit, without overflow. */
static int fits(uint64_t a, uint64_t b, uint64_t limit)
{
	return a <= limit && b <= limit - a;
}

/* ---- end of central directory ---------------------------------------------- */

struct eocd {
	uint64_t pos;          /* of the EOCD record */
	uint64_t cd_end_limit; /* the CD must end at or before this */
	uint64_t n, cd_size, cd_off;
};

static int read_zip64(struct reader *r, uint64_t locator_pos, const uint8_t *loc,
		      const uint8_t *eocd, struct eocd *e)
{
	uint8_t z[ZIP64_EOCD_SIZE];
	uint64_t z_off = ck_le64(loc + 8), rec_size, n_disk;
	int rc;

	if (ck_le32(loc + 4) != 0 || ck_le32(loc + 16) != 1)
		return bad(r, "zip64 locator", locator_pos, "multi-disk archives are not supported");
	if (!fits(z_off, ZIP64_EOCD_SIZE, locator_pos))
		return bad(r, "zip64 locator", locator_pos,
			   "zip64 end of central directory offset %llu is not before the locator",
			   (unsigned long long)z_off);
	rc = read_at(r, z, sizeof(z), z_off, "zip64 end of central directory");
	if (rc)
		return rc;
	if (ck_le32(z) != ZIP64_EOCD_SIG)
		return bad(r, "zip64 end of central directory", z_off, "bad signature");
	rec_size = ck_le64(z + 4);
	if (rec_size < ZIP64_EOCD_SIZE - 12 || !fits(z_off + 12, rec_size, locator_pos))
		return bad(r, "zip64 end of central directory", z_off, "record size %llu does not fit before the locator",
			   (unsigned long long)rec_size);
	if (ck_le32(z + 16) != 0 || ck_le32(z + 20) != 0)
		return bad(r, "zip64 end of central directory", z_off, "multi-disk archives are not supported");
	n_disk = ck_le64(z + 24);
	e->n = ck_le64(z + 32);
	e->cd_size = ck_le64(z + 40);
	e->cd_off = ck_le64(z + 48);
	if (n_disk != e->n)
		return bad(r, "zip64 end of central directory", z_off, "%llu entries on this disk but %llu in total",
			   (unsigned long long)n_disk, (unsigned long long)e->n);
	/* The 16/32-bit copies must agree wherever they are not saturated. */
	if ((ck_le16(eocd + 10) != ZIP_MAX16 && ck_le16(eocd + 10) != e->n) ||
	    (ck_le32(eocd + 12) != ZIP_MAX32 && ck_le32(eocd + 12) != e->cd_size) ||
	    (ck_le32(eocd + 16) != ZIP_MAX32 && ck_le32(eocd + 16) != e->cd_off))
		return bad(r, "end of central directory", e->pos, "disagrees with the zip64 end of central directory");
	e->cd_end_limit = z_off;
	return 0;
}

static int read_eocd(struct reader *r, struct eocd *e)
{
	uint64_t tail_len = r->size < EOCD_SCAN ? r->size : EOCD_SCAN;
	uint64_t tail_off = r->size - tail_len;
	uint8_t *tail, loc[ZIP64_LOCATOR_SIZE];
	const uint8_t *eocd = NULL;
	size_t p = 0;
	int rc;

	if (r->size < ZIP_EOCD_SIZE)
		return ck_fail(r->err, EINVAL, "zip: file of %llu bytes is too small to be a zip archive",
			       (unsigned long long)r->size);
	tail = malloc(tail_len);
	if (!tail)
		return -ENOMEM;
	rc = read_at(r, tail, tail_len, tail_off, "end of file");
	if (rc)
		goto out;
	/* Backwards: the last signature whose comment ends the file exactly;
	 * failing that (trailing bytes), the last one whose comment fits.  A
	 * comment that contains the signature does not fool the first rule. */
	for (size_t q = tail_len - ZIP_EOCD_SIZE;; q--) {
		if (ck_le32(tail + q) == ZIP_EOCD_SIG) {
			size_t room = tail_len - q - ZIP_EOCD_SIZE, comment = ck_le16(tail + q + 20);

			if (comment == room) {
				eocd = tail + q;
				p = q;
				break;
			}
			if (comment < room && !eocd) {
				eocd = tail + q;
				p = q;
			}
		}
		if (!q)
			break;
	}
	if (!eocd) {
		rc = ck_fail(r->err, EINVAL, "zip: no end of central directory record in the last %llu bytes",
			     (unsigned long long)tail_len);
		goto out;
	}
	e->pos = tail_off + p;
	if (ck_le16(eocd + 4) != 0 || ck_le16(eocd + 6) != 0) {
		rc = bad(r, "end of central directory", e->pos, "multi-disk archives are not supported");
		goto out;
	}
	if (ck_le16(eocd + 8) != ck_le16(eocd + 10)) {
		rc = bad(r, "end of central directory", e->pos, "entry counts disagree (%u on this disk, %u in total)",
			 ck_le16(eocd + 8), ck_le16(eocd + 10));
		goto out;
	}
	e->n = ck_le16(eocd + 10);
	e->cd_size = ck_le32(eocd + 12);
	e->cd_off = ck_le32(eocd + 16);
	e->cd_end_limit = e->pos;

	if (e->pos >= ZIP64_LOCATOR_SIZE) {
		uint64_t lpos = e->pos - ZIP64_LOCATOR_SIZE;

		if (lpos >= tail_off)
			memcpy(loc, tail + (lpos - tail_off), sizeof(loc));
		else if ((rc = read_at(r, loc, sizeof(loc), lpos, "zip64 locator")))
			goto out;
		if (ck_le32(loc) == ZIP64_LOCATOR_SIG)
			rc = read_zip64(r, lpos, loc, eocd, e);
	}
	if (!rc && !fits(e->cd_off, e->cd_size, e->cd_end_limit))
		rc = bad(r, "end of central directory", e->pos,
			 "central directory [%llu, +%llu) runs past its end records",
			 (unsigned long long)e->cd_off, (unsigned long long)e->cd_size);
	if (!rc && e->cd_size > MAX_CD_BYTES)
		rc = bad(r, "end of central directory", e->pos, "central directory of %llu bytes is larger than supported",
			 (unsigned long long)e->cd_size);
	/* Every entry needs at least a 46-byte header: this caps allocations. */
	if (!rc && e->n > e->cd_size / ZIP_CENTRAL_SIZE)
		rc = bad(r, "end of central directory", e->pos, "%llu entries cannot fit in a central directory of %llu bytes",
			 (unsigned long long)e->n, (unsigned long long)e->cd_size);
out:
	free(tail);
	return rc;
}

/* ---- central directory ------------------------------------------------------ */

/* What we keep of a central entry until its local header is checked. */
struct cd_info {
	const uint8_t *name;   /* full name (with root), inside the CD buffer */
	uint16_t name_len;
	uint64_t at;           /* file offset of the central entry, for messages */
};

/* The zip64 extended-information field replaces the saturated fields, in
 * the order usize, csize, local header offset, disk (APPNOTE 4.5.3). */
static int apply_zip64_extra(struct reader *r, uint64_t at, const uint8_t *x, size_t xlen,
			     uint64_t *usize, uint64_t *csize, uint64_t *lho, uint32_t *disk)
{
	size_t off = 0;

	while (xlen - off >= 4) {
		unsigned id = ck_le16(x + off), len = ck_le16(x + off + 2);
		const uint8_t *f = x + off + 4, *end;

		if (len > xlen - off - 4)
			return bad(r, "central directory entry", at, "extra field overruns the entry");
		off += 4 + (size_t)len;
		if (id != ZIP64_EXTRA_ID)
			continue;
		end = f + len;
		if (*usize == ZIP_MAX32) {
			if (end - f < 8)
				goto short_field;
			*usize = ck_le64(f), f += 8;
		}
		if (*csize == ZIP_MAX32) {
			if (end - f < 8)
				goto short_field;
			*csize = ck_le64(f), f += 8;
		}
		if (*lho == ZIP_MAX32) {
			if (end - f < 8)
				goto short_field;
			*lho = ck_le64(f), f += 8;
		}
		if (*disk == ZIP_MAX16) {
			if (end - f < 4)
				goto short_field;
			*disk = ck_le32(f);
		}
		return 0;
	}
	return 0;
short_field:
	return bad(r, "central directory entry", at, "zip64 extra field lacks a saturated value");
}

/* Parses entry i at cd[*pos]; advances *pos. */
static int parse_central(struct reader *r, const uint8_t *cd, uint64_t cd_off, uint64_t cd_size,
			 size_t *pos, size_t i, struct tz_archive *ar, struct cd_info *info)
{
	const uint8_t *h = cd + *pos;
	uint64_t at = cd_off + *pos, usize, csize, lho;
	size_t nlen, xlen, clen, root_len;
	struct tz_entry *e = &ar->entries[i];
	unsigned flags;
	uint32_t disk;
	int rc;

	if (cd_size - *pos < ZIP_CENTRAL_SIZE)
		return bad(r, "central directory entry", at, "truncated (entry %zu of %zu)", i, ar->n);
	if (ck_le32(h) != ZIP_CENTRAL_SIG)
		return bad(r, "central directory entry", at, "bad signature (entry %zu)", i);
	flags = ck_le16(h + 8);
	e->method = ck_le16(h + 10);
	e->crc32 = ck_le32(h + 16);
	csize = ck_le32(h + 20);
	usize = ck_le32(h + 24);
	nlen = ck_le16(h + 28);
	xlen = ck_le16(h + 30);
	clen = ck_le16(h + 32);
	disk = ck_le16(h + 34);
	lho = ck_le32(h + 42);
	if (cd_size - *pos - ZIP_CENTRAL_SIZE < nlen + xlen + clen)
		return bad(r, "central directory entry", at, "name and extra fields run past the central directory");
	rc = apply_zip64_extra(r, at, h + ZIP_CENTRAL_SIZE + nlen, xlen, &usize, &csize, &lho, &disk);
	if (rc)
		return rc;
	info->name = h + ZIP_CENTRAL_SIZE;
	info->name_len = (uint16_t)nlen;
	info->at = at;
	*pos += ZIP_CENTRAL_SIZE + nlen + xlen + clen;

	if (flags & (ZIP_FLAG_ENCRYPTED | ZIP_FLAG_STRONG_ENC))
		return bad(r, "central directory entry", at, "encrypted entries are not supported");
	if (disk != 0)
		return bad(r, "central directory entry", at, "entry on disk %u of a multi-disk archive", disk);
	if (e->method == 0 && csize != usize)
		return bad(r, "central directory entry", at, "stored entry with compressed size %llu != size %llu",
			   (unsigned long long)csize, (unsigned long long)usize);
	if (usize && !csize)
		return bad(r, "central directory entry", at, "compressed size 0 for %llu bytes of data",
			   (unsigned long long)usize);
	if (!nlen || memchr(info->name, 0, nlen))
		return bad(r, "central directory entry", at, "empty name or name with a NUL byte");

	/* Root: what precedes the first '/' of the first entry (PyTorch's rule). */
	if (i == 0) {
		const uint8_t *slash = memchr(info->name, '/', nlen);

		if (!slash || slash == info->name)
			return bad(r, "central directory entry", at, "first name '%.*s' is not inside a folder",
				   (int)nlen, info->name);
		ar->root = strndup((const char *)info->name, (size_t)(slash - info->name));
		if (!ar->root)
			return -ENOMEM;
	}
	root_len = strlen(ar->root);
	if (nlen <= root_len || memcmp(info->name, ar->root, root_len) || info->name[root_len] != '/')
		return bad(r, "central directory entry", at, "name '%.*s' is not under '%s/'", (int)nlen,
			   info->name, ar->root);
	e->name = strndup((const char *)info->name + root_len + 1, nlen - root_len - 1);
	if (!e->name)
		return -ENOMEM;
	e->lho = lho;
	e->size = usize;
	e->csize = csize;
	return 0;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const struct tz_entry *e = ctx;

	return strcmp(e[*(const size_t *)a].name, e[*(const size_t *)b].name);
}

/* Index entries by name (for tz_find) and refuse duplicates. */
static int index_names(struct reader *r, struct tz_archive *ar, const struct cd_info *info)
{
	ar->by_name = malloc((ar->n ? ar->n : 1) * sizeof(*ar->by_name));
	if (!ar->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < ar->n; i++)
		ar->by_name[i] = i;
	qsort_r(ar->by_name, ar->n, sizeof(*ar->by_name), cmp_name, ar->entries);
	for (size_t i = 1; i < ar->n; i++) {
		size_t k = ar->by_name[i];

		if (!strcmp(ar->entries[ar->by_name[i - 1]].name, ar->entries[k].name))
			return bad(r, "central directory entry", info[k].at, "duplicate name '%.*s'",
				   (int)info[k].name_len, info[k].name);
	}
	return 0;
}

/* ---- local headers ------------------------------------------------------- */

static int cmp_lho(const void *a, const void *b, void *ctx)
{
	const struct tz_entry *e = ctx;
	uint64_t x = e[*(const size_t *)a].lho, y = e[*(const size_t *)b].lho;

	return x < y ? -1 : x > y;
}

/* Checks the local header of entry e whose first bytes are win[0..have)
 * (have >= 30), reading more when the name runs past the window. */
static int check_local(struct reader *r, struct tz_entry *e, const struct cd_info *info,
		       const uint8_t *win, uint64_t have, uint64_t cd_off)
{
	uint8_t *name = NULL;
	const uint8_t *lname;
	size_t lnlen, lxlen;
	int rc = 0;

	if (ck_le32(win) != ZIP_LOCAL_SIG)
		return bad(r, "local header", e->lho, "bad signature for '%.*s'", (int)info->name_len,
			   info->name);
	lnlen = ck_le16(win + 26);
	lxlen = ck_le16(win + 28);
	if (lnlen != info->name_len)
		return bad(r, "local header", e->lho, "name length %zu differs from the central directory's %u",
			   lnlen, info->name_len);
	if (!fits(e->lho + ZIP_LOCAL_SIZE, lnlen, cd_off))
		return bad(r, "local header", e->lho, "name runs into the central directory");
	if (ZIP_LOCAL_SIZE + lnlen <= have) {
		lname = win + ZIP_LOCAL_SIZE;
	} else {
		name = malloc(lnlen);
		if (!name)
			return -ENOMEM;
		rc = read_at(r, name, lnlen, e->lho + ZIP_LOCAL_SIZE, "local header name");
		lname = name;
	}
	if (!rc && memcmp(lname, info->name, lnlen))
		rc = bad(r, "local header", e->lho, "name differs from the central directory's '%.*s'",
			 (int)info->name_len, info->name);
	free(name);
	if (rc)
		return rc;
	e->data_offset = e->lho + ZIP_LOCAL_SIZE + lnlen + lxlen;
	if (!fits(e->data_offset, e->csize, cd_off))
		return bad(r, "local header", e->lho, "data of '%.*s' (%llu bytes at %llu) runs into the central directory",
			   (int)info->name_len, info->name, (unsigned long long)e->csize,
			   (unsigned long long)e->data_offset);
	return 0;
}

/* Reads and checks every local header, batching neighbours into one read. */
static int read_locals(struct reader *r, struct tz_archive *ar, const struct cd_info *info,
		       uint64_t cd_off)
{
	size_t *order, i = 0;
	uint8_t *win = NULL;
	int rc = 0;

	if (!ar->n)
		return 0;
	order = malloc(ar->n * sizeof(*order));
	win = malloc(cd_off < BATCH_MAX ? (cd_off ? cd_off : 1) : BATCH_MAX);
	if (!order || !win) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < ar->n; k++)
		order[k] = k;
	qsort_r(order, ar->n, sizeof(*order), cmp_lho, ar->entries);

	while (i < ar->n && !rc) {
		uint64_t start = ar->entries[order[i]].lho, end = start;
		size_t j = i;

		/* Grow the batch while the next header's likely end stays within BATCH_MAX. */
		for (; j < ar->n; j++) {
			const struct tz_entry *e = &ar->entries[order[j]];
			uint64_t want = e->lho + ZIP_LOCAL_SIZE + info[order[j]].name_len + LOCAL_EXTRA_GUESS;

			if (!fits(e->lho, ZIP_LOCAL_SIZE, cd_off)) {
				rc = bad(r, "central directory entry", info[order[j]].at,
					 "local header offset %llu is not before the central directory",
					 (unsigned long long)e->lho);
				goto out;
			}
			if (j > i && (want - start > BATCH_MAX || e->lho > end + BATCH_GAP_MAX))
				break;
			if (want > end)
				end = want;
		}
		if (end > cd_off)
			end = cd_off;
		if (end - start > BATCH_MAX)
			end = start + BATCH_MAX;
		rc = read_at(r, win, end - start, start, "local headers");
		for (; i < j && !rc; i++) {
			struct tz_entry *e = &ar->entries[order[i]];

			rc = check_local(r, e, &info[order[i]], win + (e->lho - start), end - e->lho, cd_off);
		}
	}
	/* Entries may not share bytes: each one's data ends before the next header. */
	for (size_t k = 1; k < ar->n && !rc; k++) {
		const struct tz_entry *prev = &ar->entries[order[k - 1]], *e = &ar->entries[order[k]];

		if (prev->data_offset + prev->csize > e->lho)
			rc = bad(r, "local header", e->lho, "'%s/%s' overlaps the data of '%s/%s'",
				 ar->root, e->name, ar->root, prev->name);
	}
out:
	free(order);
	free(win);
	return rc;
}

/* ---- entry points ----------------------------------------------------------- */

int tz_read(tz_pread_fn pread, void *ctx, uint64_t file_size, struct tz_archive *out,
	    struct ck_error *err)
{
	struct reader r = { pread, ctx, file_size, err };
	struct cd_info *info = NULL;
	uint8_t *cd = NULL;
	struct eocd e = { 0 };
	size_t pos = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->file_size = file_size;
	rc = read_eocd(&r, &e);
	if (rc)
		goto out;
	out->entries = calloc(e.n ? e.n : 1, sizeof(*out->entries));
	info = calloc(e.n ? e.n : 1, sizeof(*info));
	cd = malloc(e.cd_size ? e.cd_size : 1);
	if (!out->entries || !info || !cd) {
		rc = -ENOMEM;
		goto out;
	}
	rc = read_at(&r, cd, e.cd_size, e.cd_off, "central directory");
	for (size_t i = 0; i < e.n && !rc; i++) {
		out->n = i + 1;   /* so that tz_archive_free() frees what entry i holds */
		rc = parse_central(&r, cd, e.cd_off, e.cd_size, &pos, i, out, &info[i]);
	}
	if (!rc && !e.n)
		rc = ck_fail(err, EINVAL, "zip: archive has no entries");
	if (!rc)
		rc = index_names(&r, out, info);
	if (!rc)
		rc = read_locals(&r, out, info, e.cd_off);
out:
	free(cd);
	free(info);
	if (rc) {
		if (rc == -ENOMEM)
			ck_fail(err, ENOMEM, "zip: out of memory");
		tz_archive_free(out);
	}
	return rc;
}

void tz_archive_free(struct tz_archive *ar)
{
	if (!ar)
		return;
	for (size_t i = 0; i < ar->n; i++)
		free(ar->entries[i].name);
	free(ar->entries);
	free(ar->root);
	free(ar->by_name);
	memset(ar, 0, sizeof(*ar));
}

const struct tz_entry *tz_find(const struct tz_archive *ar, const char *name)
{
	size_t lo = 0, hi = ar->by_name ? ar->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct tz_entry *e = &ar->entries[ar->by_name[mid]];
		int c = strcmp(name, e->name);

		if (!c)
			return e;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

int tz_is_zip(const uint8_t *head, size_t len)
{
	return len >= 4 && ck_le32(head) == ZIP_LOCAL_SIG;
}

int tz_is_legacy_torch(const uint8_t *head, size_t len)
{
	/* 0x1950a86a20f9469cfc6c as pickle LONG1: 0x8a, 10 bytes little-endian. */
	static const uint8_t magic[] = { 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19 };
	size_t p = 2;

	if (len >= 2 && head[0] == 0x80 && head[1] >= 2) {      /* PROTO n */
		if (head[1] >= 4 && len >= p + 9 && head[p] == 0x95)  /* FRAME u64 */
			p += 9;
		if (len >= p + sizeof(magic) && !memcmp(head + p, magic, sizeof(magic)))
			return 1;
	}
	/* The pre-1.0 format: a tar archive ("ustar" magic at offset 257). */
	return len >= 262 && !memcmp(head + 257, "ustar", 5);
}
