/* The packed store's index records: the `chunks` and `fmaps` databases and
 * their value codecs (docs/format.md, "Packed store"). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_table.h"

#define LOC_HDR 56
#define FMAP_HDR 48
#define FMAP_CHUNK 24
#define FMAP_LOSSY_HDR 16     /* method, 3 reserved, count, bound */
#define FMAP_LOSSY_ENT 24     /* storage, dtype, 3 reserved, max_abs, max_err */

static uint64_t bits_of(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

static double double_of(uint64_t u)
{
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

void ck_chunk_key(uint8_t out[16], struct ck_hash128 h)
{
	ck_set_be64(out, h.hi);
	ck_set_be64(out + 8, h.lo);
}

void ck_hash128_hex(struct ck_hash128 h, char out[33])
{
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}

int ck_chunk_loc_put(struct ck_buf *b, const struct ck_chunk_loc *l)
{
	size_t plen = l->where == CK_CHUNK_RAW && l->path ? strlen(l->path) : 0;
	int rc = 0;

	rc |= ck_buf_putc(b, CK_STORE_FORMAT);
	rc |= ck_buf_putc(b, (uint8_t)l->where);
	rc |= ck_buf_putc(b, (uint8_t)l->codec);
	rc |= ck_buf_putc(b, (uint8_t)l->elem);
	rc |= ck_buf_put_le32(b, l->raw_len);
	rc |= ck_buf_put_le32(b, l->tail);
	rc |= ck_buf_put_le32(b, l->where == CK_CHUNK_PACKED ? l->pack_id : 0);
	rc |= ck_buf_put_le64(b, l->offset);
	rc |= ck_buf_put_le32(b, l->where == CK_CHUNK_PACKED ? l->enc_len : (uint32_t)plen);
	rc |= ck_buf_put_le32(b, 0);
	rc |= ck_buf_put_le64(b, l->ref.hi);
	rc |= ck_buf_put_le64(b, l->ref.lo);
	rc |= ck_buf_put_le64(b, l->where == CK_CHUNK_RAW ? l->file_id : 0);
	if (plen)
		rc |= ck_buf_put(b, l->path, plen);
	return rc ? -ENOMEM : 0;
}

int ck_chunk_loc_get(const MDB_val *v, struct ck_chunk_loc *out)
{
	const uint8_t *p = v->mv_data;
	uint32_t n;

	memset(out, 0, sizeof(*out));
	if (v->mv_size < LOC_HDR || p[0] != CK_STORE_FORMAT)
		return -EIO;
	out->where = p[1];
	out->codec = p[2];
	out->elem = p[3];
	out->raw_len = ck_le32(p + 4);
	out->tail = ck_le32(p + 8);
	out->pack_id = ck_le32(p + 12);
	out->offset = ck_le64(p + 16);
	n = ck_le32(p + 24);
	out->ref.hi = ck_le64(p + 32);
	out->ref.lo = ck_le64(p + 40);
	out->file_id = ck_le64(p + 48);
	if (out->codec >= CK_CODEC__COUNT || out->raw_len > CK_CHUNK_MAX)
		return -EIO;
	if (out->where == CK_CHUNK_PACKED) {
		out->enc_len = n;
		return v->mv_size == LOC_HDR ? 0 : -EIO;
	}
	if (out->where != CK_CHUNK_RAW || v->mv_size != LOC_HDR + (size_t)n || n == 0)
		return -EIO;
	out->path = malloc((size_t)n + 1);
	if (!out->path)
		return -ENOMEM;
	memcpy(out->path, p + LOC_HDR, n);
	out->path[n] = '\0';
	if (strlen(out->path) != n) {
		ck_chunk_loc_clear(out);
		return -EIO;
	}
	return 0;
}

void ck_chunk_loc_clear(struct ck_chunk_loc *l)
{
	free(l->path);
	l->path = NULL;
}

int ck_chunk_lookup(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, struct ck_chunk_loc *out)
{
	uint8_t key[16];
	MDB_val k = { sizeof(key), key }, v;
	int rc;

	if (!__atomic_load_n(&st->packs_ready, __ATOMIC_ACQUIRE))
		return -ENOENT;
	ck_chunk_key(key, h);
	rc = mdb_get(txn, st->chunks, &k, &v);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return ck_mdb_errno(rc);
	rc = ck_chunk_loc_get(&v, out);
	if (rc == 0 && out->path && (rc = ck_store_abs_path_inplace(st->path, &out->path)) < 0)
		ck_chunk_loc_clear(out);
	return rc;
}

int ck_chunk_store(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, const struct ck_chunk_loc *l)
{
	struct ck_buf b = CK_BUF_INIT;
	uint8_t key[16];
	MDB_val k = { sizeof(key), key }, v;
	int rc;

	struct ck_chunk_loc rel = *l;

	/* A raw location names its file as the store records paths. */
	if (rel.path)
		rel.path = (char *)ck_store_rel_path(st->path, rel.path);
	ck_chunk_key(key, h);
	rc = ck_chunk_loc_put(&b, &rel);
	if (rc == 0) {
		v.mv_size = b.len;
		v.mv_data = b.data;
		rc = ck_mdb_errno(mdb_put(txn, st->chunks, &k, &v, 0));
	}
	ck_buf_free(&b);
	return rc;
}

int ck_fmap_put(struct ck_buf *b, const struct ck_fmap *m)
{
	int rc = 0;

	rc |= ck_buf_putc(b, CK_STORE_FORMAT);
	rc |= ck_buf_putc(b, (uint8_t)m->flags);
	rc |= ck_buf_put_le16(b, 0);
	rc |= ck_buf_put_le32(b, m->nchunks);
	rc |= ck_buf_put_le64(b, m->size);
	rc |= ck_buf_put_le64(b, m->dedup_bytes);
	rc |= ck_buf_put_le64(b, m->delta_bytes);
	rc |= ck_buf_put_le64(b, m->plain_bytes);
	rc |= ck_buf_put_le64(b, m->stored_bytes);
	for (uint32_t i = 0; i < m->nchunks && rc == 0; i++) {
		const struct ck_fmap_chunk *c = &m->chunks[i];

		rc |= ck_buf_put_le64(b, c->hash.hi);
		rc |= ck_buf_put_le64(b, c->hash.lo);
		rc |= ck_buf_put_le32(b, c->len);
		rc |= ck_buf_putc(b, (uint8_t)c->elem);
		rc |= ck_buf_put(b, "\0\0\0", 3);
	}
	if (m->flags & CK_FMAP_LOSSY) {
		rc |= ck_buf_putc(b, (uint8_t)m->lossy_method);
		rc |= ck_buf_put(b, "\0\0\0", 3);
		rc |= ck_buf_put_le32(b, m->nlossy);
		rc |= ck_buf_put_le64(b, bits_of(m->lossy_bound));
		for (uint32_t i = 0; i < m->nlossy && rc == 0; i++) {
			rc |= ck_buf_put_le32(b, m->lossy[i].storage);
			rc |= ck_buf_putc(b, (uint8_t)m->lossy[i].dtype);
			rc |= ck_buf_put(b, "\0\0\0", 3);
			rc |= ck_buf_put_le64(b, bits_of(m->lossy[i].max_abs));
			rc |= ck_buf_put_le64(b, bits_of(m->lossy[i].max_err));
		}
	}
	return rc ? -ENOMEM : 0;
}

/* The lossy section at p (n bytes, all of what follows the chunks). */
static int get_lossy(const uint8_t *p, size_t n, struct ck_fmap *out, struct ck_error *err)
{
	uint32_t prev = 0;

	if (n < FMAP_LOSSY_HDR || p[0] == 0 || p[1] || p[2] || p[3])
		return ck_fail(err, EIO, "file map: bad lossy section");
	out->lossy_method = p[0];
	out->nlossy = ck_le32(p + 4);
	out->lossy_bound = double_of(ck_le64(p + 8));
	if ((n - FMAP_LOSSY_HDR) / FMAP_LOSSY_ENT != out->nlossy || (n - FMAP_LOSSY_HDR) % FMAP_LOSSY_ENT ||
	    !(out->lossy_bound > 0 && out->lossy_bound < 1))
		return ck_fail(err, EIO, "file map: lossy section of %zu bytes for %u storages", n, out->nlossy);
	out->lossy = calloc(out->nlossy ? out->nlossy : 1, sizeof(*out->lossy));
	if (!out->lossy)
		return ck_fail(err, ENOMEM, "out of memory");
	for (uint32_t i = 0; i < out->nlossy; i++) {
		const uint8_t *q = p + FMAP_LOSSY_HDR + (size_t)i * FMAP_LOSSY_ENT;
		struct ck_lossy_storage *l = &out->lossy[i];

		l->storage = ck_le32(q);
		l->dtype = (enum ck_dtype)q[4];
		l->max_abs = double_of(ck_le64(q + 8));
		l->max_err = double_of(ck_le64(q + 16));
		if ((i && l->storage <= prev) || q[5] || q[6] || q[7] || !(l->max_abs >= 0) || !(l->max_err >= 0) ||
		    l->max_err > l->max_abs * out->lossy_bound)
			return ck_fail(err, EIO, "file map: lossy storage %u out of order or past its bound", i);
		prev = l->storage;
	}
	return 0;
}

int ck_fmap_get(const void *data, size_t n, struct ck_fmap *out, struct ck_error *err)
{
	const uint8_t *p = data;
	uint64_t total = 0;

	memset(out, 0, sizeof(*out));
	if (n < FMAP_HDR || p[0] != CK_STORE_FORMAT)
		return ck_fail(err, EIO, "file map: bad header");
	out->flags = p[1];
	out->nchunks = ck_le32(p + 4);
	out->size = ck_le64(p + 8);
	out->dedup_bytes = ck_le64(p + 16);
	out->delta_bytes = ck_le64(p + 24);
	out->plain_bytes = ck_le64(p + 32);
	out->stored_bytes = ck_le64(p + 40);
	if ((out->flags & ~(unsigned)(CK_FMAP_PACKED | CK_FMAP_LOSSY)) ||
	    ((out->flags & CK_FMAP_LOSSY) && !(out->flags & CK_FMAP_PACKED)))
		return ck_fail(err, EIO, "file map: flags 0x%x", out->flags);
	if (out->nchunks > (n - FMAP_HDR) / FMAP_CHUNK ||
	    (!(out->flags & CK_FMAP_LOSSY) && (n - FMAP_HDR) != (size_t)out->nchunks * FMAP_CHUNK))
		return ck_fail(err, EIO, "file map: %zu bytes for %u chunks", n, out->nchunks);
	out->chunks = calloc(out->nchunks ? out->nchunks : 1, sizeof(*out->chunks));
	if (!out->chunks)
		return ck_fail(err, ENOMEM, "out of memory");
	for (uint32_t i = 0; i < out->nchunks; i++) {
		const uint8_t *q = p + FMAP_HDR + (size_t)i * FMAP_CHUNK;
		struct ck_fmap_chunk *c = &out->chunks[i];

		c->hash.hi = ck_le64(q);
		c->hash.lo = ck_le64(q + 8);
		c->len = ck_le32(q + 16);
		c->elem = q[20];
		if (c->len == 0 || c->len > CK_CHUNK_MAX || (c->elem != 1 && c->elem != 2 && c->elem != 4 &&
							     c->elem != 8)) {
			ck_fmap_clear(out);
			return ck_fail(err, EIO, "file map: chunk %u: bad length or element size", i);
		}
		total += c->len;
	}
	if (total != out->size) {
		ck_fmap_clear(out);
		return ck_fail(err, EIO, "file map: chunks add up to %llu bytes, not its size",
			       (unsigned long long)total);
	}
	if (out->flags & CK_FMAP_LOSSY) {
		size_t at = FMAP_HDR + (size_t)out->nchunks * FMAP_CHUNK;
		int rc = get_lossy(p + at, n - at, out, err);

		if (rc < 0) {
			ck_fmap_clear(out);
			return rc;
		}
	}
	return 0;
}

void ck_fmap_clear(struct ck_fmap *m)
{
	free(m->chunks);
	free(m->lossy);
	m->chunks = NULL;
	m->nchunks = 0;
	m->lossy = NULL;
	m->nlossy = 0;
}

int ck_fmap_lookup(MDB_txn *txn, struct ck_store *st, uint64_t file_id, struct ck_fmap *out)
{
	uint8_t key[8];
	MDB_val k = { sizeof(key), key }, v;
	int rc;

	if (!__atomic_load_n(&st->packs_ready, __ATOMIC_ACQUIRE))
		return -ENOENT;
	ck_key_id(key, file_id);
	rc = mdb_get(txn, st->fmaps, &k, &v);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return ck_mdb_errno(rc);
	return ck_fmap_get(v.mv_data, v.mv_size, out, NULL);
}

int ck_pack_dbs_open(struct ck_store *st, struct ck_error *err)
{
	MDB_txn *txn;
	int rc;

	st->packs_ready = 0;
	rc = mdb_txn_begin(st->env, NULL, st->index_rw ? 0 : MDB_RDONLY, &txn);
	if (rc)
		return ck_fail(err, -ck_mdb_errno(rc), "%s: index: %s", st->path, mdb_strerror(rc));
	rc = mdb_dbi_open(txn, CK_DB_CHUNKS, st->index_rw ? MDB_CREATE : 0, &st->chunks);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_FMAPS, st->index_rw ? MDB_CREATE : 0, &st->fmaps);
	if (rc == MDB_NOTFOUND && !st->index_rw) {
		/* A store never opened writable since packs exist: nothing is packed. */
		mdb_txn_abort(txn);
		return 0;
	}
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	if (rc)
		return ck_fail(err, -ck_mdb_errno(rc), "%s: index: %s", st->path, mdb_strerror(rc));
	st->packs_ready = 1;
	return 0;
}

/* A read-only open of an index made before packs has no chunks or fmaps;
 * a writable open or a compaction may create them later.  Entry points ask
 * again (mdb_dbi_open, serialized process-wide as LMDB requires) so that a
 * long-running reader sees packed files once they exist. */
static pthread_mutex_t dbs_lock = PTHREAD_MUTEX_INITIALIZER;

int ck_pack_ready(struct ck_store *st)
{
	MDB_dbi chunks, fmaps;
	MDB_txn *txn;
	int ready;

	if (__atomic_load_n(&st->packs_ready, __ATOMIC_ACQUIRE))
		return 1;
	pthread_mutex_lock(&dbs_lock);
	ready = __atomic_load_n(&st->packs_ready, __ATOMIC_ACQUIRE);
	if (!ready && mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) == 0) {
		if (mdb_dbi_open(txn, CK_DB_CHUNKS, 0, &chunks) != 0 || mdb_dbi_open(txn, CK_DB_FMAPS, 0, &fmaps) != 0)
			mdb_txn_abort(txn);
		else if (mdb_txn_commit(txn) == 0) {
			st->chunks = chunks;
			st->fmaps = fmaps;
			__atomic_store_n(&st->packs_ready, 1, __ATOMIC_RELEASE);
			ready = 1;
		}
	}
	pthread_mutex_unlock(&dbs_lock);
	return ready;
}

