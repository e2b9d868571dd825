/* Committing one imported checkpoint: a single LMDB write transaction
 * replaces whatever an earlier import recorded for the same (series, name),
 * so readers see either the old checkpoint or the new one, never a mix.
 * Files whose identity did not change keep their ids.
 *
 * The checkpoint's manifest (manifest.h) is written durably inside that
 * transaction, before it commits: whatever the index holds, a manifest
 * holds too, and `ckptctl reindex` can rebuild the index from them.  If
 * the commit then fails, the previous manifest is put back. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckptfs/clock.h"
#include "commit.h"
#include "index.h"
#include "journal.h"
#include "manifest.h"
#include "staging.h"

/* The next unused id of a checkpoint or file record; ids start at 1. */
static int next_id(MDB_txn *txn, struct ck_store *st, uint64_t *id)
{
	uint64_t next;
	int rc = ck_meta_get_u64(txn, st, "next_id", &next);

	if (rc < 0)
		return rc;
	*id = next ? next : 1;
	return ck_meta_put_u64(txn, st, "next_id", *id + 1);
}

static int put(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t klen, const struct ck_buf *val)
{
	MDB_val k = { klen, (void *)key }, v = { val->len, val->data };

	return ck_mdb_errno(mdb_put(txn, dbi, &k, &v, 0));
}

static int put_series(MDB_txn *txn, struct ck_store *st, const char *series, const char *pattern, int64_t now)
{
	MDB_val k = { strlen(series), (void *)series }, v;
	struct ck_buf b = CK_BUF_INIT;
	int rc;

	rc = mdb_get(txn, st->series, &k, &v);
	if (rc == 0 && !pattern)
		return 0;           /* keep the series and its stored pattern */
	if (rc != 0 && rc != MDB_NOTFOUND)
		return ck_mdb_errno(rc);
	rc = ck_rec_put_series(&b, pattern, now);
	if (rc == 0)
		rc = put(txn, st->series, series, strlen(series), &b);
	ck_buf_free(&b);
	return rc;
}

static int same_file(const struct ck_file_info *a, const struct ck_file_info *b)
{
	return strcmp(a->relpath, b->relpath) == 0 && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtime_ns == b->mtime_ns && a->kind == b->kind;
}

/* Removes the old checkpoint's records; new files that are the same
 * physical file as an old one take over its id. */
static int drop_old(MDB_txn *txn, struct ck_store *st, const struct ck_ckpt_info *old,
		    struct ck_ingest *files, size_t n)
{
	struct ck_file_info *of = NULL;
	struct ck_buf key = CK_BUF_INIT;
	uint8_t id[8];
	size_t nof = 0, i, j;
	MDB_val k;
	int rc;

	rc = ck_txn_list_files(txn, st, old->id, &of, &nof);
	for (i = 0; i < nof && rc == 0; i++) {
		for (j = 0; j < n; j++) {
			if (!files[j].info.id && same_file(&of[i], &files[j].info)) {
				files[j].info.id = of[i].id;
				break;
			}
		}
		ck_key_id(id, of[i].id);
		rc = ck_mdb_delete_prefix(txn, st->storages, id, 8);
		if (rc == 0)
			rc = ck_mdb_delete_prefix(txn, st->tensors, id, 8);
	}
	ck_file_info_free(of, nof);
	if (rc < 0)
		return rc;
	ck_key_id(id, old->id);
	rc = ck_mdb_delete_prefix(txn, st->files, id, 8);
	if (rc < 0)
		return rc;
	if (ck_key_ckpt(&key, old->series, old->step, old->name) < 0)
		return -ENOMEM;
	k.mv_size = key.len;
	k.mv_data = key.data;
	rc = mdb_del(txn, st->ckpts, &k, NULL);
	ck_buf_free(&key);
	return rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
}

