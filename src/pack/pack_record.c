/* Pack record headers: the byte layouts of docs/format.md ("Pack files").
 * Version 3 packs hold compact headers, versions 1 and 2 the fixed 52-byte
 * ones; the first byte tells them apart, so readers need not know which
 * version of pack a record came from. */
#include "config.h"
#include "ckptfs/pack.h"
#include "ckptfs/buf.h"
#include "ckptfs/leb128.h"
#include "ckptfs/torchzip.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* Offsets inside a fixed (version 1 and 2) header. */
#define OFF_CODEC 4
#define OFF_ELEM 5
#define OFF_FLAGS 6
#define OFF_RAW_LEN 8
#define OFF_ENC_LEN 12
#define OFF_RAW_HASH 16
#define OFF_REF_HASH 32
#define OFF_CRC 48

/* The compact header's second byte. */
#define C_CODEC_MASK 0x07        /* bits 0-2: codec */
#define C_ELEM_SHIFT 3           /* bits 3-4: log2 of the element size */
#define C_FULL 0x20              /* raw_len is CK_CHUNK_MAX, not written */
#define C_COMPACT 0x40           /* the payload's layout is compact */
#define C_RESERVED 0x80

/* XXH128's canonical form: high 64 bits first, each big-endian. */
static void put_hash(uint8_t *p, struct ck_hash128 h)
{
	ck_set_be64(p, h.hi);
	ck_set_be64(p + 8, h.lo);
}

static struct ck_hash128 get_hash(const uint8_t *p)
{
	return (struct ck_hash128){ ck_be64(p), ck_be64(p + 8) };
}

static unsigned log2_elem(unsigned es)
{
	return es == 8 ? 3 : es == 4 ? 2 : es == 2 ? 1 : 0;
}

static int desc_fits(const struct ck_chunk_desc *d)
{
	return (unsigned)d->codec < CK_CODEC__COUNT && (d->elem_size == 1 || d->elem_size == 2 ||
	       d->elem_size == 4 || d->elem_size == 8) && d->raw_len <= CK_CHUNK_MAX &&
	       (d->codec == CK_CODEC_RAW ? d->enc_len == d->raw_len : d->enc_len < d->raw_len);
}

/* The compact header's fields before its CRC into out: their length. */
static size_t put_fields(const struct ck_chunk_desc *d, uint8_t *out)
{
	size_t n = 0;

	out[n++] = CK_PACK_REC_MAGIC3;
	out[n++] = (uint8_t)((unsigned)d->codec | log2_elem(d->elem_size) << C_ELEM_SHIFT |
			     (d->raw_len == CK_CHUNK_MAX ? C_FULL : 0) | (d->compact ? C_COMPACT : 0));
	if (d->raw_len != CK_CHUNK_MAX)
		n += ck_leb128_put(out + n, d->raw_len);
	if (d->codec != CK_CODEC_RAW)
		n += ck_leb128_put(out + n, d->enc_len);
	put_hash(out + n, d->raw_hash);
	n += 16;
	if (ck_codec_needs_ref(d->codec)) {
		put_hash(out + n, d->ref_hash);
		n += 16;
	}
	return n;
}

size_t ck_pack_rec_header_len(const struct ck_chunk_desc *d)
{
	uint8_t scratch[CK_PACK_REC_HEADER_MAX];

	return put_fields(d, scratch) + 4;
}

int ck_pack_rec_header(const struct ck_chunk_desc *d, const uint8_t *payload,
		       uint8_t out[CK_PACK_REC_HEADER_MAX])
{
	size_t n;

	if (!desc_fits(d))
		return -EINVAL;
	n = put_fields(d, out);
	ck_set_le32(out + n, ck_crc32(ck_crc32(0, out, n), payload, d->enc_len));
	return (int)(n + 4);
}

/* The fields every header has, checked the same way whichever form. */
static int check_fields(const struct ck_chunk_desc *d, struct ck_error *err)
{
	if (d->raw_len > CK_CHUNK_MAX)
		return ck_fail(err, EINVAL, "pack record: raw length %" PRIu32 " over %u", d->raw_len,
			       CK_CHUNK_MAX);
	if (d->codec == CK_CODEC_RAW ? d->enc_len != d->raw_len : d->enc_len >= d->raw_len)
		return ck_fail(err, EINVAL, "pack record: %s payload of %" PRIu32 " bytes for %" PRIu32
			       " raw bytes", ck_codec_name(d->codec), d->enc_len, d->raw_len);
	if (!ck_codec_needs_ref(d->codec) && (d->ref_hash.hi || d->ref_hash.lo))
		return ck_fail(err, EINVAL, "pack record: %s chunk names a reference",
			       ck_codec_name(d->codec));
	return 0;
}

