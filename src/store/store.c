/* Creating and opening a store: the marker file, the LMDB environment and
 * its named databases, and the layer rules in effect. */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "ckptfs/pack_pool.h"
#include "chunk_table.h"
#include "index.h"

/* 1 if dir has no entries besides . and .., 0 if it has, -errno on error. */
static int dir_is_empty(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int empty = 1;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	}
	closedir(d);
	return empty;
}

/* Written last: a half-made store is never taken for one. */
static int write_marker(const char *dir, struct ck_error *err)
{
	char *path = ck_path_join(dir, CK_STORE_MARKER_FILE);
	int rc = path ? ck_file_replace(path, CK_STORE_MARKER, strlen(CK_STORE_MARKER), err) :
			ck_fail(err, ENOMEM, "out of memory");

	free(path);
	return rc;
}

int ck_store_check_marker(const char *dir, struct ck_error *err)
{
	char *path = ck_path_join(dir, CK_STORE_MARKER_FILE);
	char buf[64];
	size_t n = 0;
	FILE *f;

	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	f = fopen(path, "re");
	if (!f) {
		int e = errno;

		free(path);
		if (e == ENOENT)
			return ck_fail(err, ENOENT, "%s: not a ckptfs store (no %s; run `ckptctl init`)",
				       dir, CK_STORE_MARKER_FILE);
		return ck_fail(err, e, "%s/%s: %s", dir, CK_STORE_MARKER_FILE, strerror(e));
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strncmp(buf, "ckptfs-store ", 13) != 0) {
		ck_fail(err, EINVAL, "%s: not a ckptfs store marker", path);
		free(path);
		return -EINVAL;
	}
	if (strcmp(buf, CK_STORE_MARKER) != 0) {
		ck_fail(err, EPROTONOSUPPORT, "%s: unsupported store format '%.*s' (this ckptfs reads %.*s)",
			path, (int)strcspn(buf, "\n"), buf, (int)strlen(CK_STORE_MARKER) - 1, CK_STORE_MARKER);
		free(path);
		return -EPROTONOSUPPORT;
	}
	free(path);
	return 0;
}

/* The index format byte (meta "format"): '2' since paths inside the store
 * are recorded relative to it; '1' indexes are read as they are and
 * become '2' on their first writable open. */
#define INDEX_FORMAT '2'

static int open_env(struct ck_store *st, const char *idx, int writable)
{
	int rc = mdb_env_create(&st->env);

	if (rc == 0)
		rc = mdb_env_set_maxdbs(st->env, 16);
	if (rc == 0)
		rc = mdb_env_set_mapsize(st->env, CK_STORE_MAPSIZE);
	if (rc == 0)
		rc = mdb_env_open(st->env, idx, MDB_NOTLS | (writable ? 0 : MDB_RDONLY), 0644);
	if (rc != 0 && st->env) {
		mdb_env_close(st->env);
		st->env = NULL;
	}
	return rc;
}

