/* Operations on the LMDB index that several writers share: the meta
 * database's counters and deleting every record under a key prefix. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "index.h"

int ck_meta_get_u64(MDB_txn *txn, struct ck_store *st, const char *name, uint64_t *out)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	int rc = mdb_get(txn, st->meta, &k, &v);

	*out = 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return ck_mdb_errno(rc);
	if (v.mv_size != 8)
		return -EIO;
	*out = ck_le64(v.mv_data);
	return 0;
}

int ck_meta_put_u64(MDB_txn *txn, struct ck_store *st, const char *name, uint64_t x)
{
	uint8_t b[8];
	MDB_val k = { strlen(name), (void *)name }, v = { 8, b };

	ck_set_le64(b, x);
	return ck_mdb_errno(mdb_put(txn, st->meta, &k, &v, 0));
}

int ck_mdb_delete_prefix(MDB_txn *txn, MDB_dbi dbi, const void *prefix, size_t plen)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, dbi, &cur);

	if (rc != 0)
		return ck_mdb_errno(rc);
	for (;;) {
		k.mv_size = plen;
		k.mv_data = (void *)prefix;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (rc != 0 || k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0)
			break;
		rc = mdb_cursor_del(cur, 0);
		if (rc != 0)
			break;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : ck_mdb_errno(rc);
}
