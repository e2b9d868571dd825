/* Listings: every one is a range scan over a key prefix in one read-only
 * transaction, so it sees one consistent state of the index and never
 * blocks an import that is writing at the same time. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "index.h"

/* Makes room for one more element of size elem in *v. */
static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
	void *nv;

	if (n < *cap)
		return 0;
	nv = ck_grow(*v, cap, elem, 16);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	return 0;
}

static int has_prefix(const MDB_val *k, const void *prefix, size_t n)
{
	return k->mv_size >= n && memcmp(k->mv_data, prefix, n) == 0;
}

typedef int (*decode_fn)(const MDB_val *k, const MDB_val *v, const char *root, void *out);
typedef void (*clear_fn)(void *item);

/* Decodes every record whose key starts with prefix into a new array. */
static int scan_prefix(MDB_txn *txn, MDB_dbi dbi, const void *prefix, size_t plen, const char *root,
		       decode_fn decode, clear_fn clear, size_t elem, void **out, size_t *n)
{
	MDB_cursor *cur;
	MDB_val k = { plen, (void *)prefix }, v;
	void *arr = NULL;
	size_t cnt = 0, cap = 0, i;
	int rc, op = MDB_SET_RANGE;

	*out = NULL;
	*n = 0;
	rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc != 0)
		return ck_mdb_errno(rc);
	for (;;) {
		rc = mdb_cursor_get(cur, &k, &v, (MDB_cursor_op)op);
		op = MDB_NEXT;
		if (rc == MDB_NOTFOUND || (rc == 0 && !has_prefix(&k, prefix, plen))) {
			rc = 0;
			break;
		}
		if (rc != 0) {
			rc = ck_mdb_errno(rc);
			break;
		}
		rc = grow(&arr, &cap, cnt, elem);
		if (rc == 0)
			rc = decode(&k, &v, root, (char *)arr + cnt * elem);
		if (rc < 0)
			break;
		cnt++;
	}
	mdb_cursor_close(cur);
	/* Never a NULL array, even when empty: callers may qsort or memcpy it. */
	if (rc == 0 && !arr && !(arr = calloc(1, elem)))
		rc = -ENOMEM;
	if (rc < 0) {
		for (i = 0; i < cnt; i++)
			clear((char *)arr + i * elem);
		free(arr);
		return rc;
	}
	*out = arr;
	*n = cnt;
	return 0;
}

static int begin_read(struct ck_store *st, MDB_txn **txn)
{
	return ck_mdb_errno(mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn));
}

/* The records of dbi keyed by an 8-byte id and what follows it: the files
 * of a checkpoint, the storages or the tensors of a file. */
static int scan_id(MDB_txn *txn, MDB_dbi dbi, uint64_t id, const char *root, decode_fn decode, clear_fn clear,
		   size_t elem, void **out, size_t *n)
{
	uint8_t prefix[8];

	ck_key_id(prefix, id);
	return scan_prefix(txn, dbi, prefix, sizeof(prefix), root, decode, clear, elem, out, n);
}

/* scan_id in a read-only transaction of its own. */
static int list_id(struct ck_store *st, MDB_dbi dbi, uint64_t id, decode_fn decode, clear_fn clear, size_t elem,
		   void **out, size_t *n)
{
	MDB_txn *txn;
	int rc = begin_read(st, &txn);

	if (rc < 0)
		return rc;
	rc = scan_id(txn, dbi, id, st->path, decode, clear, elem, out, n);
	mdb_txn_abort(txn);
	return rc;
}

/* ---- decoders with the scan_prefix signature ---- */

static int dec_ckpt(const MDB_val *k, const MDB_val *v, const char *root, void *out)
{
	return ck_rec_get_ckpt(k, v, root, out);
}

static int dec_file(const MDB_val *k, const MDB_val *v, const char *root, void *out)
{
	return ck_rec_get_file(k, v, root, out);
}

static int dec_storage(const MDB_val *k, const MDB_val *v, const char *root, void *out)
{
	(void)root;
	return ck_rec_get_storage(v, out);
}

static int dec_tensor(const MDB_val *k, const MDB_val *v, const char *root, void *out)
{
	(void)root;
	return ck_rec_get_tensor(v, out);
}

static void clr_ckpt(void *p) { ck_ckpt_info_clear(p); }
static void clr_file(void *p) { ck_file_info_clear(p); }
static void clr_storage(void *p) { ck_storage_info_clear(p); }
static void clr_tensor(void *p) { ck_tensor_info_clear(p); }

/* ---- public listings ---- */

int ck_store_list_series(struct ck_store *st, char ***names, size_t *n)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	char **arr = NULL;
	size_t cnt = 0, cap = 0;
	int rc, op = MDB_FIRST;

	*names = NULL;
	*n = 0;
	rc = begin_read(st, &txn);
	if (rc < 0)
		return rc;
	rc = ck_mdb_errno(mdb_cursor_open(txn, st->series, &cur));
	if (rc < 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, (MDB_cursor_op)op)) == 0) {
		op = MDB_NEXT;
		if (grow((void **)&arr, &cap, cnt, sizeof(*arr)) < 0 || !(arr[cnt] = malloc(k.mv_size + 1))) {
			rc = ENOMEM;
			break;
		}
		memcpy(arr[cnt], k.mv_data, k.mv_size);
		arr[cnt][k.mv_size] = '\0';
		cnt++;
	}
	rc = rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (rc == 0 && !arr && !(arr = calloc(1, sizeof(*arr))))
		rc = -ENOMEM;
	if (rc < 0) {
		ck_strv_free(arr, cnt);
		return rc;
	}
	*names = arr;
	*n = cnt;
	return 0;
}

