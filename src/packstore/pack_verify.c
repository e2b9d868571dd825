/* Verifying packed files: every chunk of every packed file decoded through
 * its chain and checked against its hash.  A chunk shared by many files
 * (dedup) is decoded once when good; a bad one is reported for every file
 * that uses it, so that the report says what depends on the damage. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "packstore_int.h"

/* The hashes found good: open addressing, never removed. */
struct hset {
	struct ck_hash128 *v;
	size_t cap, n;
};

static int hset_has(const struct hset *s, struct ck_hash128 h)
{
	if (!s->cap)
		return 0;
	for (size_t i = h.lo & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->v[i].hi && !s->v[i].lo)
			return 0;
		if (ck_hash128_eq(s->v[i], h))
			return 1;
	}
}

static int hset_add(struct hset *s, struct ck_hash128 h)
{
	if (!h.hi && !h.lo)
		return 0;   /* the empty-slot marker: never worth remembering */
	if ((s->n + 1) * 2 > s->cap) {
		struct hset g = { calloc(s->cap ? s->cap * 2 : 1024, sizeof(*g.v)), s->cap ? s->cap * 2 : 1024, 0 };

		if (!g.v)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i].hi || s->v[i].lo)
				hset_add(&g, s->v[i]);
		free(s->v);
		*s = g;
	}
	for (size_t i = h.lo & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (ck_hash128_eq(s->v[i], h))
			return 0;
		if (!s->v[i].hi && !s->v[i].lo) {
			s->v[i] = h;
			s->n++;
			return 0;
		}
	}
}

static int verify_map(MDB_txn *txn, struct ck_store *st, struct ck_pack_fds *fds, struct ck_decoder *d,
		      uint64_t file_id, const struct ck_fmap *m, struct hset *good, ck_packed_bad_fn bad, void *ctx,
		      uint64_t *checked)
{
	uint64_t off = 0;

	for (uint32_t i = 0; i < m->nchunks; off += m->chunks[i].len, i++) {
		struct ck_error why = { { 0 } };
		const struct ck_fmap_chunk *c = &m->chunks[i];
		uint32_t len = 0;
		int rc;

		if (hset_has(good, c->hash))
			continue;
		rc = ck_chunk_resolve(txn, st, fds, d, NULL, 0, c->hash, d->out, &len, NULL, &why);
		if (rc == -ENOMEM)
			return rc;
		if (checked)
			(*checked)++;
		if (rc == 0 && len != c->len) {
			rc = -EIO;
			ck_fail(&why, EIO, "chunk decodes to %u bytes, the file map says %u", len, c->len);
		}
		if (rc < 0) {
			if (bad)
				bad(ctx, file_id, off, c->len, why.msg);
			continue;
		}
		if (hset_add(good, c->hash) < 0)
			return -ENOMEM;
	}
	return 0;
}

int ck_store_verify_packs(struct ck_store *st, ck_packed_bad_fn bad, void *ctx, uint64_t *chunks_checked,
			  struct ck_error *err)
{
	struct ck_pack_fds fds;
	struct ck_decoder d;
	struct hset good = { 0 };
	MDB_cursor *cur = NULL;
	MDB_txn *txn = NULL;
	MDB_val k, v;
	int rc, mrc;

	if (chunks_checked)
		*chunks_checked = 0;
	if (!ck_pack_ready(st))
		return 0;
	if (ck_decoder_init(&d) < 0)
		return ck_fail(err, ENOMEM, "out of memory");
	ck_pack_fds_init(&fds);
	rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));
	if (rc == 0)
		rc = ck_mdb_errno(mdb_cursor_open(txn, st->fmaps, &cur));
	if (rc < 0) {
		ck_fail(err, -rc, "%s: index: %s", st->path, strerror(-rc));
		goto out;
	}
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == 0 && rc == 0;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct ck_error why = { { 0 } };
		uint64_t id = k.mv_size == 8 ? ck_key_get_id(k.mv_data) : 0;
		struct ck_fmap m;

		if (ck_fmap_get(v.mv_data, v.mv_size, &m, &why) < 0) {
			if (bad)
				bad(ctx, id, 0, 0, why.msg);
			continue;
		}
		if (m.flags & CK_FMAP_PACKED)
			rc = verify_map(txn, st, &fds, &d, id, &m, &good, bad, ctx, chunks_checked);
		ck_fmap_clear(&m);
	}
	if (rc < 0)
		ck_fail(err, -rc, "verify: %s", strerror(-rc));
	else if (mrc != MDB_NOTFOUND)
		rc = ck_fail(err, -ck_mdb_errno(mrc), "%s: index: %s", st->path, mdb_strerror(mrc));
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		mdb_txn_abort(txn);
	free(good.v);
	ck_pack_fds_close(&fds);
	ck_decoder_clear(&d);
	return rc;
}
