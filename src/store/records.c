/* Keys and values of the LMDB index (docs/format.md, "Records").
 *
 * Values are fixed little-endian headers whose first byte is the record
 * format, followed by the strings whose lengths the header gives.  A
 * decoder accepts exactly the lengths it announces, so a damaged record is
 * reported as -EIO instead of being half-read.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "index.h"

int ck_mdb_errno(int rc)
{
	if (rc == 0)
		return 0;
	if (rc > 0)
		return -rc;
	switch (rc) {
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_VERSION_MISMATCH:
	case MDB_INVALID:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* ---- keys ---- */

void ck_key_id(uint8_t out[8], uint64_t id)
{
	ck_set_be64(out, id);
}

void ck_key_id_index(uint8_t out[12], uint64_t id, uint32_t index)
{
	ck_set_be64(out, id);
	out[8] = (uint8_t)(index >> 24);
	out[9] = (uint8_t)(index >> 16);
	out[10] = (uint8_t)(index >> 8);
	out[11] = (uint8_t)index;
}

uint64_t ck_key_get_id(const uint8_t *p)
{
	return ck_be64(p);
}

int ck_key_ckpt_prefix(struct ck_buf *k, const char *series)
{
	k->len = 0;
	return ck_buf_put(k, series, strlen(series) + 1);   /* with the NUL separator */
}

/* Appends s, or where the key would pass CK_KEY_MAX, as many of its first
 * bytes as fit before its XXH3-128 (16 bytes, canonical), so that the key
 * is exactly CK_KEY_MAX bytes: two names of 255 bytes (series and
 * checkpoint) or a deep path in a checkpoint still make a key. */
static int put_key_tail(struct ck_buf *k, const char *s)
{
	size_t n = strlen(s);
	XXH128_canonical_t c;

	if (k->len + n <= CK_KEY_MAX)
		return ck_buf_put(k, s, n);
	XXH128_canonicalFromHash(&c, XXH3_128bits(s, n));
	if (ck_buf_put(k, s, CK_KEY_MAX - k->len - sizeof(c.digest)) < 0 || ck_buf_put(k, c.digest, sizeof(c.digest)) < 0)
		return -ENOMEM;
	return 0;
}

int ck_key_ckpt(struct ck_buf *k, const char *series, int64_t step, const char *name)
{
	uint8_t be[8];

	/* Flipping the sign bit makes negative steps sort before positive ones. */
	ck_set_be64(be, (uint64_t)step ^ (1ULL << 63));
	if (ck_key_ckpt_prefix(k, series) < 0 || ck_buf_put(k, be, 8) < 0 || put_key_tail(k, name) < 0)
		return -ENOMEM;
	return 0;
}

int ck_key_file(struct ck_buf *k, uint64_t ckpt_id, const char *relpath)
{
	uint8_t be[8];

	k->len = 0;
	ck_set_be64(be, ckpt_id);
	if (ck_buf_put(k, be, 8) < 0 || put_key_tail(k, relpath) < 0)
		return -ENOMEM;
	return 0;
}

/* Whether the files key of relpath holds a shortened form of it. */
static int relpath_shortened(const char *relpath)
{
	return 8 + strlen(relpath) > CK_KEY_MAX;
}

/* ---- value reader ---- */

struct rd {
	const uint8_t *p;
	size_t len, off;
	int bad;
};

static void rd_init(struct rd *r, const MDB_val *v, size_t header, unsigned char version)
{
	r->p = v->mv_data;
	r->len = v->mv_size;
	r->off = 1;
	r->bad = r->len < header || r->p[0] != version;
}

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || r->len - r->off < n) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

static uint8_t rd_u8(struct rd *r)
{
	const uint8_t *p = rd_take(r, 1);

	return p ? p[0] : 0;
}

static uint32_t rd_u32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);

	return p ? ck_le32(p) : 0;
}

static uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_take(r, 8);

	return p ? ck_le64(p) : 0;
}

static void rd_skip(struct rd *r, size_t n)
{
	rd_take(r, n);
}

