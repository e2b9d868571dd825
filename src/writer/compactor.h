/* Background compaction of a writable mount (compactor.c, -o compact=SEC).
 *
 * Every SEC seconds, when the view gained a checkpoint since the last
 * compaction, `ckptctl compact` runs in a child process (the view holds
 * the store's LMDB environment open read-only, and one process must not
 * open it twice: see child.c), and the view then follows what was packed.
 *
 * Thread rules: start and stop by the writer's owner; ckw_compact_now from
 * any thread but not two at once.
 */
#ifndef CKPTFS_WRITER_COMPACTOR_H
#define CKPTFS_WRITER_COMPACTOR_H

#include "writer_int.h"

/* Raw files kept by the background compaction: the newest checkpoint of
 * each series (it stays raw anyway: users resume from it). */
#define CKW_COMPACT_KEEP_RAW 1

/* Starts the thread (secs > 0).  0 or -errno. */
int ckw_compactor_start(struct ckw_compactor **out, struct ck_writer *w, unsigned secs);
/* Asks a compaction under way to stop between files (SIGTERM, SIGKILL
 * after 5 s), waits for it, joins the thread and frees c.  NULL is
 * accepted. */
void ckw_compactor_stop(struct ckw_compactor *c);
/* One compaction now, in a child, then the view follows (the thread's
 * tick).  0, -ECANCELED once stopping, -EINTR when the child was killed,
 * or -errno (logged). */
int ckw_compact_now(struct ckw_compactor *c);

#endif
