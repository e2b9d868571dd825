/* Deleting a checkpoint end to end (include/ckptfs/refs.h): mark it in the
 * store, ask a fresh view what the series' deleted checkpoints are still
 * drawn from for, and reclaim the rest.  The store is opened writable and
 * the view (read-only) one after the other: LMDB allows one environment
 * per process at a time.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/refs.h"

#define MAX_ATTEMPTS 5

/* The deletion itself (unless dry), and the series stamp it left. */
static int mark(const char *store_dir, const char *series, const char *name, int dry, int first,
		uint64_t *stamp, struct ck_error *err)
{
	struct ck_ckpt_info *ck = NULL;
	struct ck_store *st;
	int rc = ck_store_open(store_dir, dry, &st, err);

	if (rc < 0)
		return rc;
	if (!name) {
		/* only reclaiming what earlier deletions left */
	} else if (dry && first) {
		rc = ck_store_find_checkpoint(st, series, name, &ck);
		if (rc == 0 && ck->deleted)
			rc = -ENOENT;
		if (rc < 0)
			ck_fail(err, -rc, "%s/%s: %s", series, name,
				rc == -ENOENT ? "no such checkpoint" : strerror(-rc));
		ck_ckpt_info_free(ck, ck ? 1 : 0);
	} else if (first) {
		rc = ck_store_delete_checkpoint(st, series, name, err);
	}
	if (rc == 0) {
		rc = ck_store_series_stamp(st, series, stamp);
		if (rc < 0)
			ck_fail(err, -rc, "%s: cannot read the index: %s", store_dir, strerror(-rc));
	}
	ck_store_close(st);
	return rc;
}

static int refs_of(const char *store_dir, const char *series, const char *also, struct ck_version_ref **refs,
		   size_t *n, struct ck_error *err)
{
	struct ck_view_opts vo = { .verify = CK_VERIFY_NONE };
	struct ck_view *v;
	int rc = ck_view_open(store_dir, &vo, &v, err);

	if (rc < 0)
		return rc;
	rc = ck_view_version_refs(v, series, also, refs, n);
	if (rc < 0)
		ck_fail(err, -rc, "%s: cannot tell what the composites of series %s draw from: %s", store_dir,
			series, strerror(-rc));
	ck_view_close(v);
	return rc;
}

static int reclaim(const char *store_dir, const char *series, uint64_t stamp, const struct ck_version_ref *refs,
		   size_t n, ck_import_report_fn report, void *ctx, struct ck_error *err)
{
	uint64_t *ids = calloc(n + 1, sizeof(*ids));
	struct ck_store *st;
	size_t k = 0;
	int rc;

	if (!ids)
		return ck_fail(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (!refs[i].used)
			ids[k++] = refs[i].file_id;
	rc = ck_store_open(store_dir, 0, &st, err);
	if (rc == 0) {
		rc = ck_store_reclaim(st, series, stamp, ids, k, report, ctx, err);
		ck_store_close(st);
	}
	free(ids);
	return rc;
}

int ck_delete_checkpoint(const char *store_dir, const char *series, const char *name,
			 const struct ck_delete_opts *opts, ck_import_report_fn report, void *ctx,
			 struct ck_version_ref **refs, size_t *nrefs, struct ck_error *err)
{
	int dry = opts && opts->dry_run;
	struct ck_version_ref *r = NULL;
	size_t n = 0;
	int rc = -EAGAIN;

	if (refs) {
		*refs = NULL;
		*nrefs = 0;
	}
	for (int attempt = 0; attempt < MAX_ATTEMPTS && rc == -EAGAIN; attempt++) {
		uint64_t stamp = 0;

		ck_version_refs_free(r, n);
		r = NULL;
		n = 0;
		rc = mark(store_dir, series, name, dry, attempt == 0, &stamp, err);
		if (rc == 0)
			rc = refs_of(store_dir, series, dry ? name : NULL, &r, &n, err);
		if (rc == 0 && !dry)
			rc = reclaim(store_dir, series, stamp, r, n, report, ctx, err);
	}
	if (rc > 0)
		rc = 0;
	if (rc == 0 && refs) {
		*refs = r;
		*nrefs = n;
	} else {
		ck_version_refs_free(r, n);
	}
	return rc;
}
