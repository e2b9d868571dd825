/* Files whose identity changed but whose bytes did not (docs/format.md,
 * "Identity").
 *
 * A store copied with cp -a, restored from a tar archive or synced with
 * rsync -a holds the same bytes under new inode numbers (and tar may round
 * the modification time): every file fails the identity check that guards
 * against a file changed behind the store's back.  A file whose size did
 * not change is read again once: it is parsed and hashed afresh, and when
 * its storages and tensors are exactly those recorded (every hashed range
 * matches; a raw-mapped file's every chunk too), its new identity is
 * recorded in its manifest, its packmap and the index, so that it is not
 * read again.  Anything else is a changed file and stays refused. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "chunk_table.h"
#include "journal.h"
#include "manifest.h"

static int same_storages(const struct ck_storage_info *a, size_t na, const struct ck_storage_info *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i].key, b[i].key) || a[i].offset != b[i].offset || a[i].length != b[i].length ||
		    a[i].hash_lo != b[i].hash_lo || a[i].hash_hi != b[i].hash_hi)
			return 0;
	return 1;
}

/* Tensors as recorded, layers aside (they follow the layer rules, which
 * may have changed since). */
static int same_tensors(const struct ck_tensor_info *a, size_t na, const struct ck_tensor_info *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i].name, b[i].name) || a[i].dtype != b[i].dtype || a[i].ndim != b[i].ndim ||
		    memcmp(a[i].shape, b[i].shape, sizeof(a[i].shape[0]) * (size_t)a[i].ndim) ||
		    strcmp(a[i].storage_key, b[i].storage_key) || a[i].storage_offset != b[i].storage_offset)
			return 0;
	return 1;
}

/* A raw-mapped file (compaction's newest versions): every chunk's hash. */
static int same_chunks(struct ck_store *st, const struct ck_file_info *f, const char **why)
{
	struct ck_fmap m;
	MDB_txn *txn;
	uint8_t *buf = NULL;
	uint64_t off = 0;
	int fd = -1, rc;

	if (!ck_pack_ready(st))
		return 1;
	rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn));
	if (rc < 0)
		return rc;
	rc = ck_fmap_lookup(txn, st, f->id, &m);
	mdb_txn_abort(txn);
	if (rc == -ENOENT)
		return 1;
	if (rc < 0)
		return rc;
	buf = malloc(CK_CHUNK_MAX);
	fd = open(f->src_path, O_RDONLY | O_CLOEXEC);
	rc = buf && fd >= 0 ? 1 : buf ? -errno : -ENOMEM;
	for (uint32_t i = 0; i < m.nchunks && rc == 1; off += m.chunks[i].len, i++) {
		XXH128_hash_t h;
		int r = ck_pread_full(fd, buf, m.chunks[i].len, off);

		if (r < 0) {
			rc = r;
			break;
		}
		h = XXH3_128bits(buf, m.chunks[i].len);
		if (h.high64 != m.chunks[i].hash.hi || h.low64 != m.chunks[i].hash.lo) {
			*why = "bytes differ";
			rc = 0;
		}
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	ck_fmap_clear(&m);
	return rc;
}

/* 1 when the file at f's path holds what was recorded for f (new identity
 * in *now), 0 when it does not (*why), -errno. */
static int same_content(struct ck_store *st, const struct ck_file_info *f, struct ck_ingest *now, const char **why)
{
	struct ck_storage_info *s = NULL;
	struct ck_tensor_info *t = NULL;
	size_t ns = 0, nt = 0;
	int rc;

	rc = ck_ingest_file(f->src_path, f->relpath, st->rules, NULL, now);
	if (rc < 0)
		return rc;
	if (now->info.size != f->size || now->info.kind != f->kind) {
		*why = now->info.kind == CK_FILE_BAD ? now->info.error : "its format differs";
		return 0;
	}
	rc = ck_store_list_storages(st, f->id, &s, &ns);
	if (rc == 0)
		rc = ck_store_list_tensors(st, f->id, &t, &nt);
	if (rc == 0) {
		rc = same_storages(s, ns, now->st, now->nst) && same_tensors(t, nt, now->t, now->nt);
		if (!rc)
			*why = "tensor bytes or layout differ";
	}
	ck_storage_info_free(s, ns);
	ck_tensor_info_free(t, nt);
	if (rc == 1)
		rc = same_chunks(st, f, why);
	return rc;
}