int ck_store_open_index(struct ck_store *st, const char *idx, int create, struct ck_error *err)
{
	unsigned int dbflags = create ? MDB_CREATE : 0;
	MDB_txn *txn = NULL;
	int rc;

	if (create)
		st->index_rw = 1;
	rc = open_env(st, idx, st->index_rw);
	if ((rc == EACCES || rc == EROFS) && st->index_rw && !create) {
		/* Readable but not ours to write: read it as it is. */
		st->index_rw = 0;
		rc = open_env(st, idx, 0);
	}
	if (rc == 0) {
		int dead;

		/* Free reader slots of processes that died (kill -9 of a daemon):
		 * a stale slot pins old pages and makes the index grow. */
		mdb_reader_check(st->env, &dead);
	}
	if (rc == 0)
		rc = mdb_txn_begin(st->env, NULL, st->index_rw ? 0 : MDB_RDONLY, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_META, dbflags, &st->meta);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_SERIES, dbflags, &st->series);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_CKPTS, dbflags, &st->ckpts);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_FILES, dbflags, &st->files);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_STORAGES, dbflags, &st->storages);
	if (rc == 0)
		rc = mdb_dbi_open(txn, CK_DB_TENSORS, dbflags, &st->tensors);
	if (rc == 0) {
		MDB_val k = { 6, "format" }, v;
		static const char current = INDEX_FORMAT;

		rc = create ? MDB_NOTFOUND : mdb_get(txn, st->meta, &k, &v);
		if (rc == 0 && (v.mv_size != 1 || (*(const char *)v.mv_data != '1' &&
						    *(const char *)v.mv_data != INDEX_FORMAT))) {
			mdb_txn_abort(txn);
			return ck_fail(err, EPROTONOSUPPORT, "%s: unsupported index format", st->path);
		}
		if ((rc == MDB_NOTFOUND && create) ||
		    (rc == 0 && st->index_rw && *(const char *)v.mv_data != INDEX_FORMAT)) {
			v.mv_size = 1;
			v.mv_data = (void *)&current;
			rc = mdb_put(txn, st->meta, &k, &v, 0);
		}
	}
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (txn)
		mdb_txn_abort(txn);
	if (rc != 0) {
		int e = -ck_mdb_errno(rc);

		if (rc == MDB_NOTFOUND)
			ck_fail(err, EIO, "%s: index lacks its databases (rebuild it: ckptctl reindex %s)", idx,
				st->path);
		else if (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_VERSION_MISMATCH)
			ck_fail(err, e, "%s: %s (rebuild it: ckptctl reindex %s)", idx, mdb_strerror(rc), st->path);
		else
			ck_fail(err, e, "%s: %s", idx, mdb_strerror(rc));
		return -e;
	}
	return ck_pack_dbs_open(st, err);
}

/* The one error every tool gives for a store whose index is gone: it can
 * be rebuilt from the manifests. */
static int check_index_present(const char *dir, const char *idx, struct ck_error *err)
{
	char *data = ck_path_join(idx, "data.mdb");
	struct stat sb;
	int rc = 0;

	if (!data)
		return ck_fail(err, ENOMEM, "out of memory");
	if (stat(data, &sb) < 0 && (errno == ENOENT || errno == ENOTDIR))
		rc = ck_fail(err, ENOENT, "%s: index missing: run ckptctl reindex %s", dir, dir);
	free(data);
	return rc;
}