static int cut_short(struct ck_error *err)
{
	return ck_fail(err, EIO, "pack record: header cut short by the end of the file");
}

static int parse_fixed(const uint8_t *hdr, size_t avail, struct ck_chunk_desc *d, struct ck_error *err)
{
	unsigned es;
	int rc;

	if (avail < CK_PACK_REC_HEADER_V2)
		return cut_short(err);
	if (memcmp(hdr, CK_PACK_REC_MAGIC, 4) != 0)
		return ck_fail(err, EINVAL, "pack record: bad magic");
	es = hdr[OFF_ELEM];
	if (hdr[OFF_CODEC] >= CK_CODEC__COUNT)
		return ck_fail(err, EINVAL, "pack record: unknown codec %u", hdr[OFF_CODEC]);
	if (es != 1 && es != 2 && es != 4 && es != 8)
		return ck_fail(err, EINVAL, "pack record: element size %u is not 1, 2, 4 or 8", es);
	if (ck_le16(hdr + OFF_FLAGS) != 0)
		return ck_fail(err, EINVAL, "pack record: unknown flags 0x%04x", ck_le16(hdr + OFF_FLAGS));
	d->codec = (enum ck_codec)hdr[OFF_CODEC];
	d->elem_size = es;
	d->raw_len = ck_le32(hdr + OFF_RAW_LEN);
	d->enc_len = ck_le32(hdr + OFF_ENC_LEN);
	d->raw_hash = get_hash(hdr + OFF_RAW_HASH);
	d->ref_hash = get_hash(hdr + OFF_REF_HASH);
	d->compact = 0;
	rc = check_fields(d, err);
	return rc ? rc : CK_PACK_REC_HEADER_V2;
}

static int parse_compact(const uint8_t *hdr, size_t avail, struct ck_chunk_desc *d, struct ck_error *err)
{
	size_t n = 2;
	uint8_t b;
	int got;

	if (avail < 2)
		return cut_short(err);
	b = hdr[1];
	if (b & C_RESERVED)
		return ck_fail(err, EINVAL, "pack record: reserved bit set (0x%02x)", b);
	if ((b & C_CODEC_MASK) >= CK_CODEC__COUNT)
		return ck_fail(err, EINVAL, "pack record: unknown codec %u", b & C_CODEC_MASK);
	d->codec = (enum ck_codec)(b & C_CODEC_MASK);
	d->elem_size = 1u << ((b >> C_ELEM_SHIFT) & 3);
	d->compact = !!(b & C_COMPACT);
	d->raw_len = CK_CHUNK_MAX;
	if (!(b & C_FULL)) {
		got = ck_leb128_get(hdr, avail, &n, &d->raw_len);
		if (got <= 0)
			return got ? ck_fail(err, EINVAL, "pack record: malformed raw length") : cut_short(err);
		if (d->raw_len >= CK_CHUNK_MAX)
			return ck_fail(err, EINVAL, "pack record: raw length %" PRIu32 " written out", d->raw_len);
	}
	d->enc_len = d->raw_len;
	if (d->codec != CK_CODEC_RAW) {
		got = ck_leb128_get(hdr, avail, &n, &d->enc_len);
		if (got <= 0)
			return got ? ck_fail(err, EINVAL, "pack record: malformed payload length") : cut_short(err);
	}
	if (avail < n + 16 + (ck_codec_needs_ref(d->codec) ? 16 : 0) + 4)
		return cut_short(err);
	d->raw_hash = get_hash(hdr + n);
	n += 16;
	d->ref_hash = (struct ck_hash128){ 0, 0 };
	if (ck_codec_needs_ref(d->codec)) {
		d->ref_hash = get_hash(hdr + n);
		n += 16;
	}
	got = check_fields(d, err);
	return got ? got : (int)(n + 4);
}

int ck_pack_rec_parse(const uint8_t *hdr, size_t avail, struct ck_chunk_desc *d, struct ck_error *err)
{
	if (avail < 1)
		return cut_short(err);
	return hdr[0] == CK_PACK_REC_MAGIC3 ? parse_compact(hdr, avail, d, err) : parse_fixed(hdr, avail, d, err);
}

int ck_pack_rec_check(const uint8_t *hdr, size_t hdr_len, const uint8_t *payload, uint32_t enc_len,
		      struct ck_error *err)
{
	uint32_t want = ck_le32(hdr + hdr_len - 4);
	uint32_t got = ck_crc32(ck_crc32(0, hdr, hdr_len - 4), payload, enc_len);

	if (got != want)
		return ck_fail(err, EIO, "pack record: CRC-32 %08" PRIx32 " over header and payload, recorded %08"
			       PRIx32, got, want);
	return 0;
}
