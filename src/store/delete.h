/* Private to src/store: deleting checkpoints (docs/format.md, "Deleting
 * checkpoints").  A tombstone is the durable record that a checkpoint was
 * deleted.
 *
 * STORE/manifests/<series>/<file>.tombstone sits beside <file>.manifest and
 * names the import time of the manifest it deletes, so that a checkpoint
 * imported again under the same name is not taken for deleted:
 *
 *   ckptfs-tombstone 1
 *   imported-ns=1712345679000000000 deleted-ns=1712345680000000000
 *   checksum xxh3-128=<32 hex digits: XXH3-128 of every byte before this line>
 */
#ifndef CKPTFS_STORE_DELETE_H
#define CKPTFS_STORE_DELETE_H

#include <stdint.h>
#include <lmdb.h>

#include "ckptfs/buf.h"
#include "ckptfs/error.h"
#include "ckptfs/store.h"

#define CK_TOMBSTONE_SUFFIX ".tombstone"

struct ck_manifest;

/* The tombstone path beside a manifest path ("x.manifest" -> "x.tombstone"), or NULL. */
char *ck_tombstone_path(const char *manifest_path);

/* Tombstone text for a checkpoint imported at imported_ns, deleted at deleted_ns. */
int ck_tombstone_format(struct ck_buf *out, int64_t imported_ns, int64_t deleted_ns);
/* Parses untrusted tombstone text: 0 and *imported_ns (and *deleted_ns
 * unless NULL); -EBADMSG for a missing or wrong checksum (torn, edited),
 * -EINVAL for anything else out of place, with err.  What parses is what
 * ck_tombstone_format writes, byte for byte. */
int ck_tombstone_parse(const char *text, size_t len, int64_t *imported_ns, int64_t *deleted_ns,
		       struct ck_error *err);

/* Writes the tombstone at path durably (temporary file, fsync, rename,
 * fsync of the directory).  0 or -errno with err. */
int ck_tombstone_write(const char *path, int64_t imported_ns, struct ck_error *err);
/* Removes path (a manifest or tombstone) and syncs its directory; a
 * missing file is not an error.  0 or -errno. */
int ck_tombstone_unlink(const char *path);

/* 1 when a valid tombstone beside the manifest of m deletes it (same
 * import time), 0 when there is none or it is stale, damaged or
 * unreadable (a damaged tombstone is logged). */
int ck_tombstone_applies(const char *store, const struct ck_manifest *m);

/* Reads the tombstone at path: 0 and *imported_ns, -ENOENT when there is
 * none, or -errno with err. */
int ck_tombstone_load(const char *path, int64_t *imported_ns, struct ck_error *err);

/* A write transaction on the current index, holding STORE/index.lock
 * shared (no reindex replaces the index meanwhile) and, with commit_lock,
 * STORE/commit.lock first (serialises with staged commits and recovery,
 * which act on STORE/data).  ck_delete_end aborts what is not committed
 * (set txn to NULL after a commit) and unlocks. */
struct ck_delete_txn {
	int commit_fd, index_fd;
	MDB_txn *txn;
};
int ck_delete_begin(struct ck_store *st, struct ck_delete_txn *lt, int commit_lock, struct ck_error *err);
void ck_delete_end(struct ck_delete_txn *lt);

/* Flags checkpoint (series, name) deleted in the index, writing its
 * tombstone first when write_tombstone (recovery rolls forward one that
 * is there already).  The caller holds STORE/commit.lock. */
int ck_delete_mark(struct ck_store *st, const char *series, const char *name, int write_tombstone,
		   struct ck_error *err);

/* Index-side pieces shared by delete.c and delete_finish.c (in an open
 * write transaction): drop one file's records; drop a checkpoint record
 * and whatever file records it still has. */
int ck_delete_file_records(MDB_txn *txn, struct ck_store *st, const struct ck_file_info *f);
int ck_delete_ckpt_records(MDB_txn *txn, struct ck_store *st, const struct ck_ckpt_info *ck);
/* realpath(STORE)/data/<series>/<name> when ck is a checkpoint the store
 * owns (a staged commit lives there), else NULL (imported in place). */
char *ck_delete_owned_dir(struct ck_store *st, const struct ck_ckpt_info *ck);
/* Removes the packmap of a checkpoint whose record and manifest are gone
 * (its file maps went with the record).  One left behind by a crash is
 * harmless: a packmap applies only to files of its recorded identity. */
void ck_delete_drop_packmap(struct ck_store *st, const struct ck_ckpt_info *ck);
/* Whether path lies under the owned directory dir (NULL: never). */
int ck_delete_is_owned(const char *dir, const char *path);

/* Finishes deleted checkpoint ck after its files were dropped: index
 * records its manifest no longer lists are dropped, store-owned files
 * that nothing lists are unlinked (each reported CK_RECLAIM_DROPPED),
 * emptied directories removed, and a checkpoint left with no file is
 * removed altogether (CK_RECLAIM_REMOVED).  Holding STORE/commit.lock.
 * 1 when something changed, 0, or -errno with err. */
int ck_delete_finish(struct ck_store *st, const struct ck_ckpt_info *ck, ck_import_report_fn report,
		     void *ctx, struct ck_error *err);

/* Recovery (run by ck_store_recover, holding STORE/commit.lock): rolls
 * deletions and reclaims cut short by a crash forward (a tombstone whose
 * checkpoint the index still has live, files the manifest dropped that
 * the index still lists, store-owned files nothing lists any more, a
 * deleted checkpoint left without files or manifest), and removes stale
 * tombstones and temporary files.  Returns the number of checkpoints
 * changed, or -errno with err (the first failure; the rest were tried). */
int ck_delete_recover(struct ck_store *st, ck_import_report_fn report, void *ctx, struct ck_error *err);

#endif
