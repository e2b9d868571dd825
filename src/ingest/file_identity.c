/* Identity of a physical file: the store serves an imported file only while
 * it is still the file that was hashed at import (same device, inode, size
 * and modification time).  A trainer overwriting a checkpoint in place, or
 * rsync replacing it, changes at least one of them. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/clock.h"
#include "ckptfs/store.h"

void ck_file_identity_set(struct ck_file_info *f, const struct stat *sb, int shared)
{
	f->dev = shared ? 0 : (uint64_t)sb->st_dev;
	f->ino = (uint64_t)sb->st_ino;
	f->size = (uint64_t)sb->st_size;
	f->mtime_ns = ck_timespec_ns(sb->st_mtim);
}

int ck_file_identity_same(const struct ck_file_info *f, const struct stat *sb)
{
	return (f->dev == 0 || f->dev == (uint64_t)sb->st_dev) && f->ino == (uint64_t)sb->st_ino &&
	       f->size == (uint64_t)sb->st_size && f->mtime_ns == ck_timespec_ns(sb->st_mtim);
}

int ck_file_check(const struct ck_file_info *f, struct ck_error *err)
{
	return ck_file_check_owner(f, NULL, err);
}

int ck_file_check_owner(const struct ck_file_info *f, struct ck_owner *owner, struct ck_error *err)
{
	struct stat sb;

	if (stat(f->src_path, &sb) < 0)
		return ck_fail(err, ESTALE, "%s: changed since import (%s)", f->src_path, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return ck_fail(err, ESTALE, "%s: changed since import (no longer a regular file)", f->src_path);
	if ((uint64_t)sb.st_size != f->size)
		return ck_fail(err, ESTALE, "%s: changed since import (size %" PRIu64 " → %" PRIu64 ")",
			       f->src_path, f->size, (uint64_t)sb.st_size);
	if ((f->dev && (uint64_t)sb.st_dev != f->dev) || (uint64_t)sb.st_ino != f->ino)
		return ck_fail(err, ESTALE, "%s: changed since import (replaced: inode %" PRIu64 " → %" PRIu64 ")",
			       f->src_path, f->ino, (uint64_t)sb.st_ino);
	if (ck_timespec_ns(sb.st_mtim) != f->mtime_ns)
		return ck_fail(err, ESTALE, "%s: changed since import (modified: mtime %" PRId64 " → %" PRId64 " ns)",
			       f->src_path, f->mtime_ns, ck_timespec_ns(sb.st_mtim));
	if (owner)
		ck_owner_from_stat(owner, &sb);
	return 0;
}
