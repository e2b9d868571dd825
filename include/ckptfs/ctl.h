/* The mount's control files (src/ctl/): read-only files whose bytes are
 * generated when they are opened, in two places:
 *
 *   MNT/.ckptfs/NAME        files of the hidden control directory, which a
 *                           lookup finds and no listing of the root shows;
 *   MNT/SERIES/NAME         files present in a series directory while their
 *                           generator says so (the GPU health flag).
 *
 * No FUSE: the daemon routes lookups, attributes, opens and reads of these
 * inode numbers here.  Inode numbers have CK_CTL_INO_BIT set and nothing
 * else of the mount uses that bit.  Files are registered before the mount
 * serves; after that every function may be called from any thread.
 * Errors are -errno.
 */
#ifndef CKPTFS_CTL_H
#define CKPTFS_CTL_H

#include <stdint.h>
#include <sys/types.h>

#include "ckptfs/buf.h"

#define CK_CTL_DIR_NAME ".ckptfs"
#define CK_CTL_INO_BIT ((uint64_t)1 << 61)

/* Appends the file's bytes to out: 0, -ENOENT when the file is not there
 * now, -ENOMEM.  series is NULL for files of the control directory. */
typedef int (*ck_ctl_render_fn)(void *ctx, const char *series, struct ck_buf *out);

struct ck_ctl;

int ck_ctl_new(struct ck_ctl **out);
void ck_ctl_free(struct ck_ctl *c);
/* Registers .ckptfs/name, or (series_file) name in every series
 * directory.  0, -EEXIST, -EINVAL (not a plain file name), -ENOMEM. */
int ck_ctl_add(struct ck_ctl *c, const char *name, int series_file, ck_ctl_render_fn fn, void *ctx);

static inline int ck_ctl_is_ino(uint64_t ino)
{
	return (ino & CK_CTL_INO_BIT) != 0;
}
/* The control directory's inode number. */
uint64_t ck_ctl_dir_ino(void);

/* Lookups: in the control directory (parent = ck_ctl_dir_ino()), and of a
 * series file in the directory of series.  0 and *ino; -ENOENT when there
 * is no such file or it is not there now; -ENOMEM. */
int ck_ctl_lookup(struct ck_ctl *c, const char *name, uint64_t *ino);
int ck_ctl_lookup_series(struct ck_ctl *c, const char *series, const char *name, uint64_t *ino);
/* Whether name is a registered series file (whether or not it is there). */
int ck_ctl_is_series_file(const struct ck_ctl *c, const char *name);

struct ck_ctl_attr {
	mode_t mode;            /* S_IFDIR | 0555 or S_IFREG | 0444 */
	uint64_t size;          /* of the bytes as they would be generated now */
	int64_t mtime_ns;
};
/* 0; -ENOENT for an inode that is no (longer a) control file. */
int ck_ctl_getattr(struct ck_ctl *c, uint64_t ino, struct ck_ctl_attr *out);
/* The bytes of file ino now, appended to out (an open takes one snapshot
 * and reads from it).  0, -ENOENT, -EISDIR, -ENOMEM. */
int ck_ctl_render(struct ck_ctl *c, uint64_t ino, struct ck_buf *out);
/* Entry i of the control directory's listing: its name and inode; -ENOENT
 * past the end. */
int ck_ctl_dir_entry(struct ck_ctl *c, size_t i, const char **name, uint64_t *ino);

#endif