int ck_store_init(const char *dir, struct ck_error *err)
{
	struct ck_store st = { 0 };
	char *marker = NULL, *real = NULL, *data = NULL, id[33];
	struct stat sb;
	int rc;

	/* Only the store's owner reads the index, manifests and the
	 * checkpoints under it; users go through the mount (ckptctl(1)). */
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ck_fail(err, errno, "%s: %s", dir, strerror(errno));
	marker = ck_path_join(dir, CK_STORE_MARKER_FILE);
	real = realpath(dir, NULL);
	data = ck_path_join(dir, CK_STORE_DATA_DIR);
	if (!marker || !real) {
		rc = real ? ck_fail(err, ENOMEM, "out of memory") : ck_fail(err, errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (stat(marker, &sb) == 0) {
		rc = ck_fail(err, EEXIST, "%s: already a ckptfs store", dir);
		goto out;
	}
	rc = dir_is_empty(dir);
	if (rc < 0) {
		rc = ck_fail(err, -rc, "%s: %s", dir, strerror(-rc));
		goto out;
	}
	if (rc == 0) {
		rc = ck_fail(err, ENOTEMPTY, "%s: directory is not empty (a store starts in an empty or new directory)",
			     dir);
		goto out;
	}
	if (chmod(dir, 0700) < 0) {
		rc = ck_fail(err, errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	/* STORE/data is the mount's root directory: its owner and mode are the
	 * root's (chmod 1777 lets every user create series, as in /tmp). */
	if (!data || mkdir(data, 0755) < 0 || chmod(data, 0755) < 0) {
		rc = ck_fail(err, data ? errno : ENOMEM, "%s: %s", data ? data : dir, strerror(data ? errno : ENOMEM));
		goto out;
	}
	rc = ck_store_id(real, 1, id, err);
	if (rc < 0)
		goto out;
	rc = ck_index_place_find(real, 1, &st.where, err);
	if (rc < 0)
		goto out;
	/* On a shared filesystem the store holds no index: each node builds
	 * its own from the manifests (index_place.c). */
	if (!st.where.shared) {
		if (mkdir(st.where.dir, 0755) < 0) {
			rc = ck_fail(err, errno, "%s: %s", st.where.dir, strerror(errno));
			goto out;
		}
		st.path = real;
		rc = ck_store_open_index(&st, st.where.dir, 1, err);
		if (st.env)
			mdb_env_close(st.env);
	}
	if (rc == 0)
		rc = write_marker(dir, err);
out:
	ck_index_place_clear(&st.where);
	free(marker);
	free(real);
	free(data);
	return rc;
}

/* A writable open first finishes staged commits a crash cut short.  The
 * store is usable either way, so a failure is only logged. */
static void recover(struct ck_store *st)
{
	struct ck_error why = { { 0 } };

	if (ck_store_recover(st, NULL, NULL, &why) < 0)
		ck_warn("%s: %s", st->path, why.msg);
}

/* Opens the environment where st->where says, building a node-local index
 * first when there is none yet. */
static int open_where(struct ck_store *st, struct ck_error *err)
{
	int rc;

	if (st->where.shared) {
		rc = ck_index_build(st->path, &st->where, err);
		if (rc < 0)
			return rc;
	} else {
		rc = check_index_present(st->path, st->where.dir, err);
		if (rc < 0)
			return rc;
	}
	st->index_rw = 1;
	return ck_store_open_index(st, st->where.dir, 0, err);
}

int ck_store_open(const char *dir, int readonly, struct ck_store **out, struct ck_error *err)
{
	struct ck_error why = { { 0 } };
	struct ck_store *st;
	char *layers;
	int rc;

	rc = ck_store_check_marker(dir, err);
	if (rc < 0)
		return rc;
	st = calloc(1, sizeof(*st));
	if (!st)
		return ck_fail(err, ENOMEM, "out of memory");
	st->readonly = readonly;
	if (ck_pack_pool_new(&st->pool) < 0) {
		free(st);
		return ck_fail(err, ENOMEM, "out of memory");
	}
	/* Absolute, so that paths built from it (store-owned files under
	 * data/, manifests) compare equal to the absolute src_path of files
	 * whichever directory a command was run from; paths recorded relative
	 * to the store are made absolute against it (paths.c). */
	st->path = realpath(dir, NULL);
	if (!st->path) {
		rc = errno;
		ck_pack_pool_free(st->pool);
		free(st);
		return ck_fail(err, rc, "%s: %s", dir, strerror(rc));
	}
	rc = ck_index_place_find(st->path, !readonly, &st->where, err);
	if (rc == 0)
		rc = open_where(st, err);
	if (rc < 0)
		goto fail;
	layers = ck_path_join(dir, CK_STORE_LAYERS_FILE);
	if (!layers) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto fail;
	}
	rc = ck_layer_rules_load(layers, &st->rules, err);
	free(layers);
	if (rc < 0)
		goto fail;
	/* What other processes and nodes did since this index last looked. */
	if (ck_store_follow(st, NULL, &why) < 0)
		ck_warn("%s: cannot follow the store's journal: %s", st->path, why.msg);
	if (!readonly)
		recover(st);
	*out = st;
	return 0;
fail:
	ck_store_close(st);
	return rc;
}

int ck_store_is_shared(const struct ck_store *st, const char **fs, const char **index_dir)
{
	if (fs)
		*fs = st->where.fs;
	if (index_dir)
		*index_dir = st->where.dir;
	return st->where.shared;
}

void ck_store_close(struct ck_store *st)
{
	if (!st)
		return;
	if (st->env)
		mdb_env_close(st->env);
	ck_layer_rules_free(st->rules);
	ck_pack_pool_free(st->pool);
	ck_index_place_clear(&st->where);
	free(st->path);
	free(st);
}

const char *ck_store_path(const struct ck_store *st)
{
	return st->path;
}

const struct ck_layer_rules *ck_store_layer_rules(const struct ck_store *st)
{
	return st->rules;
}
