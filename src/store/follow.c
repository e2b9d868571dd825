/* Following the store: bringing an index up to date with the journal
 * (journal.h; docs/design.md, "One store, many nodes").
 *
 * The manifests, tombstones, packmaps and packs on the store's filesystem
 * are the truth; an index is a cache of them that remembers the last
 * journal entry it applied.  Following is reading the entries after it
 * and, for each, making the index agree with the files the entry names:
 *
 *   - a checkpoint: its manifest as it is now (gone: the checkpoint is
 *     removed; the same import: files it no longer lists are dropped and
 *     changed identities or paths recorded, ids kept; another import: the
 *     records are replaced), its tombstone (deleted or not) and its
 *     packmap (file maps applied);
 *   - pack ranges with new records: scanned, their chunks located there;
 *   - packs gc emptied: chunk locations in them dropped;
 *   - the pack position compaction appends at.
 *
 * Applying an entry twice changes nothing, so two processes of a node
 * following at once, or a writer's own entry read back, are harmless.
 *
 * On a shared filesystem one client may see a file a moment before
 * another's cached name of it is dropped.  Each entry carries a tag of the
 * files as their writer left them: an entry whose files do not show those
 * tags yet waits for the next follow, unless a later entry names the same
 * checkpoint (it supersedes this one) or it is older than STALE_NS (its
 * writer's files were replaced since: whatever is there now is applied). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "ckptfs/pack.h"
#include "chunk_table.h"
#include "commit.h"
#include "delete.h"
#include "journal.h"
#include "manifest.h"

#define BATCH 1024                          /* entries read per follow */
#define STALE_NS (30LL * 1000000000)

/* ---- packs ---- */

struct range_scan {
	struct ck_store *st;
	MDB_txn *txn;
	uint32_t pack;
};

static int on_record(void *cb, uint64_t off, const struct ck_chunk_desc *d, const uint8_t *payload)
{
	struct range_scan *r = cb;
	struct ck_chunk_loc have = { 0 };
	struct ck_chunk_loc l = { .where = CK_CHUNK_PACKED, .codec = d->codec, .elem = d->elem_size,
				  .raw_len = d->raw_len, .pack_id = r->pack, .offset = off, .enc_len = d->enc_len };
	int rc;

	(void)payload;
	if (ck_codec_needs_ref(d->codec))
		l.ref = d->ref_hash;
	rc = ck_chunk_lookup(r->txn, r->st, d->raw_hash, &have);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (rc == 0) {
		/* A self-contained copy elsewhere beats a delta; the tail stays. */
		int keep = have.where == CK_CHUNK_PACKED && !ck_codec_needs_ref(have.codec) &&
			   ck_codec_needs_ref(d->codec);

		l.tail = have.tail;
		ck_chunk_loc_clear(&have);
		if (keep)
			return 0;
	}
	return ck_chunk_store(r->txn, r->st, d->raw_hash, &l);
}

static int scan_range(struct ck_store *st, MDB_txn *txn, const struct ck_journal_scan *s)
{
	struct range_scan r = { .st = st, .txn = txn, .pack = s->pack };
	uint64_t end;
	int fd = ck_pack_open(st->path, s->pack), rc;

	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;   /* emptied or gone since: a later entry says where */
	rc = ck_pack_scan_headers(fd, s->from, s->to, on_record, &r, &end, NULL);
	close(fd);
	/* A range cut short (a torn tail, a pack emptied since) leaves what it had. */
	return rc == -ENOMEM ? rc : 0;
}

/* Every chunk location in pack id goes: gc moved what lived there. */
static int drop_pack(struct ck_store *st, MDB_txn *txn, uint32_t id)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = ck_mdb_errno(mdb_cursor_open(txn, st->chunks, &cur));

	if (rc < 0)
		return rc;
	for (int op = MDB_FIRST; rc == 0 && mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
		struct ck_chunk_loc l;

		if (ck_chunk_loc_get(&v, &l) < 0)
			continue;
		if (l.where == CK_CHUNK_PACKED && l.pack_id == id)
			rc = ck_mdb_errno(mdb_cursor_del(cur, 0));
		ck_chunk_loc_clear(&l);
	}
	mdb_cursor_close(cur);
	return rc;
}

