/* Owners of what the writable mount creates (include/ckptfs/writer_staging.h,
 * "Owners"): the daemon makes the real files as root, then gives them to
 * whoever asked, as a local filesystem would. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/writer_staging.h"

/* Sets o on the node fd (>= 0) or at at: the owner first, since chown
 * clears the setuid and setgid bits of a file. */
static int apply(const struct ck_staged_at *at, int fd, const struct ck_owner *o)
{
	if (geteuid() == 0 && (fd >= 0 ? fchown(fd, o->uid, o->gid)
				       : fchownat(at->dir, at->name, o->uid, o->gid, AT_SYMLINK_NOFOLLOW)) < 0)
		return -errno;
	if ((fd >= 0 ? fchmod(fd, o->mode) : fchmodat(at->dir, at->name, o->mode, 0)) < 0)
		return -errno;
	return 0;
}

int ck_staging_give(const struct ck_staged_at *at, int fd, const struct ck_owner *parent, const struct ck_cred *c,
		    mode_t mode, int is_dir)
{
	struct ck_owner o;

	ck_perm_new_owner(parent, c, (uint32_t)mode, is_dir, &o);
	return apply(at, fd, &o);
}

int ck_staging_series_dir(struct ck_staging *s, const char *series, const struct ck_owner *o)
{
	struct ck_staged_at at;
	int rc = ck_staging_mkdir(s, series, NULL, 0755);

	if (rc == -EEXIST)
		return 0;
	if (rc || !o)
		return rc;
	rc = ck_staging_top_at(s, series, NULL, &at);
	if (rc == 0)
		rc = apply(&at, -1, o);
	ck_staging_at_free(&at);
	return rc;
}

int ck_staging_may_commit(struct ck_staging *s, const char *series, const char *name,
			  const struct ck_owner *series_dir, const struct ck_cred *c)
{
	char *path = ck_staging_top_path(s, series, name);
	struct ck_owner dir;
	struct stat st;
	int rc = 0;

	if (!path)
		return -ENOMEM;
	if (lstat(path, &st) < 0)
		rc = -errno;
	free(path);
	if (rc)
		return rc;
	ck_owner_from_stat(&dir, &st);
	return ck_perm_may_delete(series_dir, &dir, c);
}
