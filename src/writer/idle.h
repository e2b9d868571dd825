/* Idle commits (idle.c, -o commit_idle=SEC): a trainer that writes a
 * checkpoint directory and leaves no marker still gets it committed once
 * it rests.  Every second a thread looks at every STORE/staging/<series>/<dir>/
 * and commits (ck_writer_commit_dir, waiting for no close) each directory
 * whose name carries a step and is not a dot name, that holds at least one
 * regular file, has nothing open, and whose newest mtime under it is SEC
 * seconds old.  A file that does not parse sends the directory to the
 * quarantine, as every commit does.
 *
 * Thread rules: start and stop by the writer's owner; ckw_idle_scan from
 * any thread (the idle thread runs it too; commits are claimed, so two
 * scans never commit one directory twice).
 */
#ifndef CKPTFS_WRITER_IDLE_H
#define CKPTFS_WRITER_IDLE_H

#include "writer_int.h"

/* Starts the thread for w with SEC = secs (> 0).  0 or -errno. */
int ckw_idler_start(struct ckw_idler **out, struct ck_writer *w, unsigned secs);
/* Stops it (a scan under way finishes first) and frees it.  NULL is accepted. */
void ckw_idler_stop(struct ckw_idler *r);
/* One pass now: commits what has rested secs seconds, logging failures. */
void ckw_idle_scan(struct ck_writer *w, unsigned secs);

#endif
