/* The two operation tables main.c hands to fuse_session_new. */
#ifndef CKPTFS_FS_TABLES_H
#define CKPTFS_FS_TABLES_H

#include "lowlevel.h"

/* -o ro (table.c): namespace and read path; EROFS for every change. */
extern const struct fuse_lowlevel_ops ckfs_ops;

/* A writable mount (write.c): routes each request to the view (committed,
 * read-only) or to the writer's in-progress space. */
extern const struct fuse_lowlevel_ops ckfs_rw_ops;

#endif