/* file_id's map in a transaction of its own: 1 (m to clear), 0 when the
 * store has no packs or the file no map, or -errno. */
static int fmap_of(struct ck_store *st, uint64_t file_id, struct ck_fmap *m)
{
	MDB_txn *txn;
	int rc;

	if (!ck_pack_ready(st))
		return 0;
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return ck_mdb_errno(rc);
	rc = ck_fmap_lookup(txn, st, file_id, m);
	mdb_txn_abort(txn);
	return rc == -ENOENT ? 0 : rc < 0 ? rc : 1;
}

int ck_store_file_packed(struct ck_store *st, uint64_t file_id)
{
	struct ck_fmap m;
	int rc;

	rc = fmap_of(st, file_id, &m);
	if (rc <= 0)
		return rc;
	rc = (m.flags & CK_FMAP_PACKED) ? 1 : 0;
	ck_fmap_clear(&m);
	return rc;
}

int ck_store_file_pack_info(struct ck_store *st, uint64_t file_id, struct ck_file_pack_info *out)
{
	struct ck_fmap m;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = fmap_of(st, file_id, &m);
	if (rc <= 0)
		return rc;
	out->mapped = 1;
	out->packed = !!(m.flags & CK_FMAP_PACKED);
	out->size = m.size;
	out->chunks = m.nchunks;
	out->dedup_bytes = m.dedup_bytes;
	out->delta_bytes = m.delta_bytes;
	out->plain_bytes = m.plain_bytes;
	out->stored_bytes = m.stored_bytes;
	if (m.flags & CK_FMAP_LOSSY) {
		out->lossy = 1;
		out->lossy_method = m.lossy_method;
		out->lossy_bound = m.lossy_bound;
		out->lossy_storages = m.nlossy;
		for (uint32_t i = 0; i < m.nlossy; i++)
			if (m.lossy[i].max_abs > 0 && m.lossy[i].max_err / m.lossy[i].max_abs > out->lossy_max_rel)
				out->lossy_max_rel = m.lossy[i].max_err / m.lossy[i].max_abs;
	}
	ck_fmap_clear(&m);
	return 0;
}

