/* Commit and deletion children (child.c; ck_writer_delete and the helper
 * mode are in include/ckptfs/writer.h). */
#ifndef CKPTFS_WRITER_CHILD_H
#define CKPTFS_WRITER_CHILD_H

#include "writer_int.h"

/* Commits STORE/staging/<series>/<staged> as checkpoint final
 * (ck_store_commit_staged_with, waiting wait_ms for other nodes' writers)
 * in a child process, reusing the parses kept at the files' last closes;
 * a parse of the directory under way is waited for, and what was kept for
 * it is dropped afterwards.  Claims are the caller's business.  0, -EIO
 * when it was quarantined or the child was killed, or the commit's
 * -errno. */
int ckw_commit_in_child(struct ck_writer *w, const char *series, const char *staged, const char *final,
			unsigned wait_ms);

#endif
