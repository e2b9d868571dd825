/* Deleting checkpoints, the store's side (store.h, "Deleting checkpoints").
 *
 * ck_store_delete_checkpoint flags the record and writes a tombstone
 * beside the manifest inside the same index transaction, before it commits
 * (as a commit writes its manifest): whatever the index says, the
 * manifests say too, or recovery rolls the index forward.
 *
 * ck_store_reclaim drops files of deleted checkpoints in one index
 * transaction that also rewrites their manifests without them, and only
 * then unlinks the store's own copies (delete_finish.c), so that neither
 * the index nor a manifest ever names a file that is gone.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/packstore.h"
#include "delete.h"
#include "index.h"
#include "journal.h"
#include "manifest.h"
#include "staging.h"

/* ---- index helpers ---- */

int ck_delete_file_records(MDB_txn *txn, struct ck_store *st, const struct ck_file_info *f)
{
	struct ck_buf key = CK_BUF_INIT;
	uint8_t id[8];
	MDB_val k;
	int rc;

	ck_key_id(id, f->id);
	rc = ck_mdb_delete_prefix(txn, st->storages, id, sizeof(id));
	if (rc == 0)
		rc = ck_mdb_delete_prefix(txn, st->tensors, id, sizeof(id));
	if (rc == 0 && ck_key_file(&key, f->ckpt_id, f->relpath) < 0)
		rc = -ENOMEM;
	if (rc == 0) {
		k.mv_size = key.len;
		k.mv_data = key.data;
		rc = mdb_del(txn, st->files, &k, NULL);
		rc = rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
	}
	ck_buf_free(&key);
	return rc;
}

int ck_delete_ckpt_records(MDB_txn *txn, struct ck_store *st, const struct ck_ckpt_info *ck)
{
	struct ck_file_info *files = NULL;
	struct ck_buf key = CK_BUF_INIT;
	size_t n = 0;
	MDB_val k;
	int rc;

	rc = ck_txn_list_files(txn, st, ck->id, &files, &n);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = ck_delete_file_records(txn, st, &files[i]);
	ck_file_info_free(files, n);
	if (rc == 0 && ck_key_ckpt(&key, ck->series, ck->step, ck->name) < 0)
		rc = -ENOMEM;
	if (rc == 0) {
		k.mv_size = key.len;
		k.mv_data = key.data;
		rc = mdb_del(txn, st->ckpts, &k, NULL);
		rc = rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
	}
	ck_buf_free(&key);
	return rc;
}

/* Rewrites the checkpoint record with the deleted flag set (the import
 * time stays as it is: only the flags byte changes). */
static int set_deleted_flag(MDB_txn *txn, struct ck_store *st, const struct ck_ckpt_info *ck)
{
	struct ck_buf key = CK_BUF_INIT, val = CK_BUF_INIT;
	MDB_val k, v;
	int rc;

	if (ck_key_ckpt(&key, ck->series, ck->step, ck->name) < 0)
		return -ENOMEM;
	k.mv_size = key.len;
	k.mv_data = key.data;
	rc = ck_mdb_errno(mdb_get(txn, st->ckpts, &k, &v));
	if (rc == 0 && v.mv_size < 2)
		rc = -EIO;
	if (rc == 0 && ck_buf_put(&val, v.mv_data, v.mv_size) < 0)
		rc = -ENOMEM;
	if (rc == 0) {
		val.data[1] |= CK_CKPT_FLAG_DELETED;
		v.mv_size = val.len;
		v.mv_data = val.data;
		rc = ck_mdb_errno(mdb_put(txn, st->ckpts, &k, &v, 0));
	}
	ck_buf_free(&key);
	ck_buf_free(&val);
	return rc;
}

char *ck_delete_owned_dir(struct ck_store *st, const struct ck_ckpt_info *ck)
{
	char *root = realpath(st->path, NULL), *dir = NULL;
	size_t n;

	if (!root)
		return NULL;
	n = strlen(root) + strlen(CK_STORE_DATA_DIR) + strlen(ck->series) + strlen(ck->name) + 4;
	dir = malloc(n);
	if (dir) {
		snprintf(dir, n, "%s/%s/%s/%s", root, CK_STORE_DATA_DIR, ck->series, ck->name);
		if (ck->is_file || strcmp(dir, ck->src_path) != 0) {
			free(dir);
			dir = NULL;
		}
	}
	free(root);
	return dir;
}

