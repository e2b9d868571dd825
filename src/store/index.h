/* Private to src/store and the packs in it (src/packstore): the open store
 * and the LMDB record codec. The schema is described in docs/format.md;
 * keep the two in step. */
#ifndef CKPTFS_STORE_INDEX_H
#define CKPTFS_STORE_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#include "ckptfs/buf.h"
#include "ckptfs/store.h"

#define CK_STORE_MARKER "ckptfs-store 1\n"
#define CK_STORE_MARKER_FILE CK_STORE_MARKER_NAME
#define CK_STORE_INDEX_DIR "index"
#define CK_STORE_LAYERS_FILE "layers.conf"
#define CK_STORE_ID_FILE "store-id"          /* 32 lowercase hex digits and a newline */
#define CK_STORE_LOCK_FILE "index.lock"      /* writers: shared; reindex: exclusive */
#define CK_STORE_COMMIT_LOCK "commit.lock"   /* exclusive: staged commits, recovery, packs, deletion */
#define CK_STORE_MAINTENANCE_LOCK "maintenance.lock"   /* the lease: one compaction or gc at a time */
#define CK_STORE_MAPSIZE (64ULL << 30)   /* sparse: LMDB only reserves address space */
#define CK_STORE_FORMAT 1                /* version byte of every record */
#define CK_CKPT_FLAG_FILE    0x01        /* checkpoint record flags */
#define CK_CKPT_FLAG_DELETED 0x02

/* Named databases. */
#define CK_DB_META     "meta"
#define CK_DB_SERIES   "series"
#define CK_DB_CKPTS    "ckpts"
#define CK_DB_FILES    "files"
#define CK_DB_STORAGES "storages"
#define CK_DB_TENSORS  "tensors"

struct ck_pack_pool;

/* Where a store's index lives (index_place.c): STORE/index on a local
 * filesystem, a node-local directory for a store on a shared one. */
struct ck_index_place {
	int shared;            /* the store is on a network or distributed filesystem */
	const char *fs;        /* what kind ("local", "nfs", "fuse", ...) */
	char *dir;             /* the LMDB environment's directory */
	char *lock;            /* its lock file: commits shared, rebuilds exclusive */
	char *parent;          /* the directory holding both (rebuilds swap in there) */
};

/* writable: the store's id may be made when it has none.  0 or -errno with err. */
int ck_index_place_find(const char *store, int writable, struct ck_index_place *p, struct ck_error *err);
void ck_index_place_clear(struct ck_index_place *p);
/* The store's id (STORE/store-id) into out; create: make one when there is
 * none.  0, -ENOENT, or -errno with err. */
int ck_store_id(const char *store, int create, char out[33], struct ck_error *err);

struct ck_store {
	char *path;
	int readonly;          /* opened to read: the store is not changed */
	struct ck_index_place where;
	int index_rw;          /* the environment is writable: the index can follow the
				  store (follow.c) even when readonly */
	uint64_t journal_hint; /* the highest journal entry this handle saw (journal.c) */
	MDB_env *env;
	MDB_dbi meta, series, ckpts, files, storages, tensors;
	struct ck_layer_rules *rules;
	MDB_dbi chunks, fmaps;   /* the packed store (chunk_table.h) */
	int packs_ready;         /* chunks and fmaps exist (a read-only open of an
				  * older index may lack them: nothing is packed) */
	struct ck_pack_pool *pool;   /* decoders and buffers for packed reads (include/ckptfs/pack_pool.h) */
};

/* paths.c: how the store records a path.  ck_store_rel_path: path relative
 * to root when it lies under it (a pointer into path), else path itself.
 * ck_store_abs_path: a recorded path made absolute against root (allocated,
 * NULL when out of memory); _inplace replaces *recorded (0 or -ENOMEM). */
const char *ck_store_rel_path(const char *root, const char *path);
char *ck_store_abs_path(const char *root, const char *recorded);
int ck_store_abs_path_inplace(const char *root, char **recorded);

/* LMDB status (0, MDB_* or errno) to -errno. */
int ck_mdb_errno(int rc);

/* index_ops.c: each runs inside the caller's transaction (a write
 * transaction for _put and _delete_prefix), on the thread that owns it. */
/* The meta database's counter name (an 8-byte little-endian value): 0 and
 * *out (0 when absent), -EIO when the value is not 8 bytes, or -errno. */
int ck_meta_get_u64(MDB_txn *txn, struct ck_store *st, const char *name, uint64_t *out);
/* Sets the counter name to x: 0 or -errno. */
int ck_meta_put_u64(MDB_txn *txn, struct ck_store *st, const char *name, uint64_t x);
/* Deletes every record of dbi whose key starts with the plen bytes at
 * prefix (none is not an error): 0 or -errno. */
int ck_mdb_delete_prefix(MDB_txn *txn, MDB_dbi dbi, const void *prefix, size_t plen);

/* store.c: 0 if dir has the marker of a store this code reads. */
int ck_store_check_marker(const char *dir, struct ck_error *err);
/* Opens (create: makes) the LMDB environment in directory idx with its
 * named databases into st->env and the dbi fields: writable when create
 * or st->index_rw (which is cleared when only reading is allowed). */
int ck_store_open_index(struct ck_store *st, const char *idx, int create, struct ck_error *err);
/* reindex.c: builds the index at where from the manifests when it has
 * none yet (a node-local index's first open); a process of the node doing
 * it already is waited for.  0 or -errno with err. */
int ck_index_build(const char *store, const struct ck_index_place *where, struct ck_error *err);
/* Whether a temporary file a writer left (a manifest's, a packmap's) may be
 * removed by one holding this index's lock exclusive: always on a local
 * store; on a shared one, where writers of other nodes do not take this
 * node's lock, only once it is older than any write takes. */