/* The pack position only moves forward. */
static int apply_pos(struct ck_store *st, MDB_txn *txn, uint32_t cur, uint64_t end)
{
	uint64_t have_cur, have_end;
	int rc = ck_meta_get_u64(txn, st, CK_META_PACK_CUR, &have_cur);

	if (rc == 0)
		rc = ck_meta_get_u64(txn, st, CK_META_PACK_END, &have_end);
	if (rc == 0 && (cur > have_cur || (cur == have_cur && end > have_end))) {
		rc = ck_meta_put_u64(txn, st, CK_META_PACK_CUR, cur);
		if (rc == 0)
			rc = ck_meta_put_u64(txn, st, CK_META_PACK_END, end);
	}
	return rc;
}

/* ---- checkpoints ---- */

static int drop_fmap(struct ck_store *st, MDB_txn *txn, uint64_t file_id)
{
	uint8_t key[8];
	MDB_val k = { sizeof(key), key };
	int rc;

	if (!ck_pack_ready(st))
		return 0;
	ck_key_id(key, file_id);
	rc = mdb_del(txn, st->fmaps, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
}

static int drop_checkpoint(struct ck_store *st, MDB_txn *txn, const struct ck_ckpt_info *ck)
{
	struct ck_file_info *files = NULL;
	size_t n = 0;
	int rc = ck_txn_list_files(txn, st, ck->id, &files, &n);

	for (size_t i = 0; i < n && rc == 0; i++)
		rc = drop_fmap(st, txn, files[i].id);
	ck_file_info_free(files, n);
	return rc ? rc : ck_delete_ckpt_records(txn, st, ck);
}

static const struct ck_ingest *manifest_file(const struct ck_manifest *m, const char *relpath)
{
	size_t lo = 0, hi = m->nfiles;

	while (lo < hi) {   /* manifests list files in byte order */
		size_t mid = (lo + hi) / 2;
		int c = strcmp(m->files[mid].info.relpath, relpath);

		if (c == 0)
			return &m->files[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int put_record(MDB_txn *txn, MDB_dbi dbi, const struct ck_buf *key, const struct ck_buf *val)
{
	MDB_val k = { key->len, key->data }, v = { val->len, val->data };

	return ck_mdb_errno(mdb_put(txn, dbi, &k, &v, 0));
}

/* Raw chunk locations name their file's path: those of files whose path
 * changed (relocated) follow it. */
static int move_raw_locations(struct ck_store *st, MDB_txn *txn, const uint64_t *ids, char *const *paths, size_t n)
{
	struct ck_hash128 *keys = NULL;
	size_t *which = NULL, nk = 0, cap = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if (!n || !ck_pack_ready(st))
		return 0;
	rc = ck_mdb_errno(mdb_cursor_open(txn, st->chunks, &cur));
	if (rc < 0)
		return rc;
	for (int op = MDB_FIRST; rc == 0 && mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
		const uint8_t *p = v.mv_data;
		uint64_t fid;
		size_t i;

		/* Only the where byte and the file id are needed to pick them. */
		if (v.mv_size < 56 || p[1] != CK_CHUNK_RAW || k.mv_size != 16)
			continue;
		fid = ck_le64(p + 48);
		for (i = 0; i < n && ids[i] != fid; i++)
			;
		if (i == n)
			continue;
		if (nk == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct ck_hash128 *nkeys = realloc(keys, nc * sizeof(*keys));
			size_t *nwhich = nkeys ? realloc(which, nc * sizeof(*which)) : NULL;

			if (nkeys)
				keys = nkeys;
			if (!nkeys || !nwhich) {
				rc = -ENOMEM;
				break;
			}
			which = nwhich;
			cap = nc;
		}
		keys[nk].hi = ck_be64(k.mv_data);
		keys[nk].lo = ck_be64((const uint8_t *)k.mv_data + 8);
		which[nk++] = i;
	}
	mdb_cursor_close(cur);
	for (size_t j = 0; j < nk && rc == 0; j++) {
		struct ck_chunk_loc l;

		rc = ck_chunk_lookup(txn, st, keys[j], &l);
		if (rc == 0) {
			char *was = l.path;

			l.path = paths[which[j]];
			rc = ck_chunk_store(txn, st, keys[j], &l);
			l.path = was;
			ck_chunk_loc_clear(&l);
		}
	}
	free(keys);
	free(which);
	return rc;
}

/* The same import of the checkpoint: drop the files its manifest no longer
 * lists (reclaimed), record new identities and paths (re-identified,
 * relocated) under the same ids, and the deleted flag. */
static int update_in_place(struct ck_store *st, MDB_txn *txn, const struct ck_ckpt_info *old,
			   const struct ck_manifest *m, int deleted, int *changed)
{
	struct ck_buf key = CK_BUF_INIT, val = CK_BUF_INIT;
	struct ck_file_info *files = NULL;
	uint64_t *moved_ids = NULL;
	char **moved_paths = NULL;
	size_t n = 0, nmoved = 0;
	int rc = ck_txn_list_files(txn, st, old->id, &files, &n);

	if (rc == 0) {
		moved_ids = calloc(n + 1, sizeof(*moved_ids));
		moved_paths = calloc(n + 1, sizeof(*moved_paths));
		if (!moved_ids || !moved_paths)
			rc = -ENOMEM;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct ck_ingest *mf = manifest_file(m, files[i].relpath);
		struct ck_file_info info;

		if (!mf) {
			rc = drop_fmap(st, txn, files[i].id);
			if (rc == 0)
				rc = ck_delete_file_records(txn, st, &files[i]);
			*changed = 1;
			continue;
		}
		if (mf->info.dev == files[i].dev && mf->info.ino == files[i].ino && mf->info.size == files[i].size &&
		    mf->info.mtime_ns == files[i].mtime_ns && !strcmp(mf->info.src_path, files[i].src_path))
			continue;
		if (strcmp(mf->info.src_path, files[i].src_path)) {
			moved_ids[nmoved] = files[i].id;
			moved_paths[nmoved++] = mf->info.src_path;
		}
		info = files[i];
		info.dev = mf->info.dev;
		info.ino = mf->info.ino;
		info.size = mf->info.size;
		info.mtime_ns = mf->info.mtime_ns;
		info.src_path = mf->info.src_path;
		key.len = val.len = 0;
		rc = ck_key_file(&key, old->id, files[i].relpath);
		if (rc == 0)
			rc = ck_rec_put_file(&val, st->path, &info, (uint32_t)mf->nst);
		if (rc == 0)
			rc = put_record(txn, st->files, &key, &val);
		*changed = 1;
	}
	if (rc == 0)
		rc = move_raw_locations(st, txn, moved_ids, moved_paths, nmoved);
	if (rc == 0 && (old->deleted != deleted || strcmp(old->src_path, m->ckpt.src_path))) {
		struct ck_ckpt_info c = *old;

		c.deleted = deleted;
		c.src_path = m->ckpt.src_path;
		key.len = val.len = 0;
		rc = ck_key_ckpt(&key, c.series, c.step, c.name);
		if (rc == 0)
			rc = ck_rec_put_ckpt(&val, st->path, &c, old->imported_ns);
		if (rc == 0)
			rc = put_record(txn, st->ckpts, &key, &val);
		*changed = 1;
	}
	ck_file_info_free(files, n);
	free(moved_ids);
	free(moved_paths);
	ck_buf_free(&key);
	ck_buf_free(&val);
	return rc;
}

static int put_series(struct ck_store *st, MDB_txn *txn, const struct ck_manifest *m)
{
	MDB_val k = { strlen(m->ckpt.series), m->ckpt.series }, v;
	struct ck_buf b = CK_BUF_INIT;
	int rc = mdb_get(txn, st->series, &k, &v);

	if (rc == 0 && !m->pattern)
		return 0;   /* keep the series and its stored pattern */
	if (rc && rc != MDB_NOTFOUND)
		return ck_mdb_errno(rc);
	rc = ck_rec_put_series(&b, m->pattern, m->series_created_ns);
	if (rc == 0) {
		v.mv_size = b.len;
		v.mv_data = b.data;
		rc = ck_mdb_errno(mdb_put(txn, st->series, &k, &v, 0));
	}
	ck_buf_free(&b);
	return rc;
}

static int reconcile(struct ck_store *st, MDB_txn *txn, const char *series, const char *name, int *changed,
		     struct ck_error *err)
{
	char *mpath = ck_manifest_path(st->path, series, name);
	struct ck_error why = { { 0 } };
	struct ck_ckpt_info old = { 0 };
	struct ck_manifest m = { 0 };
	int have_old, have_m, rc;

	if (!mpath)
		return -ENOMEM;
	rc = ck_manifest_load(st->path, mpath, &m, &why);
	have_m = rc == 0;
	if (rc < 0 && rc != -ENOENT) {
		/* A damaged manifest changes nothing here; reindex reports it. */
		ck_warn("%s: %s", mpath, why.msg);
		free(mpath);
		return rc == -ENOMEM ? rc : 0;
	}
	free(mpath);
	if (have_m && (strcmp(m.ckpt.series, series) || strcmp(m.ckpt.name, name))) {
		ck_warn("%s/%s: its manifest describes %s/%s: ignored", series, name, m.ckpt.series, m.ckpt.name);
		ck_manifest_clear(&m);
		return 0;
	}
	rc = ck_txn_find_checkpoint(txn, st, series, name, &old);
	have_old = rc == 0;
	if (rc < 0 && rc != -ENOENT)
		goto out;
	rc = 0;
	if (!have_m) {
		if (have_old) {
			rc = drop_checkpoint(st, txn, &old);
			*changed = 1;
		}
		goto out;
	}
	m.ckpt.deleted = ck_tombstone_applies(st->path, &m);
	if (have_old && old.imported_ns == m.imported_ns && old.step == m.ckpt.step) {
		rc = update_in_place(st, txn, &old, &m, m.ckpt.deleted, changed);
	} else {
		if (have_old)
			rc = drop_checkpoint(st, txn, &old);
		if (rc == 0)
			rc = put_series(st, txn, &m);
		if (rc == 0)
			rc = ck_commit_put(txn, st, &m.ckpt, m.files, m.nfiles, m.imported_ns);
		*changed = 1;
	}
	if (rc == 0) {
		int applied = ck_pack_rebuild_ckpt(st, txn, series, name, &why);

		if (applied < 0 && applied != -ENOMEM)
			ck_warn("%s/%s: packed state: %s", series, name, why.msg);   /* its files stay raw */
		else if (applied > 0)
			*changed = 1;
		rc = applied == -ENOMEM ? applied : 0;
	}
out:
	if (rc < 0)
		ck_fail(err, -rc, "%s/%s: %s", series, name, strerror(-rc));
	ck_ckpt_info_clear(&old);
	ck_manifest_clear(&m);
	return rc;
}

/* ---- entries ---- */

/* Whether the files entry e names show the tags its writer left. */
static int visible(struct ck_store *st, const struct ck_journal_entry *e)
{
	char *mpath = ck_manifest_path(st->path, e->series, e->name);
	char *tpath = mpath ? ck_tombstone_path(mpath) : NULL;
	char *ppath = ck_packmap_path(st->path, e->series, e->name);
	char m[33] = "", t[33] = "", p[33] = "";
	int ok = mpath && tpath && ppath && ck_journal_tag(mpath, m) == 0 && ck_journal_tag(tpath, t) == 0 &&
		 ck_journal_tag(ppath, p) == 0 && !strcmp(m, e->manifest) && !strcmp(t, e->tombstone) &&
		 !strcmp(p, e->packmap);

	free(mpath);
	free(tpath);
	free(ppath);
	return ok;
}

static int apply(struct ck_store *st, uint64_t seq, const struct ck_journal_entry *e, int *changed,
		 struct ck_error *err)
{
	MDB_txn *txn;
	uint64_t have;
	int rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));

	if (rc < 0)
		return ck_fail(err, -rc, "%s: cannot start an index transaction: %s", st->path, strerror(-rc));
	rc = ck_journal_applied(txn, st, &have);
	if (rc == 0 && have >= seq) {
		mdb_txn_abort(txn);   /* another process of this node applied it */
		return 0;
	}
	for (size_t i = 0; i < e->nemptied && rc == 0 && ck_pack_ready(st); i++)
		rc = drop_pack(st, txn, e->emptied[i]);
	for (size_t i = 0; i < e->nscans && rc == 0 && ck_pack_ready(st); i++)
		rc = scan_range(st, txn, &e->scans[i]);
	if (rc == 0 && e->has_pos)
		rc = apply_pos(st, txn, e->pack_cur, e->pack_end);
	if (rc == 0 && (e->nemptied || e->nscans))
		*changed = 1;
	if (rc == 0 && e->series)
		rc = reconcile(st, txn, e->series, e->name, changed, NULL);
	if (rc == 0)
		rc = ck_journal_put_applied(txn, st, seq);
	if (rc == 0)
		rc = ck_mdb_errno(mdb_txn_commit(txn));
	else
		mdb_txn_abort(txn);
	if (rc < 0)
		ck_fail(err, -rc, "%s: journal entry %" PRIu64 ": %s", st->path, seq, strerror(-rc));
	return rc;
}

static int superseded(const struct ck_journal_entry *e, size_t i, size_t n)
{
	for (size_t j = i + 1; j < n; j++)
		if (e[j].series && !strcmp(e[j].series, e[i].series) && !strcmp(e[j].name, e[i].name))
			return 1;
	return 0;
}

int ck_store_follow(struct ck_store *st, int *changed_out, struct ck_error *err)
{
	struct ck_journal_entry *e = NULL;
	struct ck_error why = { { 0 } };
	uint64_t first, *seqs = NULL;
	size_t n = 0;
	MDB_txn *txn;
	int changed = 0, lock = -1, rc;

	if (changed_out)
		*changed_out = 0;
	if (!st->index_rw)
		return 0;
	rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));
	if (rc == 0) {
		rc = ck_journal_applied(txn, st, &first);
		mdb_txn_abort(txn);
	}
	if (rc < 0)
		return ck_fail(err, -rc, "%s: index: %s", st->path, strerror(-rc));
	if (first > st->journal_hint)
		st->journal_hint = first;
	first++;
	e = calloc(BATCH, sizeof(*e));
	seqs = calloc(BATCH, sizeof(*seqs));
	if (!e || !seqs) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	/* The entries there are now: one open() each, the first missing ends it. */
	for (uint64_t seq = first; n < BATCH; seq++) {
		rc = ck_journal_read(st->path, seq, &e[n], &why);
		if (rc == -ENOENT) {
			rc = 0;
			break;
		}
		if (rc == -ENOMEM) {
			ck_fail(err, ENOMEM, "out of memory");
			goto out;
		}
		if (rc < 0) {
			/* Damage: nothing can be learnt from it (reindex rebuilds from the manifests). */
			ck_warn("%s/%s/%016" PRIu64 ": skipped: %s", st->path, CK_JOURNAL_DIR, seq, why.msg);
			memset(&e[n], 0, sizeof(e[n]));
			e[n].time_ns = -1;
			rc = 0;
		}
		seqs[n++] = seq;
	}
	if (!n)
		goto out;
	rc = ck_store_lock(st, 0, &lock, err);
	if (rc == 0)
		rc = ck_store_index_current(st, err);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (e[i].series && !visible(st, &e[i])) {
			if (superseded(e, i, n)) {
				struct ck_journal_entry skip = { 0 };

				rc = apply(st, seqs[i], &skip, &changed, err);
				continue;
			}
			if (ck_now_ns() - e[i].time_ns < STALE_NS)
				break;   /* not visible here yet: the next follow takes it */
			ck_info("%s: journal entry %" PRIu64 " for %s/%s: its files changed since; applying them as "
				"they are", st->path, seqs[i], e[i].series, e[i].name);
		}
		rc = apply(st, seqs[i], &e[i], &changed, err);
	}
out:
	if (lock >= 0)
		ck_store_unlock(lock);
	for (size_t i = 0; e && i < n; i++)
		ck_journal_entry_clear(&e[i]);
	free(e);
	free(seqs);
	if (changed_out)
		*changed_out = changed;
	return rc;
}