int ck_delete_is_owned(const char *dir, const char *path)
{
	size_t n = dir ? strlen(dir) : 0;

	return dir && strncmp(path, dir, n) == 0 && path[n] == '/' && !strstr(path + n, "/../") &&
	       !strstr(path + n, "/./");
}

int ck_delete_begin(struct ck_store *st, struct ck_delete_txn *lt, int commit_lock, struct ck_error *err)
{
	int rc = 0;

	lt->commit_fd = lt->index_fd = -1;
	lt->txn = NULL;
	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	if (commit_lock)
		rc = ck_store_commit_lock(st, &lt->commit_fd, err);
	/* Decided on what every node has done (other nodes' commits, deletions). */
	if (rc == 0)
		rc = ck_store_follow(st, NULL, err);
	if (rc == 0)
		rc = ck_store_lock(st, 0, &lt->index_fd, err);
	if (rc == 0)
		rc = ck_store_index_current(st, err);
	if (rc == 0) {
		rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &lt->txn));
		if (rc < 0)
			ck_fail(err, -rc, "%s: cannot start an index transaction: %s", st->path, strerror(-rc));
	}
	return rc;
}

void ck_delete_end(struct ck_delete_txn *lt)
{
	if (lt->txn)
		mdb_txn_abort(lt->txn);
	if (lt->index_fd >= 0)
		ck_store_unlock(lt->index_fd);
	if (lt->commit_fd >= 0)
		ck_store_unlock(lt->commit_fd);
	lt->txn = NULL;
	lt->index_fd = lt->commit_fd = -1;
}

/* ---- marking a checkpoint deleted ---- */

int ck_delete_mark(struct ck_store *st, const char *series, const char *name, int write_tombstone,
		   struct ck_error *err)
{
	struct ck_error why = { { 0 } };
	struct ck_delete_txn lt;
	struct ck_ckpt_info ck = { 0 };
	struct ck_manifest m = { 0 };
	char *mpath = NULL, *tpath = NULL;
	uint64_t seq;
	int rc;

	rc = ck_delete_begin(st, &lt, 0, err);
	if (rc < 0)
		goto out;
	rc = ck_txn_find_checkpoint(lt.txn, st, series, name, &ck);
	if (rc == -ENOENT || (rc == 0 && ck.deleted)) {
		rc = ck_fail(err, ENOENT, "%s/%s: no such checkpoint%s", series, name, rc ? "" : " (deleted already)");
		goto out;
	}
	if (rc < 0) {
		ck_fail(err, -rc, "%s: cannot read the index: %s", st->path, strerror(-rc));
		goto out;
	}
	mpath = ck_manifest_path(st->path, series, name);
	tpath = mpath ? ck_tombstone_path(mpath) : NULL;
	if (!tpath) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ck_manifest_load(st->path, mpath, &m, &why);
	if (rc < 0) {
		rc = ck_fail(err, rc == -ENOENT ? EINVAL : -rc, "%s/%s: %s", series, name,
			     rc == -ENOENT ? "has no manifest (imported by an older ckptctl): import it again first"
					   : why.msg);
		goto out;
	}
	rc = set_deleted_flag(lt.txn, st, &ck);
	if (rc < 0) {
		ck_fail(err, -rc, "%s/%s: cannot update the index: %s", series, name, strerror(-rc));
		goto out;
	}
	if (write_tombstone) {
		rc = ck_tombstone_write(tpath, m.imported_ns, err);
		if (rc < 0)
			goto out;
		ck_crash_point("tombstone");   /* test hook: tombstone durable, index not committed */
	}
	rc = ck_journal_note_ckpt(st, series, name, NULL, &seq, err);
	if (rc == 0)
		rc = ck_journal_mark_own(lt.txn, st, seq);
	if (rc < 0) {
		if (write_tombstone)
			ck_tombstone_unlink(tpath);
		goto out;
	}
	rc = ck_mdb_errno(mdb_txn_commit(lt.txn));
	lt.txn = NULL;
	if (rc < 0) {
		if (write_tombstone)
			ck_tombstone_unlink(tpath);
		ck_fail(err, -rc, "%s/%s: cannot record the deletion in the index: %s", series, name, strerror(-rc));
	} else {
		char stage[NAME_MAX + 16];

		/* test hook: marked deleted, nothing reclaimed yet */
		snprintf(stage, sizeof(stage), "deleted-%s", name);
		ck_crash_point(stage);
	}
out:
	ck_delete_end(&lt);
	ck_manifest_clear(&m);
	ck_ckpt_info_clear(&ck);
	free(mpath);
	free(tpath);
	return rc;
}

