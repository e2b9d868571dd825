/* What composites draw from, and deleting checkpoints end to end.
 *
 * A deleted checkpoint (ck_store_delete_checkpoint) is hidden, but its
 * files stay versions of the composites of newer checkpoints.  A file of a
 * deleted checkpoint can go (ck_store_reclaim) only when no composite of a
 * live checkpoint draws from it; ck_view_version_refs decides that with
 * the view's own composite builder, and ck_delete_checkpoint strings the
 * three steps together.  Garbage collection reuses ck_view_version_refs.
 */
#ifndef CKPTFS_REFS_H
#define CKPTFS_REFS_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/error.h"
#include "ckptfs/store.h"
#include "ckptfs/view.h"

/* One file of a deleted checkpoint. */
struct ck_version_ref {
	char *ckpt;          /* the deleted checkpoint: "checkpoint-10" */
	char *relpath;       /* its path there ("" for a single-file checkpoint) */
	char *src_path;      /* the physical file */
	uint64_t file_id;    /* in the index the view read */
	uint64_t size;
	int owned;           /* the store's own copy (STORE/data/...): unlinked when reclaimed */
	int used;            /* a live composite draws from it: it stays */
};

/* Every file of the deleted checkpoints of series (also_deleted, when not
 * NULL, names a live checkpoint to count as deleted: a dry run), and
 * whether a composite of a live checkpoint of the series draws from it.
 * A file is used when dropping it would change any byte of any live
 * composite: first what the composite's extents read (its sources), then,
 * for the files left, a rebuild of each composite without them, which
 * catches what a merge takes from a version besides tensor bytes (a dict's
 * key order, a value that is not a tensor).  A composite that cannot be
 * built keeps every version it has.  Builds composites (parses pickles),
 * reads no tensor bytes.  0 and *out (free with ck_version_refs_free),
 * -ENOENT for an unknown series, or -errno. */
int ck_view_version_refs(struct ck_view *v, const char *series, const char *also_deleted,
			 struct ck_version_ref **out, size_t *n);
void ck_version_refs_free(struct ck_version_ref *r, size_t n);

struct ck_delete_opts {
	int dry_run;         /* only say what would be hidden, kept and freed */
};

/* Deletes checkpoint series/name of the store at store_dir:
 *   1. ck_store_delete_checkpoint (it is hidden from now on);
 *   2. ck_view_version_refs over a view opened afterwards;
 *   3. ck_store_reclaim of every file of the series' deleted checkpoints
 *      that nothing draws from, again from 2 when the series changed
 *      meanwhile (a commit, another deletion).
 * The store and the view are opened one after the other, never both at
 * once (LMDB allows one environment per process), so a process that holds
 * a view of this store must run this in a child.  report (may be NULL)
 * gets what ck_store_reclaim reports.  *refs (may be NULL; free with
 * ck_version_refs_free) gets the deleted checkpoints' files as step 2 saw
 * them: used ones stay.  A failure in step 3 leaves the checkpoint deleted
 * (a later deletion reclaims what it could not).  With name NULL, step 1
 * is skipped: steps 2 and 3 reclaim what earlier deletions of the series
 * left (a deletion killed between steps 1 and 3 leaves its checkpoint
 * deleted with all its files).  0 or -errno with err: -ENOENT when there
 * is no such live checkpoint. */
int ck_delete_checkpoint(const char *store_dir, const char *series, const char *name,
			 const struct ck_delete_opts *opts, ck_import_report_fn report, void *ctx,
			 struct ck_version_ref **refs, size_t *nrefs, struct ck_error *err);

#endif
