/* Owners, modes and permission checks, decided as the kernel decides them
 * for a local filesystem (generic_permission), for code that acts on
 * behalf of another user: the daemon answering a request of a user of an
 * allow_other mount, the view deciding what a composite shows.  Pure
 * functions: no I/O, no global state; any thread.
 */
#ifndef CKPTFS_PERM_H
#define CKPTFS_PERM_H

#include <stddef.h>
#include <stdint.h>

/* Who owns an object and what it grants. */
struct ck_owner {
	uint32_t uid, gid;
	uint32_t mode;          /* permission bits only: 07777 (suid, sgid, sticky, rwx x 3) */
};

/* Who asks: the fsuid and fsgid of the requesting thread and its
 * supplementary groups (which may or may not repeat gid). */
struct ck_cred {
	uint32_t uid, gid;
	const uint32_t *groups;
	size_t ngroups;
};

/* The owner, group and permission bits of a stat(2) result. */
struct stat;
void ck_owner_from_stat(struct ck_owner *o, const struct stat *sb);

/* Access bits, as access(2)'s R_OK, W_OK, X_OK. */
#define CK_MAY_READ 4
#define CK_MAY_WRITE 2
#define CK_MAY_EXEC 1

/* Whether c is in group gid (its fsgid or a supplementary group). */
int ck_cred_in_group(const struct ck_cred *c, uint32_t gid);

/* Whether c may do mask (CK_MAY_*) on an object o: the owner's bits when c
 * is its owner, else the group's when c is in its group, else the others'
 * (one class only, as the kernel: an owner with fewer bits than others has
 * fewer).  uid 0 may read and write anything, and search a directory or
 * execute a file that has any x bit (CAP_DAC_OVERRIDE).  0 or -EACCES. */
int ck_perm_check(const struct ck_owner *o, int is_dir, const struct ck_cred *c, int mask);

/* The permission bits a composite made of a and b shows: per class, what
 * both grant (the bitwise and).  See docs/design.md, "Owners and modes". */
static inline uint32_t ck_perm_both(uint32_t a, uint32_t b)
{
	return a & b;
}

/* file_mode reached through a directory of mode dir_mode that it does not
 * show in its own path (a version in an older checkpoint): a class that
 * may not search the directory loses all its bits on the file. */
uint32_t ck_perm_through_dir(uint32_t file_mode, uint32_t dir_mode);

/* Whether c may remove or rename an entry child (a directory when
 * child_is_dir) out of directory dir: write and search permission on dir
 * and, when dir has the sticky bit, c owns dir or child (or is root).
 * 0, -EACCES or -EPERM (sticky), as rmdir(2) and rename(2) answer. */
int ck_perm_may_delete(const struct ck_owner *dir, const struct ck_owner *child, const struct ck_cred *c);

/* Whether c may change the owner of o to uid and its group to gid (-1:
 * unchanged), as chown(2) decides: the owner only by root, or to itself by
 * its owner; the group by o's owner to a group c is in, or by root.  0 or
 * -EPERM. */
int ck_perm_chown_ok(const struct ck_owner *o, const struct ck_cred *c, uint32_t uid, uint32_t gid);

/* The owner a new file or directory created by c in parent gets on a local
 * filesystem: c's uid; the parent's group when the parent has the setgid
 * bit, else c's gid; mode (with the creator's umask already applied) as
 * given, plus the setgid bit for a directory made in a setgid parent, less
 * the setgid bit of a file whose group c is not in. */
void ck_perm_new_owner(const struct ck_owner *parent, const struct ck_cred *c, uint32_t mode, int is_dir,
		       struct ck_owner *out);

#endif
