/* Completion markers (markers.c; the checks on a file landing are
 * ck_writer_released and ck_writer_marker_check in writer.h). */
#ifndef CKPTFS_WRITER_MARKERS_H
#define CKPTFS_WRITER_MARKERS_H

#include "writer_int.h"

/* Looks at every in-progress directory and series marker as if each had
 * just been closed: markers that landed while no daemon ran commit.  Dot
 * names are skipped. */
void ckw_marker_rescan(struct ck_writer *w);
/* Commits series/dir after its marker (ck_writer_commit_dir, waiting for
 * the last close; at_rest: after the marker grace, CK_WRITER_AT_REST); a
 * directory still written on another node is tried again after the grace
 * time; another failure than "not now" is logged with why. */
void ckw_marker_commit(struct ck_writer *w, const char *series, const char *dir, const char *why, int at_rest);

#endif
