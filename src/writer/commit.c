/* Commits from the mount: claims, the commit child, and the view and the
 * kernel catching up afterwards (include/ckptfs/writer.h).
 *
 * While a commit runs its directory is claimed (ck_staging_claim): writes
 * into it fail with EBUSY, so the validation sees the bytes it commits.
 * Between the move of the directory into the store and the view's
 * refresh neither the in-progress area nor the view shows it; a marker,
 * grace or idle commit therefore lets the view catch up before it releases
 * the claim, and a lookup that finds the name in neither place waits for
 * the claim.  A rename or xattr commit needs none of that: the kernel
 * holds the directory's lock until the request is answered, after the
 * catch-up.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/log.h"
#include "child.h"
#include "writer_int.h"

/* How many changed directories one refresh reports. */
#define MAX_CHANGED 64

void ck_writer_catch_up(struct ck_writer *w)
{
	uint64_t changed[MAX_CHANGED];
	size_t n = 0;
	int rc = ck_view_refresh(w->view, changed, MAX_CHANGED, &n);

	if (rc)
		ck_warn("after a commit: cannot read the index: %s", strerror(-rc));
	if (n && w->notify.inodes_changed)
		w->notify.inodes_changed(w->notify.ctx, changed, n);
}

/* Committed or quarantined, the directory at path left the staging area:
 * its node goes too. */
static void forget_if_gone(struct ck_writer *w, const char *path, const char *series, const char *name)
{
	struct stat st;

	if (path && lstat(path, &st) != 0 && errno == ENOENT)
		ck_staging_removed(w->staging, 0, series, name);
}

int ck_writer_commit_now(struct ck_writer *w, const char *series, const char *name, const char *final)
{
	char *path = ck_staging_top_path(w->staging, series, name);
	int rc = ck_staging_claim(w->staging, series, name, 0);

	if (rc == 0) {
		rc = ckw_commit_in_child(w, series, name, final);
		ck_staging_unclaim(w->staging, series, name);
	}
	forget_if_gone(w, path, series, name);
	free(path);
	ck_writer_catch_up(w);
	return rc;
}

int ck_writer_commit_dir(struct ck_writer *w, const char *series, const char *name, int need_closed)
{
	char *path = ck_staging_top_path(w->staging, series, name);
	struct stat st;
	int64_t step;
	int rc;

	if (!path)
		return -ENOMEM;
	if (ck_writer_step_of(w, series, name, &step) != 0 || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		free(path);
		return -EAGAIN;
	}
	rc = ck_staging_claim(w->staging, series, name, need_closed);
	if (rc) {
		free(path);
		return rc == -EBUSY ? -EAGAIN : rc;
	}
	/* Another commit of it may have ended between the check and the claim. */
	if (lstat(path, &st) != 0) {
		ck_staging_unclaim(w->staging, series, name);
		free(path);
		return -EAGAIN;
	}
	rc = ckw_commit_in_child(w, series, name, name);
	/* The view catches up while the directory is still claimed: a lookup
	 * of its name meanwhile, which finds it neither staged nor in the
	 * view, waits for the unclaim instead of failing with ENOENT. */
	ck_writer_catch_up(w);
	ck_staging_unclaim(w->staging, series, name);
	forget_if_gone(w, path, series, name);
	free(path);
	/* After the unclaim: a lookup waiting for it holds the directory's
	 * lock, which the kernel's invalidations take. */
	ckw_notify_names(w, series, name, name);
	return rc;
}