struct stat;
int ck_store_temp_stale(int shared, const struct stat *sb);
/* chunk_table.c: opens the packed store's databases, creating them when st
 * is writable (an older index gets them on its first writable open). */
int ck_pack_dbs_open(struct ck_store *st, struct ck_error *err);
/* chunk_rebuild.c: rebuilds the packed state of the index from packmaps and packs: every
 * packmap whose maps the index lacks is applied, chunks it names that the
 * index does not locate are found by scanning the packs.  Used by
 * recovery (take_lock: the index lock is taken shared) and reindex (which
 * holds it exclusive).  Returns the number of file maps applied, or
 * -errno with err (the first failure; the other packmaps were tried). */
int ck_pack_rebuild(struct ck_store *st, int take_lock, struct ck_error *err);
/* The same for the packmap of one checkpoint, in the caller's write
 * transaction (following the store: follow.c). */
int ck_pack_rebuild_ckpt(struct ck_store *st, MDB_txn *txn, const char *series, const char *name,
			 struct ck_error *err);

/* The store's lock files (locks.c), all flock()ed, blocking:
 *  - the index's lock (st->where.lock: STORE/index.lock, or node-local):
 *    commits hold it shared, reindex exclusive, so that no commit goes
 *    into an index being replaced (ck_store_lock);
 *  - STORE/commit.lock: staged commits, recovery, compaction, gc and
 *    deletion hold it exclusive (ck_store_commit_lock).
 * Each returns 0 with the locked descriptor in *fd (give it to
 * ck_store_unlock), or -errno with err. */
int ck_lock_path(const char *path, int exclusive, int *fd, struct ck_error *err);
int ck_store_lock_file(const char *dir, const char *name, int exclusive, int *fd, struct ck_error *err);
int ck_store_lock(const struct ck_store *st, int exclusive, int *fd, struct ck_error *err);
int ck_store_commit_lock(const struct ck_store *st, int *fd, struct ck_error *err);
/* STORE/maintenance.lock, the lease of compaction and gc: one of them at a
 * time in the whole store, whichever node runs it (exclusive flock, which
 * every supported shared filesystem carries between its clients; held for
 * a whole run, around the commit lock of each step).  Waits, saying who
 * holds it ("pid N on HOST", kept in the file). */
int ck_store_maintenance_lock(const struct ck_store *st, int *fd, struct ck_error *err);
void ck_store_unlock(int fd);
/* 0 if st's environment is still STORE/index (not replaced by a reindex
 * since st was opened), -ESTALE with err otherwise. */
int ck_store_index_current(struct ck_store *st, struct ck_error *err);

/* Keys (big-endian numbers so that byte order is numeric order):
 *   ckpts:    series NUL step(u64, sign bit flipped) name
 *   files:    ckpt_id(u64) relpath
 *   storages: file_id(u64) index(u32)
 *   tensors:  file_id(u64) index(u32)
 * A name or relpath that would make the key longer than LMDB's limit
 * (CK_KEY_MAX) is cut where the key reaches CK_KEY_MAX - 16 bytes and
 * followed by its XXH3-128; its record holds it whole. */
#define CK_KEY_MAX 511
int ck_key_ckpt(struct ck_buf *k, const char *series, int64_t step, const char *name);
int ck_key_ckpt_prefix(struct ck_buf *k, const char *series);
int ck_key_file(struct ck_buf *k, uint64_t ckpt_id, const char *relpath);
void ck_key_id(uint8_t out[8], uint64_t id);
void ck_key_id_index(uint8_t out[12], uint64_t id, uint32_t index);
uint64_t ck_key_get_id(const uint8_t *p);

/* Values: a fixed little-endian header starting with the format byte, then
 * the variable-length strings it announces.  Encoders append to b;
 * decoders return 0, -EIO for a record they cannot read, or -ENOMEM. */
int ck_rec_put_series(struct ck_buf *b, const char *pattern, int64_t created_ns);
int ck_rec_get_series(const MDB_val *v, char **pattern);
int ck_rec_get_series_full(const MDB_val *v, char **pattern, int64_t *created_ns);

/* Checkpoint and file records hold their source path as the store records
 * paths (paths.c): root is the store's root (NULL: paths as they are). */
int ck_rec_put_ckpt(struct ck_buf *b, const char *root, const struct ck_ckpt_info *c, int64_t imported_ns);
int ck_rec_get_ckpt(const MDB_val *k, const MDB_val *v, const char *root, struct ck_ckpt_info *out);

int ck_rec_put_file(struct ck_buf *b, const char *root, const struct ck_file_info *f, uint32_t nstorages);
int ck_rec_get_file(const MDB_val *k, const MDB_val *v, const char *root, struct ck_file_info *out);

int ck_rec_put_storage(struct ck_buf *b, const struct ck_storage_info *s);
int ck_rec_get_storage(const MDB_val *v, struct ck_storage_info *out);

int ck_rec_put_tensor(struct ck_buf *b, const struct ck_tensor_info *t);
int ck_rec_get_tensor(const MDB_val *v, struct ck_tensor_info *out);

/* Frees the strings of one info (not the struct itself). */
void ck_ckpt_info_clear(struct ck_ckpt_info *c);

/* Store-internal listing inside an open transaction. */
int ck_txn_find_checkpoint(MDB_txn *txn, struct ck_store *st, const char *series, const char *name,
			   struct ck_ckpt_info *out);
/* Checkpoints of a series in step order, deleted ones included. */
int ck_txn_list_checkpoints(MDB_txn *txn, struct ck_store *st, const char *series, struct ck_ckpt_info **out,
			    size_t *n);
int ck_txn_list_files(MDB_txn *txn, struct ck_store *st, uint64_t ckpt_id, struct ck_file_info **out, size_t *n);

#endif