int ck_store_delete_checkpoint(struct ck_store *st, const char *series, const char *name, struct ck_error *err)
{
	int lock, rc;

	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	/* Serialised with staged commits (a name taken meanwhile) and reclaims. */
	rc = ck_store_commit_lock(st, &lock, err);
	if (rc < 0)
		return rc;
	rc = ck_delete_mark(st, series, name, 1, err);
	ck_store_unlock(lock);
	return rc;
}

/* ---- the series stamp ---- */

static int txn_stamp(MDB_txn *txn, struct ck_store *st, const char *series, uint64_t *stamp)
{
	struct ck_buf prefix = CK_BUF_INIT;
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t h = 0x636b707466730001ULL;
	int rc, op = MDB_SET_RANGE;

	if (ck_key_ckpt_prefix(&prefix, series) < 0)
		return -ENOMEM;
	rc = mdb_cursor_open(txn, st->ckpts, &cur);
	if (rc != 0) {
		ck_buf_free(&prefix);
		return ck_mdb_errno(rc);
	}
	k.mv_size = prefix.len;
	k.mv_data = prefix.data;
	while ((rc = mdb_cursor_get(cur, &k, &v, (MDB_cursor_op)op)) == 0) {
		op = MDB_NEXT;
		if (k.mv_size < prefix.len || memcmp(k.mv_data, prefix.data, prefix.len) != 0)
			break;
		h = XXH3_64bits_withSeed(k.mv_data, k.mv_size, h);
		h = XXH3_64bits_withSeed(v.mv_data, v.mv_size, h);
	}
	mdb_cursor_close(cur);
	ck_buf_free(&prefix);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return ck_mdb_errno(rc);
	*stamp = h;
	return 0;
}

int ck_store_series_stamp(struct ck_store *st, const char *series, uint64_t *stamp)
{
	MDB_txn *txn;
	int rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));

	if (rc < 0)
		return rc;
	rc = txn_stamp(txn, st, series, stamp);
	mdb_txn_abort(txn);
	return rc;
}

/* ---- reclaiming files ---- */

/* What one deleted checkpoint loses, and how to undo its manifest change. */
struct drop_plan {
	struct ck_ckpt_info *ck;
	struct ck_file_info *gone;       /* the dropped files' records */
	size_t ngone;
	int removed;                     /* the whole checkpoint went with this transaction */
	struct ck_manifest_txn mtx;      /* manifest rewritten without the dropped files */
	char *mbackup, *mpath;           /* or removed, kept as a hard link until the commit */
};

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int wanted(const uint64_t *sorted, size_t n, uint64_t id)
{
	return bsearch(&id, sorted, n, sizeof(*sorted), id_cmp) != NULL;
}

/* The manifest goes (a checkpoint with no file left that the store does not
 * own): kept as a hard link until the index commit is known. */
static int remove_manifest(struct drop_plan *p, struct ck_error *err)
{
	size_t n = strlen(p->mpath) + 32;
	int rc;

	p->mbackup = malloc(n);
	if (!p->mbackup)
		return ck_fail(err, ENOMEM, "out of memory");
	snprintf(p->mbackup, n, "%s.old.%ld", p->mpath, (long)getpid());
	if (link(p->mpath, p->mbackup) < 0) {
		rc = ck_fail(err, errno, "%s: %s", p->mpath, strerror(errno));
		free(p->mbackup);
		p->mbackup = NULL;
		return rc;
	}
	rc = ck_tombstone_unlink(p->mpath);
	return rc < 0 ? ck_fail(err, -rc, "%s: %s", p->mpath, strerror(-rc)) : 0;
}

/* Records what plan p drops in the transaction, and changes the manifest
 * to match before the transaction commits. */
