/* Rebuilding the packed state from packmaps and packs: after a crash
 * between a compaction's packmap and its index commit (recovery), and
 * into a new index (reindex).  Raw maps go first (the newest versions'
 * chunks are the references and dedup sources of the rest); then every
 * packed map whose file the index does not know packed has its chunks
 * located, from the index or else from a scan of every pack. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/pack.h"
#include "ckptfs/str.h"
#include "manifest.h"
#include "chunk_table.h"
#include "staging.h"

/* Every record of every pack, by hash (loaded on first need). */
struct scan_rec {
	struct ck_hash128 h;
	struct ck_chunk_loc loc;
};

struct scan {
	int loaded;
	struct scan_rec *v;
	size_t cap, n;
	uint32_t pack_id;
};

struct rebuild {
	struct ck_store *st;
	MDB_txn *txn;
	struct scan scan;
	struct ck_error *err;
	int first_rc;
	int applied;
};

static struct scan_rec *scan_slot(struct scan *s, struct ck_hash128 h)
{
	for (size_t i = (h.lo ^ h.hi) & (s->cap - 1);; i = (i + 1) & (s->cap - 1))
		if (!s->v[i].loc.where || ck_hash128_eq(s->v[i].h, h))
			return &s->v[i];
}

static int scan_add(struct scan *s, struct ck_hash128 h, const struct ck_chunk_loc *l)
{
	struct scan_rec *r;

	if ((s->n + 1) * 2 > s->cap) {
		struct scan g = { .cap = s->cap ? s->cap * 2 : 4096 };

		g.v = calloc(g.cap, sizeof(*g.v));
		if (!g.v)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i].loc.where)
				*scan_slot(&g, s->v[i].h) = s->v[i];
		free(s->v);
		s->v = g.v;
		s->cap = g.cap;
	}
	r = scan_slot(s, h);
	/* A self-contained copy beats a delta (fewer steps, fewer ways to fail). */
	if (r->loc.where && !ck_codec_needs_ref(r->loc.codec))
		return 0;
	if (!r->loc.where)
		s->n++;
	r->h = h;
	r->loc = *l;
	return 0;
}

static int on_record(void *cb, uint64_t off, const struct ck_chunk_desc *desc, const uint8_t *payload)
{
	struct scan *s = cb;
	struct ck_chunk_loc l = { .where = CK_CHUNK_PACKED, .codec = desc->codec, .elem = desc->elem_size,
				  .raw_len = desc->raw_len, .pack_id = s->pack_id, .offset = off,
				  .enc_len = desc->enc_len };

	(void)payload;
	if (ck_codec_needs_ref(desc->codec))
		l.ref = desc->ref_hash;
	return scan_add(s, desc->raw_hash, &l);
}

static int load_scan(struct rebuild *b)
{
	for (uint32_t id = 0;; id++) {
		uint64_t end;
		int fd = ck_pack_open(b->st->path, id), rc;

		if (fd == -ENOMEM)
			return fd;
		if (fd < 0)
			break;   /* packs are numbered from 0 without gaps */
		b->scan.pack_id = id;
		/* A bad header or a torn tail ends the scan of that pack; what
		 * came before counts. */
		rc = ck_pack_scan(fd, on_record, &b->scan, &end, NULL);
		close(fd);
		if (rc == -ENOMEM)
			return rc;
	}
	b->scan.loaded = 1;
	return 0;
}

