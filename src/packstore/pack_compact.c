/* Compaction: committed file versions move into packs as chunks, newest
 * to oldest within a series, each changed chunk stored self-contained or
 * as a reverse delta against the same chunk of the next newer version,
 * whichever is smaller, with no chain longer than the anchor interval.
 *
 * One checkpoint at a time, under STORE/commit.lock and the index lock:
 * records appended, the pack fdatasynced, the checkpoint's packmap written
 * durably, then one index transaction (chunk locations, file maps, the
 * pack's durable end).  A crash anywhere leaves records nothing refers to,
 * or a packmap that recovery applies; never a map whose chunks are lost.
 * Raw files of packed versions go (keep_raw) only after that transaction. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/clock.h"
#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "ckptfs/pack.h"
#include "store/journal.h"
#include "store/manifest.h"
#include "pack_layout.h"
#include "compact_int.h"
#include "packstore_int.h"
#include "store/staging.h"


void ck_compact_crash_point(const struct compact *c, const char *stage)
{
	char name[96];

	ck_crash_point(stage);
	snprintf(name, sizeof(name), "%s-%u", stage, c->seq + 1);
	ck_crash_point(name);
}

void ck_compact_fver_clear(struct fver *v)
{
	ck_layout_clear(&v->lay);
	ck_storage_info_free(v->s, v->ns);
	ck_tensor_info_free(v->t, v->nt);
	memset(v, 0, sizeof(*v));
}

int ck_compact_fver_load(struct ck_store *st, const struct ck_file_info *f, struct fver *v)
{
	int rc;

	memset(v, 0, sizeof(*v));
	v->f = f;
	rc = ck_store_list_storages(st, f->id, &v->s, &v->ns);
	if (rc == 0)
		rc = ck_store_list_tensors(st, f->id, &v->t, &v->nt);
	if (rc == 0)
		rc = ck_layout_build(&v->lay, f->size, v->s, v->ns, v->t, v->nt);
	if (rc < 0)
		ck_compact_fver_clear(v);
	return rc;
}

void ck_compact_refs_clear(struct refs *r)
{
	for (size_t i = 0; i < r->n; i++) {
		ck_fmap_clear(&r->m[i]);
		ck_compact_fver_clear(&r->v[i]);
	}
	r->n = 0;
}

static int open_writer(struct compact *c, uint64_t durable_end)
{
	struct ck_error why = { { 0 } };
	struct ck_pack_open_info info;
	char *path = ck_pack_path(c->st->path, c->pack_id);
	int rc;

	if (!path)
		return ck_fail(c->err, ENOMEM, "out of memory");
	rc = ck_pack_writer_open(path, durable_end, &c->w, &info, &why);
	if (rc < 0)
		ck_fail(c->err, -rc, "%s: %s", path, why.msg);
	free(path);
	if (rc == 0 && info.version < CK_PACK_VERSION) {
		/* records of this version must not go into an older pack, whose
		 * readers would not know them: the next pack takes them */
		ck_pack_writer_close(c->w);
		c->w = NULL;
		c->pack_id++;
		return open_writer(c, 0);
	}
	return rc;
}

/* The pack being appended to and the end of its last committed record, as
 * the index has them: 0 or -errno with c->err. */
static int pack_position(struct compact *c, uint64_t *cur, uint64_t *end)
{
	MDB_txn *txn;
	int rc = ck_mdb_errno(mdb_txn_begin(c->st->env, NULL, MDB_RDONLY, &txn));

	*cur = *end = 0;
	if (rc == 0) {
		rc = ck_meta_get_u64(txn, c->st, CK_META_PACK_CUR, cur);
		if (rc == 0)
			rc = ck_meta_get_u64(txn, c->st, CK_META_PACK_END, end);
		mdb_txn_abort(txn);
	}
	if (rc < 0 || *cur > UINT32_MAX)
		return ck_fail(c->err, rc < 0 ? -rc : EIO, "%s: index: cannot read the pack position", c->st->path);
	return 0;
}

static int start_packs(struct compact *c)
{
	char *dir = ck_path_join(c->st->path, CK_PACKS_DIR);
	uint64_t cur, end;
	int rc;

	if (!dir)
		return ck_fail(c->err, ENOMEM, "out of memory");
	rc = ck_mkdir_durable(dir);
	if (rc < 0)
		ck_fail(c->err, -rc, "%s: %s", dir, strerror(-rc));
	free(dir);
	if (rc < 0)
		return rc;
	rc = pack_position(c, &cur, &end);
	if (rc < 0)
		return rc;
	c->pack_id = (uint32_t)cur;
	return open_writer(c, end);
}