static int plan_apply(struct ck_store *st, MDB_txn *txn, struct drop_plan *p, struct ck_error *err)
{
	struct ck_error why = { { 0 } };
	struct ck_manifest m = { 0 }, kept;
	char *owned = NULL;
	size_t i, j;
	int rc;

	p->mpath = ck_manifest_path(st->path, p->ck->series, p->ck->name);
	if (!p->mpath)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = ck_manifest_load(st->path, p->mpath, &m, &why);
	if (rc < 0)
		return ck_fail(err, -rc, "%s: %s", p->mpath, why.msg);
	for (i = 0; i < p->ngone && rc == 0; i++)
		rc = ck_delete_file_records(txn, st, &p->gone[i]);
	kept = m;
	kept.files = calloc(m.nfiles + 1, sizeof(*kept.files));
	if (rc == 0 && !kept.files)
		rc = -ENOMEM;
	if (rc < 0) {
		ck_fail(err, -rc, "%s/%s: cannot update the index: %s", p->ck->series, p->ck->name, strerror(-rc));
		goto out;
	}
	kept.nfiles = 0;
	for (i = 0; i < m.nfiles; i++) {
		for (j = 0; j < p->ngone; j++)
			if (strcmp(m.files[i].info.relpath, p->gone[j].relpath) == 0)
				break;
		if (j == p->ngone)
			kept.files[kept.nfiles++] = m.files[i];   /* shallow: m keeps ownership */
	}
	owned = ck_delete_owned_dir(st, p->ck);
	if (kept.nfiles == 0 && !owned) {
		/* Nothing of it is left to remove from disk: it goes now. */
		p->removed = 1;
		rc = ck_delete_ckpt_records(txn, st, p->ck);
		if (rc < 0)
			ck_fail(err, -rc, "%s/%s: cannot update the index: %s", p->ck->series, p->ck->name,
				strerror(-rc));
		else
			rc = remove_manifest(p, err);
	} else {
		/* A store-owned checkpoint keeps its (empty) record and manifest
		 * until its directory is gone: recovery would otherwise take the
		 * directory for a commit cut short. */
		rc = ck_manifest_store(st->path, &kept, &p->mtx, &why);
		if (rc < 0)
			ck_fail(err, -rc, "%s/%s: cannot rewrite the manifest: %s", p->ck->series, p->ck->name,
				why.msg);
	}
out:
	free(kept.files);
	free(owned);
	ck_manifest_clear(&m);
	return rc;
}

static void plan_commit(struct ck_store *st, struct drop_plan *p)
{
	if (p->mtx.path)
		ck_manifest_store_commit(&p->mtx);
	if (p->mbackup) {
		char *tomb = ck_tombstone_path(p->mpath);

		unlink(p->mbackup);
		if (tomb)
			ck_tombstone_unlink(tomb);
		free(tomb);
		ck_delete_drop_packmap(st, p->ck);
	}
}

static void plan_rollback(struct drop_plan *p)
{
	if (p->mtx.path)
		ck_manifest_store_rollback(&p->mtx);
	if (p->mbackup && rename(p->mbackup, p->mpath) == 0)
		ck_tombstone_unlink(p->mbackup);   /* syncs the directory */
}

static void plan_free(struct drop_plan *p)
{
	ck_file_info_free(p->gone, p->ngone);
	free(p->mbackup);
	free(p->mpath);
}

/* The plans: for each deleted checkpoint of the series, its files among ids. */
static int make_plans(MDB_txn *txn, struct ck_store *st, struct ck_ckpt_info *cks, size_t ncks,
		      const uint64_t *ids, size_t nids, struct drop_plan *plans, size_t *nplans)
{
	int rc = 0;

	*nplans = 0;
	for (size_t i = 0; i < ncks && rc == 0; i++) {
		struct ck_file_info *files = NULL;
		struct drop_plan *p = &plans[*nplans];
		size_t n = 0, k = 0;

		if (!cks[i].deleted)
			continue;
		rc = ck_txn_list_files(txn, st, cks[i].id, &files, &n);
		for (size_t j = 0; j < n && rc == 0; j++) {
			if (wanted(ids, nids, files[j].id))
				files[k++] = files[j];
			else
				ck_file_info_clear(&files[j]);
		}
		if (rc < 0 || k == 0) {
			ck_file_info_free(files, k);   /* the others were cleared */
			continue;
		}
		memset(p, 0, sizeof(*p));
		p->ck = &cks[i];
		p->gone = files;
		p->ngone = k;
		(*nplans)++;
	}
	return rc;
}

static void report_dropped(const struct drop_plan *p, const char *owned, ck_import_report_fn report, void *ctx)
{
	for (size_t i = 0; i < p->ngone && report; i++)
		if (!ck_delete_is_owned(owned, p->gone[i].src_path))
			report(ctx, p->gone[i].src_path, CK_RECLAIM_DROPPED, "dropped from the index, kept on disk "
			       "(imported, not the store's)");
}