static int put_file(MDB_txn *txn, struct ck_store *st, struct ck_ingest *f, struct ck_buf *key, struct ck_buf *val)
{
	uint8_t ik[12];
	size_t i;
	int rc;

	val->len = 0;
	rc = ck_key_file(key, f->info.ckpt_id, f->info.relpath);
	if (rc == 0)
		rc = ck_rec_put_file(val, st->path, &f->info, (uint32_t)f->nst);
	if (rc == 0)
		rc = put(txn, st->files, key->data, key->len, val);
	for (i = 0; i < f->nst && rc == 0; i++) {
		ck_key_id_index(ik, f->info.id, (uint32_t)i);
		val->len = 0;
		rc = ck_rec_put_storage(val, &f->st[i]);
		if (rc == 0)
			rc = put(txn, st->storages, ik, sizeof(ik), val);
	}
	for (i = 0; i < f->nt && rc == 0; i++) {
		ck_key_id_index(ik, f->info.id, (uint32_t)i);
		val->len = 0;
		rc = ck_rec_put_tensor(val, &f->t[i]);
		if (rc == 0)
			rc = put(txn, st->tensors, ik, sizeof(ik), val);
	}
	return rc;
}

/* The records of checkpoint ck and its files, replacing an earlier
 * checkpoint of the same (series, name); sets ck->id and the files' ids. */
int ck_commit_put(MDB_txn *txn, struct ck_store *st, struct ck_ckpt_info *ck, struct ck_ingest *files,
			  size_t n, int64_t imported_ns)
{
	struct ck_buf key = CK_BUF_INIT, val = CK_BUF_INIT;
	struct ck_ckpt_info old;
	size_t i;
	int rc;

	rc = ck_txn_find_checkpoint(txn, st, ck->series, ck->name, &old);
	if (rc == 0) {
		ck->id = old.id;
		rc = drop_old(txn, st, &old, files, n);
		ck_ckpt_info_clear(&old);
	} else if (rc == -ENOENT) {
		rc = next_id(txn, st, &ck->id);
	}
	for (i = 0; i < n && rc == 0; i++) {
		files[i].info.ckpt_id = ck->id;
		if (!files[i].info.id)
			rc = next_id(txn, st, &files[i].info.id);
		if (rc == 0)
			rc = put_file(txn, st, &files[i], &key, &val);
	}
	if (rc == 0) {
		val.len = 0;
		rc = ck_key_ckpt(&key, ck->series, ck->step, ck->name);
		if (rc == 0)
			rc = ck_rec_put_ckpt(&val, st->path, ck, imported_ns);
		if (rc == 0)
			rc = put(txn, st->ckpts, key.data, key.len, &val);
	}
	ck_buf_free(&key);
	ck_buf_free(&val);
	return rc;
}

/* Writes the manifest of what the transaction is about to commit: the
 * checkpoint and its series' record as the transaction sees it. */
static int store_manifest(MDB_txn *txn, struct ck_store *st, const struct ck_ckpt_info *ck,
			  struct ck_ingest *files, size_t n, int64_t imported_ns, struct ck_manifest_txn *mtx,
			  struct ck_error *err)
{
	struct ck_manifest m = { .ckpt = *ck, .imported_ns = imported_ns, .files = files, .nfiles = n };
	MDB_val k = { strlen(ck->series), ck->series }, v;
	struct ck_error why = { { 0 } };
	int rc;

	rc = ck_mdb_errno(mdb_get(txn, st->series, &k, &v));
	if (rc == 0)
		rc = ck_rec_get_series_full(&v, &m.pattern, &m.series_created_ns);
	if (rc < 0)
		return ck_fail(err, -rc, "%s: cannot read series '%s' back: %s", st->path, ck->series, strerror(-rc));
	rc = ck_manifest_store(st->path, &m, mtx, &why);
	free(m.pattern);
	if (rc < 0)
		return ck_fail(err, -rc, "cannot write the manifest of %s/%s: %s", ck->series, ck->name, why.msg);
	return 0;
}