int ck_compact_maybe_rotate(struct compact *c)
{
	int rc;

	if (ck_pack_writer_end(c->w) < CK_PACK_ROTATE_BYTES)
		return 0;
	rc = ck_pack_sync(c->w);
	if (rc < 0)
		return ck_fail(c->err, -rc, "pack %u: sync: %s", c->pack_id, strerror(-rc));
	ck_pack_writer_close(c->w);
	c->w = NULL;
	c->pack_id++;
	return open_writer(c, 0);
}

int ck_compact_pick_ref(const struct refs *r, const struct ck_layout_chunk *lc, struct ck_hash128 h,
			struct ck_hash128 *ref)
{
	for (size_t i = 0; r && lc->ident && i < r->n; i++) {
		long j = ck_layout_find(&r->v[i].lay, lc->ident, lc->index);

		if (j < 0 || (size_t)j >= r->m[i].nchunks || r->m[i].chunks[j].len != lc->len)
			continue;
		if (ck_hash128_eq(r->m[i].chunks[j].hash, h))
			return 0;
		*ref = r->m[i].chunks[j].hash;
		return 1;
	}
	return 0;
}

int ck_compact_pack_chunk(struct compact *c, MDB_txn *txn, struct ck_hash128 h, const struct ck_layout_chunk *lc,
			  uint32_t tail, const struct refs *refs, struct ck_fmap *map)
{
	struct ck_chunk_loc loc = { .where = CK_CHUNK_PACKED, .tail = tail };
	const uint8_t *payload, *ref = NULL;
	struct ck_chunk_desc desc;
	struct ck_hash128 refh;
	uint32_t ref_len = 0;
	uint64_t off, stored;
	int rc;

	if (ck_compact_pick_ref(refs, lc, h, &refh)) {
		unsigned depth;
		int meets;

		/* The longest chain through this chunk: its reference's, itself,
		 * and the deltas already resting on it. */
		rc = ck_chunk_depth(txn, c->st, refh, h, &depth, &meets);
		if (rc == 0 && !meets && depth + 1 + tail <= c->k &&
		    (ck_chunk_cache_copy(c->recent, refh, c->dec.out, &ref_len) ||
		     /* the reference may sit in records not written out yet */
		     (c->w && ck_pack_flush(c->w) == 0 &&
		      ck_chunk_resolve(txn, c->st, &c->fds, &c->dec, c->recent, 0, refh, c->dec.out, &ref_len, NULL,
				      NULL) == 0)))
			ref = c->dec.out;
	}
	rc = ck_chunk_encode(c->enc, c->raw, lc->len, lc->elem, ref, ref_len, &desc, &payload);
	if (rc == 0 && c->dry)
		goto count;
	if (rc == 0)
		rc = ck_compact_maybe_rotate(c);
	if (rc == 0)
		rc = ck_pack_append(c->w, &desc, payload, &off);
	if (rc < 0)
		return ck_fail(c->err, -rc, "pack %u: cannot append a record: %s", c->pack_id, strerror(-rc));
	ck_compact_crash_point(c, "compact-append");
	loc.codec = desc.codec;
	loc.elem = desc.elem_size;
	loc.raw_len = desc.raw_len;
	loc.pack_id = c->pack_id;
	loc.offset = off;
	loc.enc_len = desc.enc_len;
	if (ck_codec_needs_ref(desc.codec))
		loc.ref = desc.ref_hash;
	rc = ck_chunk_store(txn, c->st, h, &loc);
	if (rc == 0 && ck_codec_needs_ref(desc.codec))
		rc = ck_chunk_raise_tails(txn, c->st, loc.ref, tail + 1);
	if (rc < 0)
		return ck_fail(c->err, -rc, "index: %s", strerror(-rc));
count:
	if (ck_codec_needs_ref(desc.codec)) {
		c->s.delta_chunks++;
		c->s.delta_bytes += lc->len;
		map->delta_bytes += lc->len;
	} else {
		c->s.plain_chunks++;
		c->s.plain_bytes += lc->len;
		map->plain_bytes += lc->len;
	}
	stored = ck_pack_rec_header_len(&desc) + desc.enc_len;
	c->s.stored_bytes += stored;
	map->stored_bytes += stored;
	return 0;
}