int ck_store_reclaim(struct ck_store *st, const char *series, uint64_t stamp, const uint64_t *file_ids,
		     size_t n, ck_import_report_fn report, void *ctx, struct ck_error *err)
{
	struct ck_ckpt_info *cks = NULL;
	struct drop_plan *plans = NULL;
	struct ck_delete_txn lt;
	uint64_t *ids = NULL, now = 0;
	size_t ncks = 0, nplans = 0, dropped = 0, kept = 0, i;
	int rc;

	/* A file compaction mapped but left raw (a series' newest version
	 * when it ran) holds the bytes that older versions' deltas and
	 * deduplicated chunks are read from: it stays until a compaction
	 * packs it (include/ckptfs/packstore.h). */
	ids = malloc((n + 1) * sizeof(*ids));
	if (!ids) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct ck_file_pack_info pi;

		if (ck_store_file_pack_info(st, file_ids[i], &pi) == 0 && pi.mapped && !pi.packed)
			continue;
		ids[kept++] = file_ids[i];
	}
	n = kept;
	rc = ck_delete_begin(st, &lt, 1, err);
	if (rc < 0)
		goto out;
	rc = txn_stamp(lt.txn, st, series, &now);
	if (rc == 0 && now != stamp) {
		rc = ck_fail(err, EAGAIN, "series %s changed meanwhile", series);
		goto out;
	}
	if (rc == 0)
		rc = ck_txn_list_checkpoints(lt.txn, st, series, &cks, &ncks);
	plans = rc == 0 ? calloc(ncks + 1, sizeof(*plans)) : NULL;
	if (rc == 0 && !plans)
		rc = -ENOMEM;
	if (rc < 0) {
		ck_fail(err, -rc, "%s: cannot read the index: %s", st->path, strerror(-rc));
		goto out;
	}
	qsort(ids, n, sizeof(*ids), id_cmp);
	rc = make_plans(lt.txn, st, cks, ncks, ids, n, plans, &nplans);
	for (i = 0; i < nplans && rc == 0; i++)
		rc = plan_apply(st, lt.txn, &plans[i], err);
	/* Every other index learns of the rewritten manifests from the journal. */
	for (size_t j = 0; j < i && rc == 0; j++)
		rc = ck_journal_note_ckpt(st, series, plans[j].ck->name, NULL, NULL, err);
	if (rc < 0) {
		while (i-- > 0)
			plan_rollback(&plans[i]);
		for (i = 0; i < nplans; i++)
			ck_journal_note_ckpt(st, series, plans[i].ck->name, NULL, NULL, NULL);
		goto out;
	}
	ck_crash_point("reclaim-manifest");   /* test hook: manifests rewritten, index not committed */
	rc = ck_mdb_errno(mdb_txn_commit(lt.txn));
	lt.txn = NULL;
	for (i = 0; i < nplans; i++) {
		if (rc < 0)
			plan_rollback(&plans[i]);
		else
			plan_commit(st, &plans[i]);
		if (rc < 0 || plans[i].mbackup)
			ck_journal_note_ckpt(st, series, plans[i].ck->name, NULL, NULL, NULL);
	}
	if (rc < 0) {
		ck_fail(err, -rc, "%s: cannot record the reclaim in the index: %s", st->path, strerror(-rc));
		goto out;
	}
	ck_crash_point("reclaim-indexed");   /* test hook: index committed, nothing unlinked */
	/* Only now, when neither the index nor a manifest names them, do the
	 * store's own copies go. */
	for (i = 0; i < nplans; i++) {
		char *owned = ck_delete_owned_dir(st, plans[i].ck);
		struct ck_error why = { { 0 } };

		dropped += plans[i].ngone;
		report_dropped(&plans[i], owned, report, ctx);
		free(owned);
		if (plans[i].removed) {
			if (report) {
				char what[600];

				snprintf(what, sizeof(what), "%s/%s", series, plans[i].ck->name);
				report(ctx, what, CK_RECLAIM_REMOVED, "nothing draws from it any more");
			}
		} else if (ck_delete_finish(st, plans[i].ck, report, ctx, &why) < 0 && report) {
			report(ctx, plans[i].ck->name, -EIO, why.msg);
		}
	}
	rc = (int)(dropped > INT_MAX ? INT_MAX : dropped);
out:
	ck_delete_end(&lt);
	for (i = 0; i < nplans; i++)
		plan_free(&plans[i]);
	free(plans);
	ck_ckpt_info_free(cks, ncks);
	free(ids);
	return rc;
}