int ck_store_file_lossy(struct ck_store *st, uint64_t file_id, struct ck_lossy_storage **out, size_t *n)
{
	struct ck_fmap m;
	int rc;

	*out = NULL;
	*n = 0;
	rc = fmap_of(st, file_id, &m);
	if (rc <= 0)
		return rc;
	if (m.flags & CK_FMAP_LOSSY) {
		*out = m.lossy;
		*n = m.nlossy;
		m.lossy = NULL;
	}
	ck_fmap_clear(&m);
	return 0;
}

char *ck_pack_path(const char *store, uint32_t pack_id)
{
	size_t n = strlen(store) + sizeof("/" CK_PACKS_DIR "/pack-12345678.ckpack") + 8;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s/pack-%08u.ckpack", store, CK_PACKS_DIR, pack_id);
	return p;
}

int ck_pack_open(const char *store, uint32_t pack_id)
{
	char *path = ck_pack_path(store, pack_id);
	int fd;

	if (!path)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	return fd < 0 ? -errno : fd;
}

int ck_chunk_raise_tails(MDB_txn *txn, struct ck_store *st, struct ck_hash128 x, uint32_t t)
{
	for (int steps = 0; steps <= CK_PACK_MAX_CHAIN; steps++, t++) {
		struct ck_chunk_loc l;
		int rc = ck_chunk_lookup(txn, st, x, &l), delta;

		if (rc < 0)
			return rc == -ENOENT ? 0 : rc;
		if (l.tail >= t) {
			ck_chunk_loc_clear(&l);
			return 0;
		}
		l.tail = t;
		rc = ck_chunk_store(txn, st, x, &l);
		delta = l.where == CK_CHUNK_PACKED && ck_codec_needs_ref(l.codec);
		ck_chunk_loc_clear(&l);
		if (rc < 0 || !delta)
			return rc;
		x = l.ref;
	}
	return 0;
}