/* Chunk i of v: read, check, hash, and located (raw map) or stored (pack). */
static int map_chunk(struct compact *c, MDB_txn *txn, int fd, struct fver *v, size_t i, XXH3_state_t *xs,
		     int pack, const struct refs *refs, struct ck_fmap *map)
{
	const struct ck_layout_chunk *lc = &v->lay.c[i];
	struct ck_chunk_loc loc = { 0 };
	struct ck_hash128 h;
	int rc;

	for (size_t at = 0; at < lc->len;) {
		ssize_t got = pread(fd, c->raw + at, lc->len - at, (off_t)(lc->off + at));

		if (got <= 0)
			return ck_fail(c->err, got < 0 ? errno : EIO, "%s: read at %" PRIu64 ": %s", v->f->src_path,
				       lc->off + at, got < 0 ? strerror(errno) : "the file ends first");
		at += (size_t)got;
	}
	if (lc->key) {
		/* The storage's recorded hash vouches for the bytes packed. */
		if (lc->index == 0)
			XXH3_128bits_reset(xs);
		XXH3_128bits_update(xs, c->raw, lc->len);
		if (i + 1 == v->lay.n || v->lay.c[i + 1].index == 0 || v->lay.c[i + 1].key != lc->key) {
			XXH128_hash_t d = XXH3_128bits_digest(xs);

			if (d.low64 != lc->storage->hash_lo || d.high64 != lc->storage->hash_hi)
				return ck_fail(c->err, EIO, "%s: storage %s does not hash as recorded (damaged)",
					       v->f->src_path, lc->key);
		}
	}
	h = ck_chunk_hash(c->raw, lc->len);
	map->chunks[i] = (struct ck_fmap_chunk){ .hash = h, .len = lc->len, .elem = lc->elem };
	/* Every chunk, headers included (each has an ident): the next older
	 * version's references. */
	ck_chunk_cache_insert(c->recent, h, c->raw, lc->len);
	rc = ck_chunk_lookup(txn, c->st, h, &loc);
	if (rc < 0 && rc != -ENOENT)
		return ck_fail(c->err, -rc, "index: chunk table: %s", strerror(-rc));
	if (!pack) {
		uint32_t tail = rc == 0 ? loc.tail : 0;
		int keep = rc == 0 && (loc.where == CK_CHUNK_PACKED || loc.file_id == v->f->id);

		/* A chunk raw in an older version moves to this newest one, so that
		 * packing the older one finds it here (dedup: frozen layers are
		 * never stored again). */
		ck_chunk_loc_clear(&loc);
		if (keep)
			return 0;
		loc = (struct ck_chunk_loc){ .where = CK_CHUNK_RAW, .codec = CK_CODEC_RAW, .elem = lc->elem,
					     .raw_len = lc->len, .tail = tail, .offset = lc->off, .file_id = v->f->id,
					     .path = (char *)v->f->src_path };
		rc = ck_chunk_store(txn, c->st, h, &loc);
		return rc < 0 ? ck_fail(c->err, -rc, "index: %s", strerror(-rc)) : 0;
	}
	return ck_compact_store_chunk(c, txn, v, h, lc, rc, &loc, refs, map);
}

int ck_compact_store_chunk(struct compact *c, MDB_txn *txn, const struct fver *v, struct ck_hash128 h,
			   const struct ck_layout_chunk *lc, int found, struct ck_chunk_loc *loc,
			   const struct refs *refs, struct ck_fmap *map)
{
	int rc;

	if (found == 0 && (loc->where == CK_CHUNK_PACKED || loc->file_id != v->f->id)) {
		/* Stored already (or raw in a newer file): costs nothing. */
		ck_chunk_loc_clear(loc);
		c->s.dedup_chunks++;
		c->s.dedup_bytes += lc->len;
		map->dedup_bytes += lc->len;
		return 0;
	}
	rc = ck_compact_pack_chunk(c, txn, h, lc, found == 0 ? loc->tail : 0, refs, map);
	ck_chunk_loc_clear(loc);
	return rc;
}

/* Maps (pack 0) or packs (pack 1) one file version inside txn. */
static int map_file(struct compact *c, MDB_txn *txn, struct fver *v, int pack, const struct refs *refs,
		    struct ck_fmap *map)
{
	struct ck_error why = { { 0 } };
	XXH3_state_t *xs = NULL;
	int fd = -1, rc;

