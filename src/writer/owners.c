/* Owners of what the writable mount creates (include/ckptfs/writer_staging.h,
 * "Owners"): the daemon makes the real files as root, then gives them to
 * whoever asked, as a local filesystem would. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/writer_staging.h"

/* Sets o on the node at path (fd, or -1): the owner first, since chown
 * clears the setuid and setgid bits of a file. */
static int apply(const char *path, int fd, const struct ck_owner *o)
{
	if (geteuid() == 0 && (fd >= 0 ? fchown(fd, o->uid, o->gid) : lchown(path, o->uid, o->gid)) < 0)
		return -errno;
	if ((fd >= 0 ? fchmod(fd, o->mode) : chmod(path, o->mode)) < 0)
		return -errno;
	return 0;
}

int ck_staging_give(const char *path, int fd, const struct ck_owner *parent, const struct ck_cred *c, mode_t mode,
		    int is_dir)
{
	struct ck_owner o;

	ck_perm_new_owner(parent, c, (uint32_t)mode, is_dir, &o);
	return apply(path, fd, &o);
}

int ck_staging_series_dir(struct ck_staging *s, const char *series, const struct ck_owner *o)
{
	char *path = ck_staging_top_path(s, series, NULL);
	int rc;

	if (!path)
		return -ENOMEM;
	rc = ck_staging_mkdir(s, series, NULL, 0755);
	if (rc == 0 && o)
		rc = apply(path, -1, o);
	else if (rc == -EEXIST)
		rc = 0;
	free(path);
	return rc;
}

int ck_staging_chown(const char *path, int fd, const struct ck_cred *c, uint32_t uid, uint32_t gid)
{
	struct ck_owner o;
	struct stat st;
	int rc;

	if ((fd >= 0 ? fstat(fd, &st) : lstat(path, &st)) < 0)
		return -errno;
	ck_owner_from_stat(&o, &st);
	rc = ck_perm_chown_ok(&o, c, uid, gid);
	if (rc == 0 && (fd >= 0 ? fchown(fd, uid, gid) : lchown(path, uid, gid)) < 0)
		rc = -errno;
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