/* A string of n bytes as a new NUL-terminated copy; *out stays NULL on a bad record. */
static int rd_str(struct rd *r, size_t n, char **out)
{
	const uint8_t *p = rd_take(r, n);

	*out = NULL;
	if (!p)
		return 0;
	*out = malloc(n + 1);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, p, n);
	(*out)[n] = '\0';
	return 0;
}

/* 0 when the whole record was consumed, -EIO otherwise. */
static int rd_end(const struct rd *r)
{
	return r->bad || r->off != r->len ? -EIO : 0;
}

static char *dup_bytes(const void *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/* ---- series: ver u8, flags u8, rsv u16, pattern_len u32, created_ns i64 | pattern ---- */

#define SERIES_HDR 16

int ck_rec_put_series(struct ck_buf *b, const char *pattern, int64_t created_ns)
{
	size_t n = pattern ? strlen(pattern) : 0;

	if (ck_buf_putc(b, CK_STORE_FORMAT) < 0 || ck_buf_putc(b, pattern ? 1 : 0) < 0 ||
	    ck_buf_put_le16(b, 0) < 0 || ck_buf_put_le32(b, (uint32_t)n) < 0 ||
	    ck_buf_put_le64(b, (uint64_t)created_ns) < 0 || ck_buf_put(b, pattern, n) < 0)
		return -ENOMEM;
	return 0;
}

int ck_rec_get_series(const MDB_val *v, char **pattern)
{
	int64_t created_ns;

	return ck_rec_get_series_full(v, pattern, &created_ns);
}

int ck_rec_get_series_full(const MDB_val *v, char **pattern, int64_t *created_ns)
{
	struct rd r;
	uint8_t flags;
	uint32_t n;
	int rc;

	*pattern = NULL;
	rd_init(&r, v, SERIES_HDR, CK_STORE_FORMAT);
	flags = rd_u8(&r);
	rd_skip(&r, 2);
	n = rd_u32(&r);
	*created_ns = (int64_t)rd_u64(&r);
	rc = rd_str(&r, n, pattern);
	if (rc == 0)
		rc = rd_end(&r);
	if (rc == 0 && !(flags & 1)) {
		free(*pattern);
		*pattern = NULL;
	}
	if (rc < 0) {
		free(*pattern);
		*pattern = NULL;
	}
	return rc;
}

/* ---- ckpt: ver u8, flags u8 (CK_CKPT_FLAG_*), rsv u16, name_len u32, id u64, step i64,
 *      imported_ns i64, src_len u32, rsv u32 | name src ---- */

#define CKPT_HDR 40

int ck_rec_put_ckpt(struct ck_buf *b, const char *root, const struct ck_ckpt_info *c, int64_t imported_ns)
{
	const char *src = root ? ck_store_rel_path(root, c->src_path) : c->src_path;
	size_t nn = strlen(c->name), ns = strlen(src);
	uint8_t flags = (c->is_file ? CK_CKPT_FLAG_FILE : 0) | (c->deleted ? CK_CKPT_FLAG_DELETED : 0);

	if (ck_buf_putc(b, CK_STORE_FORMAT) < 0 || ck_buf_putc(b, flags) < 0 ||
	    ck_buf_put_le16(b, 0) < 0 || ck_buf_put_le32(b, (uint32_t)nn) < 0 ||
	    ck_buf_put_le64(b, c->id) < 0 || ck_buf_put_le64(b, (uint64_t)c->step) < 0 ||
	    ck_buf_put_le64(b, (uint64_t)imported_ns) < 0 || ck_buf_put_le32(b, (uint32_t)ns) < 0 ||
	    ck_buf_put_le32(b, 0) < 0 || ck_buf_put(b, c->name, nn) < 0 || ck_buf_put(b, src, ns) < 0)
		return -ENOMEM;
	return 0;
}

int ck_rec_get_ckpt(const MDB_val *k, const MDB_val *v, const char *root, struct ck_ckpt_info *out)
{
	const char *key = k->mv_data;
	size_t slen = strnlen(key, k->mv_size);
	uint32_t nn, ns;
	uint8_t flags;
	struct rd r;
	int rc;

	memset(out, 0, sizeof(*out));
	if (slen == k->mv_size)
		return -EIO;
	rd_init(&r, v, CKPT_HDR, CK_STORE_FORMAT);
	flags = rd_u8(&r);
	out->is_file = !!(flags & CK_CKPT_FLAG_FILE);
	out->deleted = !!(flags & CK_CKPT_FLAG_DELETED);
	rd_skip(&r, 2);
	nn = rd_u32(&r);
	out->id = rd_u64(&r);
	out->step = (int64_t)rd_u64(&r);
	out->imported_ns = (int64_t)rd_u64(&r);
	ns = rd_u32(&r);
	rd_skip(&r, 4);
	rc = rd_str(&r, nn, &out->name);
	if (rc == 0)
		rc = rd_str(&r, ns, &out->src_path);
	if (rc == 0)
		rc = rd_end(&r);
	if (rc == 0 && root)
		rc = ck_store_abs_path_inplace(root, &out->src_path);
	if (rc == 0) {
		out->series = dup_bytes(key, slen);
		if (!out->series)
			rc = -ENOMEM;
	}
	if (rc < 0)
		ck_ckpt_info_clear(out);
	return rc;
}

/* ---- file: ver u8, kind u8, flags u16, ntensors u32, id u64, dev u64, ino u64,
 *      size u64, mtime_ns i64, nstorages u32, src_len u32, err_len u32, then
 *      (err: the error of a bad file, the target of a symlink)
 *      format 1 (flags 0): rsv u32 | src err
 *      format 2: mode u32, uid u32, gid u32 | src err [relpath]
 *      flags: FILE_OWNER (mode, uid, gid: the file's owner at import),
 *      FILE_RELPATH (the relpath is the rest of the value: the key holds a
 *      shortened form of it) ---- */

#define FILE_HDR 64
#define FILE_HDR_2 72
#define FILE_FORMAT_2 2
#define FILE_OWNER 1u
#define FILE_RELPATH 2u

int ck_rec_put_file(struct ck_buf *b, const char *root, const struct ck_file_info *f, uint32_t nstorages)
{
	const char *src = root ? ck_store_rel_path(root, f->src_path) : f->src_path;
	const char *text = f->kind == CK_FILE_SYMLINK ? f->target : f->error;
	size_t ns = strlen(src), ne = text ? strlen(text) : 0;
	uint16_t flags = (f->has_owner ? FILE_OWNER : 0) | (relpath_shortened(f->relpath) ? FILE_RELPATH : 0);

	if (ck_buf_putc(b, flags ? FILE_FORMAT_2 : CK_STORE_FORMAT) < 0 || ck_buf_putc(b, (uint8_t)f->kind) < 0 ||
	    ck_buf_put_le16(b, flags) < 0 || ck_buf_put_le32(b, f->ntensors) < 0 ||
	    ck_buf_put_le64(b, f->id) < 0 || ck_buf_put_le64(b, f->dev) < 0 ||
	    ck_buf_put_le64(b, f->ino) < 0 || ck_buf_put_le64(b, f->size) < 0 ||
	    ck_buf_put_le64(b, (uint64_t)f->mtime_ns) < 0 || ck_buf_put_le32(b, nstorages) < 0 ||
	    ck_buf_put_le32(b, (uint32_t)ns) < 0 || ck_buf_put_le32(b, (uint32_t)ne) < 0 ||
	    ck_buf_put_le32(b, f->has_owner ? f->owner.mode & 07777 : 0) < 0)
		return -ENOMEM;
	if (flags && (ck_buf_put_le32(b, f->has_owner ? f->owner.uid : 0) < 0 ||
		      ck_buf_put_le32(b, f->has_owner ? f->owner.gid : 0) < 0))
		return -ENOMEM;
	if (ck_buf_put(b, src, ns) < 0 || ck_buf_put(b, text, ne) < 0)
		return -ENOMEM;
	if ((flags & FILE_RELPATH) && ck_buf_put(b, f->relpath, strlen(f->relpath)) < 0)
		return -ENOMEM;
	return 0;
}

int ck_rec_get_file(const MDB_val *k, const MDB_val *v, const char *root, struct ck_file_info *out)
{
	uint32_t ns, ne, mode, uid = 0, gid = 0;
	uint16_t flags;
	uint8_t kind;
	struct rd r;
	int rc, format2;

	memset(out, 0, sizeof(*out));
	if (k->mv_size < 8)
		return -EIO;
	out->ckpt_id = ck_key_get_id(k->mv_data);
	format2 = v->mv_size >= 1 && ((const uint8_t *)v->mv_data)[0] == FILE_FORMAT_2;
	rd_init(&r, v, format2 ? FILE_HDR_2 : FILE_HDR, format2 ? FILE_FORMAT_2 : CK_STORE_FORMAT);
	kind = rd_u8(&r);
	flags = rd_u8(&r);
	flags |= (uint16_t)(rd_u8(&r) << 8);
	out->ntensors = rd_u32(&r);
	out->id = rd_u64(&r);
	out->dev = rd_u64(&r);
	out->ino = rd_u64(&r);
	out->size = rd_u64(&r);
	out->mtime_ns = (int64_t)rd_u64(&r);
	rd_u32(&r);
	ns = rd_u32(&r);
	ne = rd_u32(&r);
	mode = rd_u32(&r);
	if (format2) {
		uid = rd_u32(&r);
		gid = rd_u32(&r);
	}
	/* One way to write each record: format 2 only for what format 1 cannot hold. */
	if (kind > CK_FILE_KIND_LAST || (format2 ? !flags || (flags & ~(FILE_OWNER | FILE_RELPATH)) : flags != 0) ||
	    (!(flags & FILE_OWNER) && (mode || uid || gid)) || (mode & ~07777u))
		r.bad = 1;
	if (flags & FILE_OWNER) {
		out->has_owner = 1;
		out->owner.mode = mode;
		out->owner.uid = uid;
		out->owner.gid = gid;
	}
	out->kind = (enum ck_file_kind)kind;
	rc = rd_str(&r, ns, &out->src_path);
	if (rc == 0 && (ne || kind == CK_FILE_SYMLINK))
		rc = rd_str(&r, ne, kind == CK_FILE_SYMLINK ? &out->target : &out->error);
	if (rc == 0 && (flags & FILE_RELPATH) && !r.bad && r.off < r.len)
		rc = rd_str(&r, r.len - r.off, &out->relpath);
	if (rc == 0)
		rc = rd_end(&r);
	if (rc == 0 && root)
		rc = ck_store_abs_path_inplace(root, &out->src_path);
	if (rc == 0 && !out->relpath) {
		out->relpath = dup_bytes((const uint8_t *)k->mv_data + 8, k->mv_size - 8);
		if (!out->relpath)
			rc = -ENOMEM;
	}
	/* The key must be the one this relpath makes. */
	if (rc == 0 && relpath_shortened(out->relpath) != !!(flags & FILE_RELPATH))
		rc = -EIO;
	if (rc < 0)
		ck_file_info_clear(out);
	return rc;
}

/* ---- storage: ver u8, rsv u8, rsv u16, key_len u32, offset u64, length u64,
 *      hash_lo u64, hash_hi u64 | key ---- */

#define STORAGE_HDR 40

int ck_rec_put_storage(struct ck_buf *b, const struct ck_storage_info *s)
{
	size_t nk = strlen(s->key);

	if (ck_buf_putc(b, CK_STORE_FORMAT) < 0 || ck_buf_putc(b, 0) < 0 || ck_buf_put_le16(b, 0) < 0 ||
	    ck_buf_put_le32(b, (uint32_t)nk) < 0 || ck_buf_put_le64(b, s->offset) < 0 ||
	    ck_buf_put_le64(b, s->length) < 0 || ck_buf_put_le64(b, s->hash_lo) < 0 ||
	    ck_buf_put_le64(b, s->hash_hi) < 0 || ck_buf_put(b, s->key, nk) < 0)
		return -ENOMEM;
	return 0;
}

int ck_rec_get_storage(const MDB_val *v, struct ck_storage_info *out)
{
	uint32_t nk;
	struct rd r;
	int rc;

	memset(out, 0, sizeof(*out));
	rd_init(&r, v, STORAGE_HDR, CK_STORE_FORMAT);
	rd_skip(&r, 3);
	nk = rd_u32(&r);
	out->offset = rd_u64(&r);
	out->length = rd_u64(&r);
	out->hash_lo = rd_u64(&r);
	out->hash_hi = rd_u64(&r);
	rc = rd_str(&r, nk, &out->key);
	if (rc == 0)
		rc = rd_end(&r);
	if (rc < 0)
		ck_storage_info_clear(out);
	return rc;
}

/* ---- tensor: ver u8, dtype u8, ndim u8, rsv u8, name_len u32, layer_len u32,
 *      skey_len u32, storage_offset u64 | shape u64[ndim] name layer skey ---- */

#define TENSOR_HDR 24

int ck_rec_put_tensor(struct ck_buf *b, const struct ck_tensor_info *t)
{
	size_t nn = strlen(t->name), nl = strlen(t->layer), nk = strlen(t->storage_key);
	int i;

	if (t->ndim < 0 || t->ndim > CK_MAX_DIMS)
		return -EINVAL;
	if (ck_buf_putc(b, CK_STORE_FORMAT) < 0 || ck_buf_putc(b, (uint8_t)t->dtype) < 0 ||
	    ck_buf_putc(b, (uint8_t)t->ndim) < 0 || ck_buf_putc(b, 0) < 0 ||
	    ck_buf_put_le32(b, (uint32_t)nn) < 0 || ck_buf_put_le32(b, (uint32_t)nl) < 0 ||
	    ck_buf_put_le32(b, (uint32_t)nk) < 0 || ck_buf_put_le64(b, t->storage_offset) < 0)
		return -ENOMEM;
	for (i = 0; i < t->ndim; i++) {
		if (ck_buf_put_le64(b, t->shape[i]) < 0)
			return -ENOMEM;
	}
	if (ck_buf_put(b, t->name, nn) < 0 || ck_buf_put(b, t->layer, nl) < 0 ||
	    ck_buf_put(b, t->storage_key, nk) < 0)
		return -ENOMEM;
	return 0;
}

int ck_rec_get_tensor(const MDB_val *v, struct ck_tensor_info *out)
{
	uint32_t nn, nl, nk;
	uint8_t dtype;
	struct rd r;
	int i, rc;

	memset(out, 0, sizeof(*out));
	rd_init(&r, v, TENSOR_HDR, CK_STORE_FORMAT);
	dtype = rd_u8(&r);
	out->ndim = rd_u8(&r);
	rd_skip(&r, 1);
	nn = rd_u32(&r);
	nl = rd_u32(&r);
	nk = rd_u32(&r);
	out->storage_offset = rd_u64(&r);
	if (dtype >= CK_DT__COUNT || out->ndim > CK_MAX_DIMS)
		r.bad = 1;
	out->dtype = (enum ck_dtype)dtype;
	for (i = 0; i < out->ndim && !r.bad; i++)
		out->shape[i] = rd_u64(&r);
	rc = rd_str(&r, nn, &out->name);
	if (rc == 0)
		rc = rd_str(&r, nl, &out->layer);
	if (rc == 0)
		rc = rd_str(&r, nk, &out->storage_key);
	if (rc == 0)
		rc = rd_end(&r);
	if (rc < 0)
		ck_tensor_info_clear(out);
	return rc;
}

/* ---- freeing ---- */

void ck_ckpt_info_clear(struct ck_ckpt_info *c)
{
	free(c->series);
	free(c->name);
	free(c->src_path);
	c->series = c->name = c->src_path = NULL;
}

void ck_ckpt_info_free(struct ck_ckpt_info *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		ck_ckpt_info_clear(&v[i]);
	free(v);
}
