/* Private to src/store: writing one imported checkpoint into the index. */
#ifndef CKPTFS_STORE_COMMIT_H
#define CKPTFS_STORE_COMMIT_H

#include <stddef.h>

#include "ckptfs/store.h"
#include "ingest.h"

/* Replaces the records of checkpoint (ck->series, ck->name) with ck and
 * files in one write transaction; sets ck->id and every file's ids.
 * pattern (may be NULL) becomes the series' stored step pattern; NULL
 * keeps the stored one.  0 or -errno with err. */
int ck_commit_checkpoint(struct ck_store *st, const char *pattern, struct ck_ckpt_info *ck,
			 struct ck_ingest *files, size_t n, struct ck_error *err);

#endif
