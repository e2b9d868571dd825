/* Permission checks as the kernel makes them (include/ckptfs/perm.h). */
#include "config.h"

#include <errno.h>
#include <sys/stat.h>

#include "ckptfs/perm.h"

void ck_owner_from_stat(struct ck_owner *o, const struct stat *sb)
{
	o->uid = (uint32_t)sb->st_uid;
	o->gid = (uint32_t)sb->st_gid;
	o->mode = (uint32_t)sb->st_mode & 07777;
}

int ck_cred_in_group(const struct ck_cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return 1;
	for (size_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return 1;
	return 0;
}

int ck_perm_check(const struct ck_owner *o, int is_dir, const struct ck_cred *c, int mask)
{
	uint32_t bits;

	mask &= CK_MAY_READ | CK_MAY_WRITE | CK_MAY_EXEC;
	if (c->uid == 0) {
		if (!(mask & CK_MAY_EXEC) || is_dir || (o->mode & 0111))
			return 0;
		return -EACCES;
	}
	if (c->uid == o->uid)
		bits = o->mode >> 6;
	else if (ck_cred_in_group(c, o->gid))
		bits = o->mode >> 3;
	else
		bits = o->mode;
	return ((uint32_t)mask & ~bits & 7) ? -EACCES : 0;
}

int ck_perm_may_delete(const struct ck_owner *dir, const struct ck_owner *child, const struct ck_cred *c)
{
	int rc = ck_perm_check(dir, 1, c, CK_MAY_WRITE | CK_MAY_EXEC);

	if (rc == 0 && (dir->mode & S_ISVTX) && c->uid != 0 && c->uid != dir->uid && c->uid != child->uid)
		rc = -EPERM;
	return rc;
}

int ck_perm_chown_ok(const struct ck_owner *o, const struct ck_cred *c, uint32_t uid, uint32_t gid)
{
	if (c->uid == 0)
		return 0;
	if (uid != (uint32_t)-1 && !(uid == o->uid && c->uid == o->uid))
		return -EPERM;
	if (gid != (uint32_t)-1 && !(c->uid == o->uid && (gid == o->gid || ck_cred_in_group(c, gid))))
		return -EPERM;
	return 0;
}

uint32_t ck_perm_through_dir(uint32_t file_mode, uint32_t dir_mode)
{
	uint32_t keep = 07000;

	if (dir_mode & 0100)
		keep |= 0700;
	if (dir_mode & 0010)
		keep |= 0070;
	if (dir_mode & 0001)
		keep |= 0007;
	return file_mode & keep;
}

void ck_perm_new_owner(const struct ck_owner *parent, const struct ck_cred *c, uint32_t mode, int is_dir,
		       struct ck_owner *out)
{
	out->uid = c->uid;
	out->gid = c->gid;
	out->mode = mode & 07777;
	if (parent->mode & S_ISGID) {
		out->gid = parent->gid;
		if (is_dir)
			out->mode |= S_ISGID;
	}
	/* A file may not carry the setgid bit of a group its creator is not in. */
	if (!is_dir && (out->mode & S_ISGID) && c->uid != 0 && !ck_cred_in_group(c, out->gid))
		out->mode &= ~(uint32_t)S_ISGID;
}
