/* Directory handles of view directories (listing.c): the first READDIR
 * (offset 0) takes the whole listing at one moment, the view's children
 * and, in a writable mount, the in-progress directories after them, and
 * later READDIRs page through it.  A handle opened with a series name is
 * for that series' in-progress directory node (a series with no committed
 * checkpoint when it was looked up): its listing is the view's directory
 * of the series once there is one, then the in-progress directories.
 * Handles still open at unmount (their RELEASEDIR lost) are freed by
 * ckfs_listings_free.  Thread rules: each handle has its own lock; the
 * list of handles, fs->listings_lock. */
#ifndef CKPTFS_FS_LISTING_H
#define CKPTFS_FS_LISTING_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ckptfs/view.h"
#include "lowlevel.h"
#include "mount.h"

struct ckfs_listing;

/* A new handle (series NULL: a view directory's).  0 or -ENOMEM. */
int ckfs_listing_open(struct ckfs *fs, const char *series, struct ckfs_listing **out);
/* Frees a handle; NULL is accepted. */
void ckfs_listing_close(struct ckfs *fs, struct ckfs_listing *l);
/* Frees every handle still open (unmount). */
void ckfs_listings_free(struct ckfs *fs);
/* Answers a READDIR(PLUS) of size bytes from off with l's entries after
 * "." and ".." (dir_st gives their inode); dir is the view's directory, or
 * NULL for a handle opened with a series name. */
void ckfs_listing_reply(fuse_req_t req, const struct ck_vnode *dir, const struct stat *dir_st,
			struct ckfs_listing *l, size_t size, off_t off, int plus);

#endif