static int same_identity(const struct ck_file_info *a, uint64_t dev, uint64_t ino, uint64_t size, int64_t mtime)
{
	return a->dev == dev && a->ino == ino && a->size == size && a->mtime_ns == mtime;
}

/* The packmap entry of f, if any, gets the new identity too (a map applies
 * only to the file of its recorded identity). */
static int update_packmap(struct ck_store *st, const struct ck_ckpt_info *ck, const struct ck_file_info *old,
			  const struct ck_file_info *now, struct ck_error *err)
{
	char *path = ck_packmap_path(st->path, ck->series, ck->name);
	struct ck_error why = { { 0 } };
	struct ck_packmap pm;
	int rc, hit = 0;

	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = ck_packmap_load(path, &pm, &why);
	if (rc == -ENOENT || rc == -EBADMSG) {
		free(path);
		return 0;   /* none, or damaged and ignored anyway */
	}
	if (rc < 0) {
		free(path);
		return ck_fail(err, -rc, "%s", why.msg);
	}
	for (size_t i = 0; i < pm.nfiles; i++) {
		struct ck_packmap_file *pf = &pm.files[i];

		if (strcmp(pf->relpath, old->relpath) || !same_identity(old, pf->dev, pf->ino, pf->size, pf->mtime_ns))
			continue;
		pf->dev = now->dev;
		pf->ino = now->ino;
		pf->mtime_ns = now->mtime_ns;
		hit = 1;
	}
	rc = hit ? ck_packmap_store(path, &pm, err) : 0;
	ck_packmap_clear(&pm);
	free(path);
	return rc;
}

/* Records f's new identity: manifest, packmap, journal, then the index. */
static int record(struct ck_store *st, const struct ck_file_info *f, const struct ck_file_info *now,
		  struct ck_error *err)
{
	struct ck_manifest_txn mtx = { 0 };
	struct ck_error why = { { 0 } };
	struct ck_ckpt_info ck = { 0 };
	struct ck_manifest m = { 0 };
	struct ck_buf key = CK_BUF_INIT, val = CK_BUF_INIT;
	struct ck_ingest *mf = NULL;
	char *mpath = NULL;
	MDB_txn *txn = NULL;
	uint64_t seq;
	int commit_fd = -1, index_fd = -1, rc;