/* Makes the chunk table locate h, which the packed file fid uses. */
static int ensure_chunk(struct rebuild *b, struct ck_hash128 h, uint64_t fid, int depth)
{
	struct ck_chunk_loc have = { 0 }, loc;
	struct scan_rec *r;
	uint32_t tail = 0;
	int rc;

	rc = ck_chunk_lookup(b->txn, b->st, h, &have);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (rc == 0) {
		int fine = have.where == CK_CHUNK_PACKED || have.file_id != fid;

		tail = have.tail;
		ck_chunk_loc_clear(&have);
		if (fine)
			return 0;
	}
	if (depth > CK_PACK_MAX_CHAIN)
		return -ELOOP;
	if (!b->scan.loaded && (rc = load_scan(b)) < 0)
		return rc;
	r = b->scan.cap ? scan_slot(&b->scan, h) : NULL;
	if (!r || !r->loc.where)
		return -ENOENT;
	loc = r->loc;
	loc.tail = tail;
	rc = ck_chunk_store(b->txn, b->st, h, &loc);
	if (rc == 0 && ck_codec_needs_ref(loc.codec)) {
		rc = ensure_chunk(b, loc.ref, 0, depth + 1);
		if (rc == 0)
			rc = ck_chunk_raise_tails(b->txn, b->st, loc.ref, tail + 1);
	}
	return rc;
}

static int put_fmap(struct rebuild *b, uint64_t file_id, const struct ck_fmap *m)
{
	struct ck_buf buf = CK_BUF_INIT;
	uint8_t key[8];
	MDB_val k = { 8, key }, v;
	int rc = ck_fmap_put(&buf, m);

	ck_key_id(key, file_id);
	if (rc == 0) {
		v.mv_size = buf.len;
		v.mv_data = buf.data;
		rc = ck_mdb_errno(mdb_put(b->txn, b->st->fmaps, &k, &v, 0));
	}
	ck_buf_free(&buf);
	return rc;
}

static int apply_file(struct rebuild *b, const struct ck_file_info *f, const struct ck_fmap *m)
{
	struct ck_fmap have;
	uint64_t off = 0;
	int rc;

	if (m->size != f->size)
		return -EINVAL;
	rc = ck_fmap_lookup(b->txn, b->st, f->id, &have);
	if (rc == 0) {
		/* applied already, or the packmap is older: a lossy map replaces an
		 * exact one (a lossy pass cut short before its index commit), never
		 * the other way */
		unsigned k = CK_FMAP_PACKED | CK_FMAP_LOSSY;
		int same = (have.flags & k) == (m->flags & k) || (have.flags & CK_FMAP_LOSSY);

		ck_fmap_clear(&have);
		if (same)
			return 0;
	} else if (rc != -ENOENT) {
		return rc;
	}
	for (uint32_t i = 0; i < m->nchunks; off += m->chunks[i].len, i++) {
		const struct ck_fmap_chunk *c = &m->chunks[i];

		if (m->flags & CK_FMAP_PACKED) {
			rc = ensure_chunk(b, c->hash, f->id, 0);
		} else {
			struct ck_chunk_loc l = { .where = CK_CHUNK_RAW, .codec = CK_CODEC_RAW, .elem = c->elem,
						  .raw_len = c->len, .offset = off, .file_id = f->id,
						  .path = f->src_path }, found;

			rc = ck_chunk_lookup(b->txn, b->st, c->hash, &found);
			if (rc == 0)
				ck_chunk_loc_clear(&found);   /* located already: keep it */
			else if (rc == -ENOENT)
				rc = ck_chunk_store(b->txn, b->st, c->hash, &l);
		}
		if (rc < 0)
			return rc;
	}
	rc = put_fmap(b, f->id, m);
	if (rc == 0)
		b->applied++;
	return rc;
}

static void note(struct rebuild *b, int rc, const char *what, const char *why)
{
	if (!b->first_rc) {
		b->first_rc = rc;
		ck_fail(b->err, -rc, "%s: %s", what, why);
	}
}