	memset(map, 0, sizeof(*map));
	map->flags = pack ? CK_FMAP_PACKED : 0;
	map->size = v->f->size;
	map->nchunks = (uint32_t)v->lay.n;
	map->chunks = calloc(v->lay.n ? v->lay.n : 1, sizeof(*map->chunks));
	xs = XXH3_createState();
	if (!map->chunks || !xs) {
		rc = ck_fail(c->err, ENOMEM, "out of memory");
		goto out;
	}
	/* Under the commit lock, in a transaction: a copied file is accepted
	 * here, its new identity recorded by the next reader (the packmap
	 * keeps the identity its manifest has until then). */
	{
		struct ck_file_info now = *v->f;

		rc = ck_store_file_check(c->st, &now, 0, &why);
	}
	if (rc < 0) {
		ck_fail(c->err, -rc, "%s", why.msg);
		goto out;
	}
	fd = open(v->f->src_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = ck_fail(c->err, errno, "%s: %s", v->f->src_path, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < v->lay.n && rc == 0; i++)
		rc = map_chunk(c, txn, fd, v, i, xs, pack, refs, map);
	if (rc == 0 && !pack)
		map->stored_bytes = v->f->size;
out:
	if (fd >= 0)
		close(fd);
	XXH3_freeState(xs);
	if (rc < 0)
		ck_fmap_clear(map);
	return rc;
}

int ck_compact_put_fmap(MDB_txn *txn, struct ck_store *st, uint64_t file_id, const struct ck_fmap *m)
{
	struct ck_buf b = CK_BUF_INIT;
	uint8_t key[8];
	MDB_val k = { 8, key }, v;
	int rc = ck_fmap_put(&b, m);

	ck_key_id(key, file_id);
	if (rc == 0) {
		v.mv_size = b.len;
		v.mv_data = b.data;
		rc = ck_mdb_errno(mdb_put(txn, st->fmaps, &k, &v, 0));
	}
	ck_buf_free(&b);
	return rc;
}

/* The packmap of a checkpoint: every file's map as txn holds it now. */
static int write_packmap(struct compact *c, MDB_txn *txn, const struct ck_ckpt_info *ck,
			 const struct ck_file_info *f, size_t nf)
{
	struct ck_packmap pm = { 0 };
	char *path = ck_packmap_path(c->st->path, ck->series, ck->name);
	int rc = 0;

	pm.series = ck->series;   /* borrowed, as the relpaths below */
	pm.ckpt = ck->name;
	pm.files = calloc(nf ? nf : 1, sizeof(*pm.files));
	if (!path || !pm.files) {
		rc = ck_fail(c->err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nf && rc == 0; i++) {
		struct ck_packmap_file *pf = &pm.files[pm.nfiles];

		rc = ck_fmap_lookup(txn, c->st, f[i].id, &pf->map);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		pf->relpath = f[i].relpath;   /* borrowed */
		pf->dev = f[i].dev;
		pf->ino = f[i].ino;
		pf->size = f[i].size;
		pf->mtime_ns = f[i].mtime_ns;
		if (rc == 0)
			pm.nfiles++;
	}
	if (rc < 0)
		ck_fail(c->err, -rc, "index: file maps: %s", strerror(-rc));
	else
		rc = ck_packmap_store(path, &pm, c->err);
out:
	for (size_t i = 0; i < pm.nfiles; i++)
		ck_fmap_clear(&pm.files[i].map);
	free(pm.files);
	free(path);
	return rc;
}

int ck_compact_files_of(struct ck_store *st, const struct ck_ckpt_info *ck, struct ck_file_info **f, size_t *n)
{
	*f = NULL;
	*n = 0;
	return ck ? ck_store_list_files(st, ck->id, f, n) : 0;
}

int ck_compact_job_begin(struct compact *c, const struct ck_ckpt_info *ck, const struct ck_ckpt_info *const *refs,
			 size_t nrefs, struct ckpt_job *j)
{
	uint64_t bytes = 0;
	int rc;

	memset(j, 0, sizeof(*j));
	rc = ck_compact_files_of(c->st, ck, &j->f, &j->n);
	for (; j->nrefs < nrefs && j->nrefs < NEWER_MAX && rc == 0; j->nrefs++)
		rc = ck_compact_files_of(c->st, refs[j->nrefs], &j->rf[j->nrefs], &j->rn[j->nrefs]);
	if (rc < 0)
		return ck_fail(c->err, -rc, "%s/%s: cannot list files: %s", ck->series, ck->name, strerror(-rc));
	rc = ck_mdb_errno(mdb_txn_begin(c->st->env, NULL, c->dry ? MDB_RDONLY : 0, &j->txn));
	if (rc < 0) {
		j->txn = NULL;
		return ck_fail(c->err, -rc, "index: %s", strerror(-rc));
	}
	for (size_t i = 0; i < j->n; i++)
		bytes += j->f[i].size;
	ck_chunk_cache_grow(c->recent, bytes < RECENT_CACHE_MAX / 2 ? 2 * bytes : RECENT_CACHE_MAX);
	return 0;
}

void ck_compact_job_end(struct ckpt_job *j)
{
	if (j->txn)
		mdb_txn_abort(j->txn);
	j->txn = NULL;
	ck_file_info_free(j->f, j->n);
	for (size_t k = 0; k < NEWER_MAX; k++)
		ck_file_info_free(j->rf[k], j->rn[k]);
	memset(j, 0, sizeof(*j));
}

static const struct ck_file_info *same_path(const struct ck_file_info *f, size_t n, const char *relpath)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(f[i].relpath, relpath) == 0)
			return &f[i];
	return NULL;
}

