/* What a directory of a writable mount is (dirs.c), for the operations on
 * its names (names.c, write.c, delete.c):
 *
 *   /                  series: the view's, then STORE/staging/<series>/
 *                      of series with no committed checkpoint yet
 *   /<series>/         committed checkpoints (view), then in-progress
 *                      directories STORE/staging/<series>/<dir>/
 *   in-progress dirs   passthrough to the real files and directories
 *   in checkpoints     read-only
 */
#ifndef CKPTFS_FS_DIRS_H
#define CKPTFS_FS_DIRS_H

#include <stdint.h>

#include "ckptfs/view.h"
#include "ckptfs/writer_staging.h"
#include "lowlevel.h"
#include "mount.h"

enum ckfs_dir_kind {
	CKFS_DIR_ROOT,     /* series: the view's, then new ones in staging */
	CKFS_DIR_SERIES,   /* a series: committed checkpoints, then in-progress dirs */
	CKFS_DIR_STAGED,   /* inside an in-progress directory: passthrough */
	CKFS_DIR_VIEW,     /* inside a committed checkpoint: read-only */
};

struct ckfs_dir_ctx {
	enum ckfs_dir_kind kind;
	char *series;                    /* CKFS_DIR_SERIES */
	uint64_t staged;                 /* the staged node, if the directory is one */
	const struct ck_vnode *view_dir; /* the view's directory, if any */
};

/* What directory ino is: 0, -ESTALE for an unknown view node, -ENOMEM.
 * Free with ckfs_dir_ctx_free (also after a failure). */
int ckfs_dir_ctx(struct ckfs *fs, fuse_ino_t ino, struct ckfs_dir_ctx *c);
void ckfs_dir_ctx_free(struct ckfs_dir_ctx *c);
/* Whether the view has name in the directory of c. */
int ckfs_dir_in_view(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name);
/* Where the child name of c is, for the *at system calls (free with
 * ck_staging_at_free): 0, -EROFS in the view, -ESTALE, -errno. */
int ckfs_child_at(struct ckfs *fs, const struct ckfs_dir_ctx *c, const char *name, struct ck_staged_at *at);

#endif
