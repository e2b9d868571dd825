/* Pack record headers: the byte layout of docs/format.md ("Pack files"). */
#include "config.h"
#include "ckptfs/pack.h"
#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* Offsets inside a record header. */
#define OFF_CODEC 4
#define OFF_ELEM 5
#define OFF_FLAGS 6
#define OFF_RAW_LEN 8
#define OFF_ENC_LEN 12
#define OFF_RAW_HASH 16
#define OFF_REF_HASH 32
#define OFF_CRC 48

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* XXH128's canonical form: high 64 bits first, each big-endian. */
static void put_hash(uint8_t *p, struct ck_hash128 h)
{
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(h.hi >> (56 - 8 * i));
		p[8 + i] = (uint8_t)(h.lo >> (56 - 8 * i));
	}
}

static struct ck_hash128 get_hash(const uint8_t *p)
{
	struct ck_hash128 h = { 0, 0 };

	for (int i = 0; i < 8; i++) {
		h.hi = h.hi << 8 | p[i];
		h.lo = h.lo << 8 | p[8 + i];
	}
	return h;
}

static uint32_t record_crc(const uint8_t *hdr, const uint8_t *payload, uint32_t enc_len)
{
	return ck_crc32(ck_crc32(0, hdr, OFF_CRC), payload, enc_len);
}

int ck_pack_rec_header(const struct ck_chunk_desc *d, const uint8_t *payload,
		       uint8_t out[CK_PACK_REC_HEADER])
{
	if ((unsigned)d->codec >= CK_CODEC__COUNT || d->elem_size > 8 || d->raw_len > CK_CHUNK_MAX ||
	    d->enc_len > d->raw_len)
		return -EINVAL;
	memset(out, 0, CK_PACK_REC_HEADER);
	memcpy(out, CK_PACK_REC_MAGIC, 4);
	out[OFF_CODEC] = (uint8_t)d->codec;
	out[OFF_ELEM] = (uint8_t)d->elem_size;
	put_le32(out + OFF_RAW_LEN, d->raw_len);
	put_le32(out + OFF_ENC_LEN, d->enc_len);
	put_hash(out + OFF_RAW_HASH, d->raw_hash);
	put_hash(out + OFF_REF_HASH, d->ref_hash);
	put_le32(out + OFF_CRC, record_crc(out, payload, d->enc_len));
	return 0;
}

int ck_pack_rec_parse(const uint8_t hdr[CK_PACK_REC_HEADER], struct ck_chunk_desc *d,
		      struct ck_error *err)
{
	unsigned es = hdr[OFF_ELEM];

	if (memcmp(hdr, CK_PACK_REC_MAGIC, 4) != 0)
		return ck_fail(err, EINVAL, "pack record: bad magic");
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

int ck_pack_rec_check(const uint8_t hdr[CK_PACK_REC_HEADER], const uint8_t *payload,
		      struct ck_error *err)
{
	uint32_t want = ck_le32(hdr + OFF_CRC);
	uint32_t got = record_crc(hdr, payload, ck_le32(hdr + OFF_ENC_LEN));

	if (got != want)
		return ck_fail(err, EIO, "pack record: CRC-32 %08" PRIx32 " over header and payload, recorded %08"
			       PRIx32, got, want);
	return 0;
}