void ck_compact_refs_load(struct compact *c, MDB_txn *txn, struct ck_file_info *const *nf, const size_t *nn,
			  size_t nother, const char *relpath, struct refs *r)
{
	r->n = 0;
	for (size_t k = 0; k < nother && r->n < NEWER_MAX; k++) {
		const struct ck_file_info *g = same_path(nf[k], nn[k], relpath);

		if (!g || !ck_file_kind_has_bytes(g->kind) || ck_compact_fver_load(c->st, g, &r->v[r->n]) < 0)
			continue;
		if (ck_fmap_lookup(txn, c->st, g->id, &r->m[r->n]) == 0 && r->m[r->n].nchunks == r->v[r->n].lay.n &&
		    ck_layout_index(&r->v[r->n].lay) == 0) {
			r->n++;
			continue;
		}
		ck_fmap_clear(&r->m[r->n]);
		ck_compact_fver_clear(&r->v[r->n]);
	}
}

/* Maps (pack 0) or packs (pack 1) the files of ck not done yet, with the
 * files of the newer checkpoints (nearest first) as delta references.  The
 * caller holds the locks. */
static int do_checkpoint(struct compact *c, const struct ck_ckpt_info *ck, const struct ck_ckpt_info *newer,
			 size_t nnewer, int pack)
{
	const struct ck_ckpt_info *refs[NEWER_MAX];
	struct ckpt_job j;
	size_t changed = 0;
	int rc;

	for (size_t k = 0; k < nnewer && k < NEWER_MAX; k++)
		refs[k] = &newer[k];
	rc = ck_compact_job_begin(c, ck, refs, nnewer < NEWER_MAX ? nnewer : NEWER_MAX, &j);
	for (size_t i = 0; i < j.n && rc == 0 && !(c->o->stop && *c->o->stop); i++) {
		const struct ck_file_info *f = &j.f[i];
		struct refs r = { .n = 0 };
		struct ck_fmap old, map;
		struct fver v;

		if (!ck_file_kind_has_bytes(f->kind))
			continue;
		rc = ck_fmap_lookup(j.txn, c->st, f->id, &old);
		if (rc == 0) {
			int done = (old.flags & CK_FMAP_PACKED) || !pack;

			ck_fmap_clear(&old);
			if (done)
				continue;
		} else if (rc != -ENOENT) {
			rc = ck_fail(c->err, -rc, "index: file map: %s", strerror(-rc));
			break;
		}
		rc = ck_compact_fver_load(c->st, f, &v);
		if (rc < 0) {
			rc = ck_fail(c->err, -rc, "%s: %s", f->src_path, strerror(-rc));
			break;
		}
		if (pack)
			ck_compact_refs_load(c, j.txn, j.rf, j.rn, j.nrefs, f->relpath, &r);
		rc = map_file(c, j.txn, &v, pack, &r, &map);
		if (rc == 0) {
			rc = ck_compact_put_fmap(j.txn, c->st, f->id, &map);
			if (rc < 0)
				ck_fail(c->err, -rc, "index: %s", strerror(-rc));
			if (pack) {
				c->s.files++;
				c->s.logical_bytes += f->size;
				c->s.chunks += map.nchunks;
			}
			ck_fmap_clear(&map);
			changed++;
		}
		ck_compact_refs_clear(&r);
		ck_compact_fver_clear(&v);
		if (rc == 0 && pack && c->progress)
			c->progress(c->pctx, ck->series, ck->name, f->relpath, &c->s);
	}
	if (rc == 0 && changed) {
		rc = ck_compact_commit(c, j.txn, ck, j.f, j.n, "compact", NULL, NULL);
		j.txn = NULL;
	}
	ck_compact_job_end(&j);
	return rc;
}

/* The journal entry of one checkpoint done: its packmap, the pack ranges
 * its records went to (from where the writer stood when the locks were
 * taken to where it is now) and the pack position. */
