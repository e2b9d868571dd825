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

int ck_store_open_index(struct ck_store *st, const char *idx, int create, struct ck_error *err)
{
	unsigned int flags = MDB_NOTLS | (st->readonly ? MDB_RDONLY : 0);
	unsigned int dbflags = create ? MDB_CREATE : 0;
	MDB_txn *txn = NULL;
	int rc;

	rc = mdb_env_create(&st->env);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(st->env, 16);
	if (rc == 0)
		rc = mdb_env_set_mapsize(st->env, CK_STORE_MAPSIZE);
	if (rc == 0)
		rc = mdb_env_open(st->env, idx, flags, 0644);
	if (rc == 0) {
		int dead;

		/* Free reader slots of processes that died (kill -9 of a daemon):
		 * a stale slot pins old pages and makes the index grow. */
		mdb_reader_check(st->env, &dead);
	}
	if (rc == 0)
		rc = mdb_txn_begin(st->env, NULL, create ? 0 : MDB_RDONLY, &txn);
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
	if (rc == 0 && create) {
		MDB_val k = { 6, "format" }, v = { 1, "1" };

		rc = mdb_put(txn, st->meta, &k, &v, 0);
	} else if (rc == 0) {
		MDB_val k = { 6, "format" }, v;

		rc = mdb_get(txn, st->meta, &k, &v);
		if (rc == 0 && (v.mv_size != 1 || *(const char *)v.mv_data != '1')) {
			mdb_txn_abort(txn);
			return ck_fail(err, EPROTONOSUPPORT, "%s: unsupported index format", st->path);
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
	char *idx = NULL, *marker = NULL, *data = NULL;
	struct stat sb;
	int rc;

	/* Only the store's owner reads the index, manifests and the
	 * checkpoints under it; users go through the mount (ckptctl(1)). */
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return ck_fail(err, errno, "%s: %s", dir, strerror(errno));
	marker = ck_path_join(dir, CK_STORE_MARKER_FILE);
	idx = ck_path_join(dir, CK_STORE_INDEX_DIR);
	data = ck_path_join(dir, CK_STORE_DATA_DIR);
	if (!marker || !idx) {
		rc = ck_fail(err, ENOMEM, "out of memory");
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
	if (mkdir(idx, 0755) < 0) {
		rc = ck_fail(err, errno, "%s: %s", idx, strerror(errno));
		goto out;
	}
	st.path = (char *)dir;
	rc = ck_store_open_index(&st, idx, 1, err);
	if (st.env)
		mdb_env_close(st.env);
	if (rc == 0)
		rc = write_marker(dir, err);
out:
	free(marker);
	free(idx);
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

int ck_store_open(const char *dir, int readonly, struct ck_store **out, struct ck_error *err)
{
	struct ck_store *st;
	char *layers, *idx;
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
	 * whichever directory a command was run from. */
	st->path = realpath(dir, NULL);
	if (!st->path) {
		rc = errno;
		ck_pack_pool_free(st->pool);
		free(st);
		return ck_fail(err, rc, "%s: %s", dir, strerror(rc));
	}
	idx = ck_path_join(dir, CK_STORE_INDEX_DIR);
	if (!idx) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto fail;
	}
	rc = check_index_present(dir, idx, err);
	if (rc == 0)
		rc = ck_store_open_index(st, idx, 0, err);
	free(idx);
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
	if (!readonly)
		recover(st);
	*out = st;
	return 0;
fail:
	ck_store_close(st);
	return rc;
}

void ck_store_close(struct ck_store *st)
{
	if (!st)
		return;
	if (st->env)
		mdb_env_close(st->env);
	ck_layer_rules_free(st->rules);
	ck_pack_pool_free(st->pool);
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