int ck_commit_checkpoint(struct ck_store *st, const char *pattern, struct ck_ckpt_info *ck,
			 struct ck_ingest *files, size_t n, struct ck_error *err)
{
	struct ck_manifest_txn mtx = { 0 };
	int64_t imported_ns = ck_now_ns();
	uint64_t seq;
	MDB_txn *txn;
	int lock, rc;

	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	rc = ck_store_lock(st, 0, &lock, err);
	if (rc < 0)
		return rc;
	rc = ck_store_index_current(st, err);
	if (rc < 0)
		goto out;
	rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (rc < 0) {
		ck_fail(err, -rc, "%s: cannot start an index transaction: %s", st->path, strerror(-rc));
		goto out;
	}
	rc = put_series(txn, st, ck->series, pattern, imported_ns);
	if (rc == 0)
		rc = ck_commit_put(txn, st, ck, files, n, imported_ns);
	if (rc < 0) {
		mdb_txn_abort(txn);
		goto index_error;
	}
	rc = store_manifest(txn, st, ck, files, n, imported_ns, &mtx, err);
	if (rc < 0) {
		mdb_txn_abort(txn);
		goto out;
	}
	ck_crash_point("manifest");   /* test hook: manifest durable, index not committed */
	/* Every other index of the store learns of it from the journal. */
	rc = ck_journal_note_ckpt(st, ck->series, ck->name, NULL, &seq, err);
	if (rc == 0)
		rc = ck_journal_mark_own(txn, st, seq);
	if (rc < 0) {
		mdb_txn_abort(txn);
		ck_manifest_store_rollback(&mtx);
		goto unjournal;
	}
	rc = ck_mdb_errno(mdb_txn_commit(txn));
	if (rc < 0) {
		ck_manifest_store_rollback(&mtx);
		ck_fail(err, -rc, "%s: cannot record %s/%s in the index: %s", st->path, ck->series, ck->name,
			rc == -ENOSPC ? "index full" : strerror(-rc));
		goto unjournal;
	}
	ck_manifest_store_commit(&mtx);
	goto out;
index_error:
	ck_fail(err, -rc, "%s: cannot record %s/%s in the index: %s", st->path, ck->series, ck->name,
		rc == -ENOSPC ? "index full" : strerror(-rc));
	goto out;
unjournal:
	/* The manifest is back as it was: an entry saying so supersedes any
	 * that named the one rolled back. */
	ck_journal_note_ckpt(st, ck->series, ck->name, NULL, NULL, NULL);
out:
	ck_store_unlock(lock);
	return rc;
}

int ck_commit_restore(struct ck_store *st, struct ck_manifest *m, struct ck_error *err)
{
	MDB_txn *txn;
	int rc;

	rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (rc == 0)
		rc = ck_commit_put(txn, st, &m->ckpt, m->files, m->nfiles, m->imported_ns);
	if (rc == 0)
		rc = ck_mdb_errno(mdb_txn_commit(txn));
	else
		mdb_txn_abort(txn);
	if (rc < 0)
		return ck_fail(err, -rc, "cannot record %s/%s in the new index: %s", m->ckpt.series, m->ckpt.name,
			       rc == -ENOSPC ? "index full" : strerror(-rc));
	return 0;
}

int ck_commit_series(struct ck_store *st, const char *series, const char *pattern, int64_t created_ns,
		     struct ck_error *err)
{
	struct ck_buf b = CK_BUF_INIT;
	MDB_txn *txn;
	int rc;

	rc = ck_rec_put_series(&b, pattern, created_ns);
	if (rc == 0)
		rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (rc == 0) {
		rc = put(txn, st->series, series, strlen(series), &b);
		if (rc == 0)
			rc = ck_mdb_errno(mdb_txn_commit(txn));
		else
			mdb_txn_abort(txn);
	}
	ck_buf_free(&b);
	if (rc < 0)
		return ck_fail(err, -rc, "cannot record series '%s' in the new index: %s", series, strerror(-rc));
	return 0;
}