static int journal(struct compact *c, const struct ck_ckpt_info *ck, uint64_t *seq)
{
	struct ck_journal_entry e = { .has_pos = 1, .pack_cur = c->pack_id,
				      .pack_end = c->w ? ck_pack_writer_end(c->w) : CK_PACK_HEADER };
	struct ck_journal_scan scans[8];
	uint32_t start_pack = c->start_pack;
	int rc;

	if (c->w && c->pack_id >= start_pack && c->pack_id - start_pack < 8) {
		for (uint32_t p = start_pack; p <= c->pack_id; p++)
			scans[e.nscans++] = (struct ck_journal_scan){
				.pack = p, .from = p == start_pack ? c->start_end : CK_PACK_HEADER,
				.to = p == c->pack_id ? e.pack_end : UINT64_MAX };
		if (e.nscans == 1 && scans[0].from >= scans[0].to)
			e.nscans = 0;   /* nothing appended (raw maps only) */
	}
	e.scans = scans;
	rc = ck_journal_note_ckpt(c->st, ck->series, ck->name, &e, seq, c->err);
	if (rc == 0)
		c->last_journaled = ck_monotonic_s();
	return rc;
}

int ck_compact_commit(struct compact *c, MDB_txn *txn, const struct ck_ckpt_info *ck, const struct ck_file_info *f,
		      size_t n, const char *prefix, int (*before_packmap)(struct compact *, MDB_txn *, void *),
		      void *arg)
{
	char stage[32];
	uint64_t seq;
	int rc = ck_pack_sync(c->w);

	if (rc < 0) {
		ck_fail(c->err, -rc, "pack %u: sync: %s", c->pack_id, strerror(-rc));
		goto fail;
	}
	snprintf(stage, sizeof(stage), "%s-synced", prefix);
	ck_compact_crash_point(c, stage);
	if (before_packmap && (rc = before_packmap(c, txn, arg)) < 0)
		goto fail;
	rc = write_packmap(c, txn, ck, f, n);
	if (rc < 0)
		goto fail;
	snprintf(stage, sizeof(stage), "%s-packmap", prefix);
	ck_compact_crash_point(c, stage);
	/* Every other index learns of the packmap and the new records from the
	 * journal, before this one commits them. */
	rc = journal(c, ck, &seq);   /* c->err says why */
	if (rc < 0)
		goto fail;
	rc = ck_journal_mark_own(txn, c->st, seq);
	if (rc == 0)
		rc = ck_meta_put_u64(txn, c->st, CK_META_PACK_CUR, c->pack_id);
	if (rc == 0)
		rc = ck_meta_put_u64(txn, c->st, CK_META_PACK_END, ck_pack_writer_end(c->w));
	if (rc < 0) {
		ck_fail(c->err, -rc, "index: %s", strerror(-rc));
		goto fail;
	}
	rc = ck_mdb_errno(mdb_txn_commit(txn));
	if (rc < 0)
		return ck_fail(c->err, -rc, "index: commit: %s", strerror(-rc));
	snprintf(stage, sizeof(stage), "%s-committed", prefix);
	ck_compact_crash_point(c, stage);
	c->seq++;
	return 0;
fail:
	mdb_txn_abort(txn);
	return rc;
}

/* A sweep (ckptctl gc, pack_gc.c) may have moved the pack position to a
 * new pack, and emptied the one this compaction had open, while it waited
 * for the locks: append where the index says from then on. */
static int follow_pack_position(struct compact *c)
{
	uint64_t cur, end;
	int rc = pack_position(c, &cur, &end);

	if (rc < 0)
		return rc;
	/* Unchanged unless a compaction elsewhere (another node, before this
	 * one held the lease) or a sweep appended meanwhile. */
	if (cur == c->pack_id && c->w && end == ck_pack_writer_end(c->w))
		return 0;
	ck_pack_writer_close(c->w);
	c->w = NULL;
	c->pack_id = (uint32_t)cur;
	return open_writer(c, end);
}

int ck_compact_locked(struct compact *c, int (*fn)(struct compact *, void *), void *arg)
{
	int commit_fd, index_fd, rc;

	if (c->dry)
		return fn(c, arg);   /* writes nothing, on a store that may be read-only */
	rc = ck_store_commit_lock(c->st, &commit_fd, c->err);
	if (rc < 0)
		return rc;
	/* What other nodes committed, deleted or collected. */
	rc = ck_store_follow(c->st, NULL, c->err);
	if (rc == 0)
		rc = ck_store_lock(c->st, 0, &index_fd, c->err);
	if (rc == 0) {
		rc = ck_store_index_current(c->st, c->err);
		if (rc == 0)
			rc = follow_pack_position(c);
		if (rc == 0) {
			c->start_pack = c->pack_id;
			c->start_end = c->w ? ck_pack_writer_end(c->w) : CK_PACK_HEADER;
			rc = fn(c, arg);
		}
		ck_store_unlock(index_fd);
	}
	ck_store_unlock(commit_fd);
	return rc;
}