	rc = ck_store_commit_lock(st, &commit_fd, err);
	if (rc == 0)
		rc = ck_store_lock(st, 0, &index_fd, err);
	if (rc == 0)
		rc = ck_store_index_current(st, err);
	if (rc == 0)
		rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (rc < 0) {
		txn = NULL;
		if (!err || !err->msg[0])
			ck_fail(err, -rc, "index: %s", strerror(-rc));
		goto out;
	}
	/* The checkpoint of f, and f as the index holds it now. */
	{
		MDB_cursor *cur;
		MDB_val k, v;
		int found = 0;

		rc = ck_mdb_errno(mdb_cursor_open(txn, st->ckpts, &cur));
		if (rc == 0) {
			for (int op = MDB_FIRST; rc == 0 && !found && mdb_cursor_get(cur, &k, &v, op) == 0;
			     op = MDB_NEXT) {
				rc = ck_rec_get_ckpt(&k, &v, st->path, &ck);
				if (rc == 0 && ck.id == f->ckpt_id)
					found = 1;
				else if (rc == 0)
					ck_ckpt_info_clear(&ck);
			}
			mdb_cursor_close(cur);
		}
		if (rc == 0 && !found)
			rc = -ENOENT;
	}
	if (rc < 0) {
		ck_fail(err, -rc, "%s: its checkpoint is not in the index any more", f->src_path);
		goto out;
	}
	mpath = ck_manifest_path(st->path, ck.series, ck.name);
	rc = mpath ? ck_manifest_load(st->path, mpath, &m, &why) : -ENOMEM;
	if (rc < 0) {
		ck_fail(err, -rc, "%s/%s: manifest: %s", ck.series, ck.name, why.msg);
		goto out;
	}
	for (size_t i = 0; i < m.nfiles && !mf; i++)
		if (!strcmp(m.files[i].info.relpath, f->relpath))
			mf = &m.files[i];
	if (!mf || !same_identity(&mf->info, f->dev, f->ino, f->size, f->mtime_ns)) {
		rc = 0;   /* recorded by someone else meanwhile, or imported again: nothing to do */
		goto out;
	}
	mf->info.dev = now->dev;
	mf->info.ino = now->ino;
	mf->info.mtime_ns = now->mtime_ns;
	rc = ck_manifest_store(st->path, &m, &mtx, &why);
	if (rc < 0) {
		ck_fail(err, -rc, "%s/%s: manifest: %s", ck.series, ck.name, why.msg);
		goto out;
	}
	rc = update_packmap(st, &ck, f, now, err);
	if (rc == 0)
		rc = ck_journal_note_ckpt(st, ck.series, ck.name, NULL, &seq, err);
	if (rc == 0)
		rc = ck_journal_mark_own(txn, st, seq);
	if (rc == 0) {
		struct ck_file_info info = *f;

		info.dev = now->dev;
		info.ino = now->ino;
		info.mtime_ns = now->mtime_ns;
		rc = ck_key_file(&key, f->ckpt_id, f->relpath);
		if (rc == 0)
			rc = ck_rec_put_file(&val, st->path, &info, (uint32_t)mf->nst);
		if (rc == 0) {
			MDB_val k = { key.len, key.data }, v = { val.len, val.data };

			rc = ck_mdb_errno(mdb_put(txn, st->files, &k, &v, 0));
		}
	}
	if (rc == 0) {
		rc = ck_mdb_errno(mdb_txn_commit(txn));
		txn = NULL;
	}
	if (rc < 0) {
		ck_manifest_store_rollback(&mtx);
		ck_journal_note_ckpt(st, ck.series, ck.name, NULL, NULL, NULL);
		if (!err || !err->msg[0])
			ck_fail(err, -rc, "index: %s", strerror(-rc));
	} else {
		ck_manifest_store_commit(&mtx);
	}
out:
	if (txn)
		mdb_txn_abort(txn);
	ck_store_unlock(index_fd);
	ck_store_unlock(commit_fd);
	ck_buf_free(&key);
	ck_buf_free(&val);
	ck_manifest_clear(&m);
	ck_ckpt_info_clear(&ck);
	free(mpath);
	return rc;
}

int ck_store_file_check(struct ck_store *st, struct ck_file_info *f, int persist, struct ck_error *err)
{
	struct ck_error why = { { 0 } };
	struct ck_ingest now = { 0 };
	const char *differs = NULL;
	struct stat sb;
	int rc = ck_file_check(f, err);

	if (rc != -ESTALE || stat(f->src_path, &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size)
		return rc;
	ck_info("%s: inode or modification time changed, size did not (a copied or restored store?): "
		"reading it again", f->src_path);
	rc = same_content(st, f, &now, &differs);
	if (rc <= 0) {
		if (rc == 0)
			ck_fail(err, ESTALE, "%s: changed since import (%s)", f->src_path, differs);
		else
			ck_fail(err, -rc, "%s: %s", f->src_path, strerror(-rc));
		ck_ingest_clear(&now);
		return rc == 0 ? -ESTALE : rc;
	}
	if (persist && st->index_rw && record(st, f, &now.info, &why) < 0)
		ck_warn("%s: the same bytes, but its new identity could not be recorded (%s): it will be read "
			"again by the next process", f->src_path, why.msg);
	else if (persist && !st->index_rw)
		ck_info("%s: the same bytes; its new identity is not recorded (the index is read-only here)",
			f->src_path);
	f->dev = now.info.dev;
	f->ino = now.info.ino;
	f->mtime_ns = now.info.mtime_ns;
	ck_ingest_clear(&now);
	return 0;
}