/* Applies the maps of one packmap, raw ones (packed 0) or packed ones. */
static void apply_packmap(struct rebuild *b, const char *path, int packed)
{
	struct ck_error why = { { 0 } };
	struct ck_ckpt_info ck = { 0 };
	struct ck_file_info *f = NULL;
	struct ck_packmap pm;
	size_t n = 0;
	int rc;

	rc = ck_packmap_load(path, &pm, &why);
	if (rc < 0) {
		note(b, rc, path, why.msg);
		return;
	}
	/* A checkpoint the index lacks (removed since) has nothing to apply. */
	rc = ck_txn_find_checkpoint(b->txn, b->st, pm.series, pm.ckpt, &ck);
	if (rc == 0)
		rc = ck_txn_list_files(b->txn, b->st, ck.id, &f, &n);
	for (size_t i = 0; i < pm.nfiles && rc == 0; i++) {
		const struct ck_packmap_file *pf = &pm.files[i];

		if (!(pf->map.flags & CK_FMAP_PACKED) != !packed)
			continue;
		for (size_t j = 0; j < n; j++) {
			/* Only the very file version mapped: a checkpoint deleted and
			 * committed again under its name has other files. */
			if (strcmp(f[j].relpath, pf->relpath) != 0 || f[j].dev != pf->dev || f[j].ino != pf->ino ||
			    f[j].size != pf->size || f[j].mtime_ns != pf->mtime_ns)
				continue;
			rc = apply_file(b, &f[j], &pf->map);
			if (rc < 0 && rc != -ENOMEM) {
				note(b, -EIO, path, pf->relpath);
				rc = 0;
			}
		}
	}
	if (rc < 0 && rc != -ENOENT)
		note(b, rc, path, strerror(-rc));
	ck_ckpt_info_clear(&ck);
	ck_file_info_free(f, n);
	ck_packmap_clear(&pm);
}

struct packmap_walk {
	struct rebuild *b;
	int packed;
};

/* A STORE/manifests/SERIES entry: a packmap is applied, the temporary of a
 * writer that died removed. */
static int packmap_entry(void *ctx, const char *series, const char *name, const char *path)
{
	struct packmap_walk *w = ctx;

	(void)series;
	if (strstr(name, CK_PACKMAP_SUFFIX CK_REPLACE_TMP))
		unlink(path);
	else if (strlen(name) > strlen(CK_PACKMAP_SUFFIX) && ck_ends_with(name, CK_PACKMAP_SUFFIX))
		apply_packmap(w->b, path, w->packed);
	return 0;
}

/* Every STORE/manifests/SERIES/NAME.packmap. */
static void each_packmap(struct rebuild *b, int packed)
{
	struct packmap_walk w = { b, packed };

	ck_store_area_each(b->st->path, CK_MANIFEST_DIR, packmap_entry, &w);
}

int ck_pack_rebuild(struct ck_store *st, int take_lock, struct ck_error *err)
{
	struct rebuild b = { .st = st, .err = err };
	int lock = -1, rc;

	if (st->readonly || !st->packs_ready)
		return 0;
	if (take_lock) {
		rc = ck_store_lock(st, 0, &lock, err);
		if (rc < 0)
			return rc;
		rc = ck_store_index_current(st, err);
		if (rc < 0) {
			ck_store_unlock(lock);
			return rc;
		}
	}
	rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &b.txn));
	if (rc == 0) {
		each_packmap(&b, 0);
		each_packmap(&b, 1);
		rc = b.applied ? ck_mdb_errno(mdb_txn_commit(b.txn)) : 0;
		if (!b.applied)
			mdb_txn_abort(b.txn);
	}
	if (rc < 0)
		ck_fail(err, -rc, "%s: packed state: %s", st->path, strerror(-rc));
	if (lock >= 0)
		ck_store_unlock(lock);
	free(b.scan.v);
	if (rc == 0 && b.first_rc)
		rc = b.first_rc;
	return rc < 0 ? rc : b.applied;
}

int ck_pack_rebuild_ckpt(struct ck_store *st, MDB_txn *txn, const char *series, const char *name,
			 struct ck_error *err)
{
	struct rebuild b = { .st = st, .txn = txn, .err = err };
	char *path = ck_packmap_path(st->path, series, name);

	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	if (ck_pack_ready(st) && access(path, F_OK) == 0) {
		apply_packmap(&b, path, 0);
		apply_packmap(&b, path, 1);
	}
	free(path);
	free(b.scan.v);
	return b.first_rc < 0 ? b.first_rc : b.applied;
}
