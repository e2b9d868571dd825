/* Parsing files at their last close (indexer.c).
 *
 * A worker thread parses, verifies and hashes each file queued, as a
 * commit would (ck_preparse_file), and keeps the result keyed by the
 * file's identity (device, inode): a rename of the file, or of its
 * directory by the commit, keeps it.  The commit then reuses the hashes of
 * every file still the same and reads only headers again.
 *
 * Thread rules: every function may be called from any thread, and
 * accepts a NULL indexer (nothing is kept; state says "in progress").
 * stop must be the last call and runs once.
 */
#ifndef CKPTFS_WRITER_INDEXER_H
#define CKPTFS_WRITER_INDEXER_H

#include <sys/types.h>

#include "ckptfs/buf.h"
#include "ckptfs/ingest.h"
#include "ckptfs/layers.h"

struct ckw_indexer;

/* Starts the worker.  rules (kept, not copied) decide layer names as an
 * import's; staging_dir is cut from paths in log messages.  0, -ENOMEM or
 * -errno from pthread_create. */
int ckw_indexer_start(struct ckw_indexer **out, const struct ck_layer_rules *rules, const char *staging_dir);
/* Stops the worker (a parse under way finishes first) and frees
 * everything kept and queued. */
void ckw_indexer_stop(struct ckw_indexer *ix);
/* Queues the file at path, once however often it is queued before the
 * worker gets to it.  Out of memory it is dropped: the commit parses it. */
void ckw_indexer_enqueue(struct ckw_indexer *ix, const char *path);
/* Blocks until no file under directory dir is queued or being parsed. */
void ckw_indexer_wait(struct ckw_indexer *ix, const char *dir);
/* Drops what was kept for files parsed under dir (committed, quarantined,
 * removed). */
void ckw_indexer_forget(struct ckw_indexer *ix, const char *dir);
/* fork() once no parse runs, with the table locked across it so the child
 * sees it whole; the child may then call ckw_indexer_find_in_child (no
 * other thread exists there to race it).  fork's result. */
pid_t ckw_indexer_fork(struct ckw_indexer *ix);
/* The kept parse of the file now at path (by its identity), or NULL; a
 * ck_preparsed_fn with ctx the indexer.  Only in a child of
 * ckw_indexer_fork, or while no worker can change the table. */
const struct ck_preparsed *ckw_indexer_find_in_child(void *ctx, const char *path);
/* Appends the user.ckptfs.state text of the file at path to out: "in
 * progress: being written", "...: being parsed", "...: parsed: KIND, N
 * tensors", "...: does not parse: WHY", "...: changed since its last
 * parse".  0 or -ENOMEM. */
int ckw_indexer_state(struct ckw_indexer *ix, const char *path, struct ck_buf *out);

#endif