int ck_txn_list_checkpoints(MDB_txn *txn, struct ck_store *st, const char *series, struct ck_ckpt_info **out,
			    size_t *n)
{
	struct ck_buf prefix = CK_BUF_INIT;
	int rc;

	*out = NULL;
	*n = 0;
	if (ck_key_ckpt_prefix(&prefix, series) < 0)
		return -ENOMEM;
	rc = scan_prefix(txn, st->ckpts, prefix.data, prefix.len, st->path, dec_ckpt, clr_ckpt, sizeof(**out), (void **)out,
			 n);
	ck_buf_free(&prefix);
	return rc;
}

int ck_store_list_checkpoints(struct ck_store *st, const char *series, struct ck_ckpt_info **out, size_t *n)
{
	MDB_txn *txn;
	int rc;

	*out = NULL;
	*n = 0;
	rc = begin_read(st, &txn);
	if (rc == 0) {
		rc = ck_txn_list_checkpoints(txn, st, series, out, n);
		mdb_txn_abort(txn);
	}
	return rc;
}

static int relpath_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ck_file_info *)a)->relpath, ((const struct ck_file_info *)b)->relpath);
}

/* Keys are in path order but for paths too long for a key (index.h):
 * listings are in path order, as manifests are. */
static int sorted_files(int rc, struct ck_file_info **f, const size_t *n)
{
	if (rc == 0 && *n > 1)
		qsort(*f, *n, sizeof(**f), relpath_cmp);
	return rc;
}

int ck_txn_list_files(MDB_txn *txn, struct ck_store *st, uint64_t ckpt_id, struct ck_file_info **out, size_t *n)
{
	int rc = scan_id(txn, st->files, ckpt_id, st->path, dec_file, clr_file, sizeof(**out), (void **)out, n);

	return sorted_files(rc, out, n);
}

int ck_store_list_files(struct ck_store *st, uint64_t ckpt_id, struct ck_file_info **out, size_t *n)
{
	int rc = list_id(st, st->files, ckpt_id, dec_file, clr_file, sizeof(**out), (void **)out, n);

	return sorted_files(rc, out, n);
}

int ck_store_list_storages(struct ck_store *st, uint64_t file_id, struct ck_storage_info **out, size_t *n)
{
	return list_id(st, st->storages, file_id, dec_storage, clr_storage, sizeof(**out), (void **)out, n);
}

int ck_store_list_tensors(struct ck_store *st, uint64_t file_id, struct ck_tensor_info **out, size_t *n)
{
	return list_id(st, st->tensors, file_id, dec_tensor, clr_tensor, sizeof(**out), (void **)out, n);
}

int ck_txn_find_checkpoint(MDB_txn *txn, struct ck_store *st, const char *series, const char *name,
			   struct ck_ckpt_info *out)
{
	struct ck_buf prefix = CK_BUF_INIT;
	struct ck_ckpt_info *v;
	size_t n, i;
	int rc;

	/* Names are not part of the key's sort order (steps are), so scan the
	 * series: it holds at most a few thousand checkpoints. */
	if (ck_key_ckpt_prefix(&prefix, series) < 0)
		return -ENOMEM;
	rc = scan_prefix(txn, st->ckpts, prefix.data, prefix.len, st->path, dec_ckpt, clr_ckpt, sizeof(*v), (void **)&v,
			 &n);
	ck_buf_free(&prefix);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (i = 0; i < n; i++) {
		if (rc == -ENOENT && strcmp(v[i].name, name) == 0) {
			*out = v[i];
			rc = 0;
		} else {
			ck_ckpt_info_clear(&v[i]);
		}
	}
	free(v);
	return rc;
}

int ck_store_find_checkpoint(struct ck_store *st, const char *series, const char *name, struct ck_ckpt_info **out)
{
	struct ck_ckpt_info *c = calloc(1, sizeof(*c));
	MDB_txn *txn;
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	rc = begin_read(st, &txn);
	if (rc == 0) {
		rc = ck_txn_find_checkpoint(txn, st, series, name, c);
		mdb_txn_abort(txn);
	}
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int ck_store_series_pattern(struct ck_store *st, const char *series, char **pattern)
{
	MDB_val k = { strlen(series), (void *)series }, v;
	MDB_txn *txn;
	int rc = begin_read(st, &txn);

	*pattern = NULL;
	if (rc < 0)
		return rc;
	rc = ck_mdb_errno(mdb_get(txn, st->series, &k, &v));
	if (rc == 0)
		rc = ck_rec_get_series(&v, pattern);
	mdb_txn_abort(txn);
	return rc;
}