struct exact_job {
	const struct ck_ckpt_info *ck, *newer;
	size_t nnewer;
	int pack;
};

static int exact_job(struct compact *c, void *arg)
{
	const struct exact_job *j = arg;

	return do_checkpoint(c, j->ck, j->newer, j->nnewer, j->pack);
}

/* Under the commit and index locks, as a commit: one checkpoint. */
static int locked_checkpoint(struct compact *c, const struct ck_ckpt_info *ck, const struct ck_ckpt_info *newer,
			     size_t nnewer, int pack)
{
	struct exact_job j = { ck, newer, nnewer, pack };

	return ck_compact_locked(c, exact_job, &j);
}

/* Whether path lies under STORE/data/ (the store owns it). */
static int store_owned(const struct ck_store *st, const char *path)
{
	size_t n = strlen(st->path);

	return strncmp(path, st->path, n) == 0 && strncmp(path + n, "/" CK_STORE_DATA_DIR "/",
							  sizeof(CK_STORE_DATA_DIR) + 1) == 0;
}

/* Removes the store-owned raw files of ck's packed versions. */
static void drop_raw(struct compact *c, const struct ck_ckpt_info *ck)
{
	struct ck_file_info *f;
	size_t n;

	if (ck_store_list_files(c->st, ck->id, &f, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct stat sb;

		if (!store_owned(c->st, f[i].src_path) || ck_store_file_packed(c->st, f[i].id) != 1 ||
		    lstat(f[i].src_path, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		if (unlink(f[i].src_path) < 0) {
			ck_warn("%s: cannot remove the raw file of a packed version: %s", f[i].src_path,
				strerror(errno));
			continue;
		}
		c->s.raw_removed_bytes += (uint64_t)sb.st_size;
		ck_fsync_parent(f[i].src_path);
	}
	ck_file_info_free(f, n);
}

void ck_compact_note_failure(struct compact *c, const struct ck_ckpt_info *ck, int rc)
{
	ck_warn("compact %s/%s: %s", ck->series, ck->name, c->err ? c->err->msg : strerror(-rc));
	if (!c->first_rc)
		c->first_rc = rc;
}

/* The lossy policy compaction applies to series: 1 and *p, or 0. */
static int series_policy(struct compact *c, const char *series, struct ck_lossy_policy *p)
{
	struct ck_error why = { { 0 } };
	int rc;

	if (c->o->no_lossy)
		return 0;
	if (c->o->lossy) {
		*p = *c->o->lossy;
		return 1;
	}
	rc = ck_lossy_policy_get(c->st->path, series, p, &why);
	if (rc == 0)
		return 1;
	if (rc != -ENOENT)
		ck_warn("%s: lossy policy of %s not applied: %s", c->st->path, series, why.msg);
	return 0;
}

/* Phase 1 packs the series (and codes it lossily); phase 2 removes raw
 * files (keep_raw). */
static int compact_series(struct compact *c, const char *series, int phase)
{
	struct ck_ckpt_info *ck;
	struct ck_lossy_policy policy;
	unsigned char *lossy = NULL;
	size_t n, newest = 0, live = 0;
	int rc;

	rc = ck_store_list_checkpoints(c->st, series, &ck, &n);
	if (rc < 0)
		return ck_fail(c->err, -rc, "%s: cannot list checkpoints: %s", series, strerror(-rc));
	for (size_t i = 0; i < n; i++)
		if (!ck[i].deleted)
			newest = i, live++;
	if (live == 0)
		goto out;
	if (phase == 2)
		goto drop;
	if (series_policy(c, series, &policy)) {
		lossy = calloc(n, 1);
		if (!lossy) {
			rc = ck_fail(c->err, ENOMEM, "out of memory");
			goto out;
		}
		rc = ck_compact_lossy_plan(c, ck, n, &policy, lossy);
		if (rc < 0)
			goto out;
	}
	if (c->dry)
		goto lossy_pass;
	/* The newest stays raw: its chunks are mapped as raw locations, the
	 * references of the reverse deltas and sources of dedup. */
	rc = locked_checkpoint(c, &ck[newest], NULL, 0, 0);
	if (rc < 0)
		ck_compact_note_failure(c, &ck[newest], rc);
	/* Checkpoints to be coded lossily are left to that pass: packed
	 * exactly first, they would be coded twice. */
	for (size_t i = n; i-- > 0 && !(c->o->stop && *c->o->stop);) {
		if (i == newest || (lossy && lossy[i]))
			continue;
		rc = locked_checkpoint(c, &ck[i], &ck[i + 1], n - i - 1, 1);
		if (rc < 0)
			ck_compact_note_failure(c, &ck[i], rc);
	}
lossy_pass:
	if (lossy)
		ck_compact_lossy_series(c, ck, n, &policy, lossy);
	rc = 0;
	goto out;
drop:
	if (c->o->keep_raw && !c->dry) {
		size_t kept = 0;

		for (size_t i = n; i-- > 0;) {
			if (ck[i].deleted || kept++ < c->o->keep_raw)
				continue;
			drop_raw(c, &ck[i]);
		}
	}
	rc = 0;
out:
	free(lossy);
	ck_ckpt_info_free(ck, n);
	return rc;
}

/* Raw files of versions just packed go only once every node's readers
 * had the time to learn that they are packed (their next refresh). */
static void wait_reclaim_delay(struct compact *c)
{
	int delay = c->o->reclaim_delay ? c->o->reclaim_delay : ck_store_is_shared(c->st, NULL, NULL) ?
		    CK_SHARED_RECLAIM_DELAY : 0;

	while (delay > 0 && c->last_journaled && ck_monotonic_s() < c->last_journaled + delay &&
	       !(c->o->stop && *c->o->stop))
		usleep(100000);
}

int ck_store_compact(struct ck_store *st, const struct ck_compact_opts *opts, ck_compact_progress_fn progress,
		     void *ctx, struct ck_compact_stats *stats, struct ck_error *err)
{
	static const struct ck_compact_opts defaults;
	struct ck_chunk_opts copts = { 0 };
	struct compact c = { .st = st, .o = opts ? opts : &defaults, .progress = progress, .pctx = ctx, .err = err };
	char **series = NULL;
	size_t ns = 0;
	double t0 = ck_monotonic_s();
	int lease = -1, rc;

	c.dry = c.o->dry_run;
	if (st->readonly && !c.dry)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	if (!ck_pack_ready(st))
		return ck_fail(err, EIO, "%s: index lacks the packed store's databases", st->path);
	c.k = c.o->anchor_k ? c.o->anchor_k : CK_PACK_DEFAULT_ANCHOR_K;
	if (c.k > CK_PACK_MAX_CHAIN)
		return ck_fail(err, EINVAL, "anchor interval %u: at most %d", c.k, CK_PACK_MAX_CHAIN);
	/* One compaction or gc in the store at a time, whichever node runs it
	 * (a dry run writes nothing and takes no lease). */
	if (!c.dry) {
		rc = ck_store_maintenance_lock(st, &lease, err);
		if (rc < 0)
			return rc;
	}
	copts.level = c.o->level;
	ck_pack_fds_init(&c.fds);
	c.raw = malloc(CK_CHUNK_MAX);
	if (!c.raw || ck_decoder_init(&c.dec) < 0 || ck_chunk_cache_new_fifo(RECENT_CACHE_MIN, &c.recent) < 0) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ck_chunk_ctx_new(&copts, &c.enc);
	if (rc < 0) {
		ck_fail(err, -rc, "zstd level %d: %s", copts.level, strerror(-rc));
		goto out;
	}
	rc = c.dry ? 0 : start_packs(&c);
	if (rc < 0)
		goto out;
	if (c.o->series) {
		series = calloc(1, sizeof(*series));
		if (series && (series[0] = strdup(c.o->series)) != NULL)
			ns = 1;
		else
			rc = ck_fail(err, ENOMEM, "out of memory");
		if (!ns) {
			free(series);
			series = NULL;
		}
	} else {
		rc = ck_store_list_series(st, &series, &ns);
		if (rc < 0)
			ck_fail(err, -rc, "cannot list series: %s", strerror(-rc));
	}
	for (size_t i = 0; i < ns && rc == 0 && !(c.o->stop && *c.o->stop); i++)
		rc = compact_series(&c, series[i], 1);
	if (c.o->keep_raw && !c.dry && rc == 0) {
		wait_reclaim_delay(&c);
		for (size_t i = 0; i < ns && rc == 0 && !(c.o->stop && *c.o->stop); i++)
			rc = compact_series(&c, series[i], 2);
	}
	if (rc == 0 && c.first_rc)
		rc = c.first_rc;   /* err still says why */
out:
	ck_store_unlock(lease);
	ck_strv_free(series, ns);
	if (c.w)
		ck_pack_writer_close(c.w);
	ck_chunk_ctx_free(c.enc);
	ck_decoder_clear(&c.dec);
	ck_chunk_cache_free(c.recent);
	ck_pack_fds_close(&c.fds);
	free(c.raw);
	c.s.seconds = ck_monotonic_s() - t0;
	if (stats)
		*stats = c.s;
	return rc;
}
