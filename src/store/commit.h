/* Private to src/store: writing one checkpoint into the index. */
#ifndef CKPTFS_STORE_COMMIT_H
#define CKPTFS_STORE_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/store.h"
#include "ckptfs/ingest.h"
#include <lmdb.h>

/* Replaces the records of checkpoint (ck->series, ck->name) with ck and
 * files in one write transaction, and its manifest before that commits
 * (holding STORE/index.lock shared); sets ck->id and every file's ids.
 * pattern (may be NULL) becomes the series' stored step pattern; NULL
 * keeps the stored one.  0 or -errno with err. */
int ck_commit_checkpoint(struct ck_store *st, const char *pattern, struct ck_ckpt_info *ck,
			 struct ck_ingest *files, size_t n, struct ck_error *err);

/* In the caller's write transaction: the records of checkpoint ck and its
 * files, replacing those of an earlier checkpoint of the same (series,
 * name) (files of the same identity keep their ids); sets ck->id and the
 * files' ids.  0 or -errno. */
int ck_commit_put(MDB_txn *txn, struct ck_store *st, struct ck_ckpt_info *ck, struct ck_ingest *files, size_t n,
		  int64_t imported_ns);

/* For reindex, into an index being built (no manifest is written, no lock
 * is taken): the records of the checkpoint of m, with its import time;
 * sets the ids in m.  And a series record as a manifest gives it. */
struct ck_manifest;
int ck_commit_restore(struct ck_store *st, struct ck_manifest *m, struct ck_error *err);
int ck_commit_series(struct ck_store *st, const char *series, const char *pattern, int64_t created_ns,
		     struct ck_error *err);

#endif
