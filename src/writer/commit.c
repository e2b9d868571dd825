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
 *
 * Other nodes: the child's commit waits for writers of the directory on
 * other nodes to close their files (its writers lock, held exclusive;
 * ck_store_commit_staged), and fails with -EBUSY when they do not within
 * CK_WRITERS_COMMIT_WAIT_MS.  Another node may commit the directory first:
 * the child's -EALREADY is a commit done, and the view catches up to show
 * it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/log.h"
#include "ckptfs/store.h"
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

/* -EALREADY: another node committed it. */
static int committed_elsewhere(const char *series, const char *name, int rc)
{
	if (rc != -EALREADY)
		return rc;
	ck_info("%s/%s: committed by another node", series, name);
	return 0;
}

int ck_writer_moved_elsewhere(struct ck_writer *w, const char *series, const char *name)
{
	char *path;
	struct stat st;
	int gone;

	if (!ck_staging_known(w->staging, series, name))
		return 0;
	path = ck_staging_top_path(w->staging, series, name);
	gone = path && lstat(path, &st) != 0 && errno == ENOENT;
	free(path);
	if (!gone)
		return 0;
	/* The commit that moved it may not have recorded it yet. */
	if (ck_writers_wait(w->store, series, name, CK_WRITERS_COMMIT_WAIT_MS) == -EBUSY)
		ck_warn("%s/%s left staging, but its commit still runs after %u ms", series, name,
			CK_WRITERS_COMMIT_WAIT_MS);
	ck_staging_removed(w->staging, 0, series, name);
	ck_writer_catch_up(w);
	return 1;
}

int ck_writer_commit_now(struct ck_writer *w, const char *series, const char *name, const char *final)
{
	char *path = ck_staging_top_path(w->staging, series, name);
	int rc = ck_staging_claim(w->staging, series, name, 0);

	if (rc == 0) {
		/* This mount's own handles, whose releases may not have come
		 * yet, must not hold the commit up (flock locks of one process
		 * conflict too); the claim keeps new ones out. */
		ck_staging_writers_off(w->staging, series, name);
		rc = committed_elsewhere(series, name,
					 ckw_commit_in_child(w, series, name, final, CK_WRITERS_COMMIT_WAIT_MS));
		ck_staging_writers_on(w->staging, series, name);
		if (rc == 0)
			ckw_notify_committed(w, series, final);
		ck_staging_unclaim(w->staging, series, name);
	}
	forget_if_gone(w, path, series, name);
	free(path);
	ck_writer_catch_up(w);
	return rc;
}

/* Whether no other node (or process) writes into series/name now. */
static int writers_gone(struct ck_writer *w, const char *series, const char *name)
{
	int fd, rc = ck_writers_exclusive(w->store, series, name, 0, &fd, NULL);

	ck_writers_unlock(fd);
	return rc != -EBUSY;   /* another failure: the commit itself tells */
}

int ck_writer_commit_dir(struct ck_writer *w, const char *series, const char *name, unsigned how)
{
	int need_closed = (how & CK_WRITER_CLOSED) != 0;
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
	/* At rest here, but written elsewhere: not now (a marker of no promise
	 * or an idle time says nothing of other nodes' files still to come). */
	if ((how & CK_WRITER_AT_REST) && !writers_gone(w, series, name)) {
		ck_staging_unclaim(w->staging, series, name);
		free(path);
		return -EBUSY;
	}
	/* Not waiting for this mount's own handles: they must not hold up
	 * the commit (flock locks of one process conflict too). */
	if (!need_closed)
		ck_staging_writers_off(w->staging, series, name);
	rc = committed_elsewhere(series, name,
				 ckw_commit_in_child(w, series, name, name,
						     (how & CK_WRITER_AT_REST) ? 0 : CK_WRITERS_COMMIT_WAIT_MS));
	if (!need_closed)
		ck_staging_writers_on(w->staging, series, name);
	if (rc == 0)
		ckw_notify_committed(w, series, name);
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
