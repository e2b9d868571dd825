/* The writer layer: checkpoints written through a writable mount and
 * committed into the store (src/writer/).  No FUSE in here: the daemon
 * (src/fs) turns requests into these calls, and tells the kernel what
 * changed through the callbacks it passes in (struct ck_writer_notify).
 *
 * A writer owns
 *   - the in-progress namespace (include/ckptfs/writer_staging.h);
 *   - the parse of each file at its last close, reused by its commit;
 *   - the commits themselves: claims, the commit child, the view catching
 *     up, and what the kernel must forget;
 *   - what starts a commit besides a rename or setxattr: completion
 *     markers (some after a grace time), idle directories, and a rescan at
 *     start for markers that landed while no daemon ran
 *     (include/ckptfs/writer_rules.h);
 *   - the deletion child, and the background compaction.
 *
 * Commits and deletions run in a child process: the view holds the
 * store's LMDB environment open read-only, and LMDB forbids opening one
 * environment twice in a process.  In builds with AddressSanitizer the
 * child execs the program's own binary in a helper mode at once (see
 * ck_writer_helper_wanted): every program that makes a writer must start
 * its main() with that dispatch.
 *
 * Errors are -errno.  Thread rules: once ck_writer_open returned, every
 * function may be called from any thread at once, except that start,
 * stop and close are called by the thread that owns the writer, in that
 * order (each once), while no other call of the writer runs.  Commit calls block for the whole commit
 * (they fork, then wait for the child).  Callbacks run on the calling
 * thread or on the writer's own threads (grace, idle, compaction), never
 * with a lock of the writer held.
 */
#ifndef CKPTFS_WRITER_H
#define CKPTFS_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/buf.h"
#include "ckptfs/view.h"
#include "ckptfs/writer_rules.h"
#include "ckptfs/writer_staging.h"

/* What the command line decides (ckptfs -o options). */
struct ck_writer_opts {
	unsigned markers;          /* CK_MARK_*: completion markers honoured */
	char **marker_files;       /* user-named markers inside a directory */
	size_t nmarker_files;
	double marker_grace;       /* s of quiet after an HF or user marker; 0: commit at once */
	unsigned commit_idle;      /* commit a closed directory with a step idle N s; 0: never */
	unsigned compact_secs;     /* compact every N s after a commit; 0: never */
};

/* How the kernel (or whoever serves the namespace) learns what changed.
 * Either function may be NULL.  Inode numbers are the view's. */
struct ck_writer_notify {
	void *ctx;
	/* The view followed the index (ck_writer_catch_up): the attributes
	 * or listings of these n directories changed. */
	void (*inodes_changed)(void *ctx, const uint64_t *inos, size_t n);
	/* After a commit of old_name in series as new_name, with the view
	 * caught up: the names in the series' directory, and any the view
	 * hid since the last call (a series reloaded under a new node).
	 * series NULL (old and new NULL): only the names the view hid. */
	void (*names_changed)(void *ctx, const char *series, const char *old_name, const char *new_name);
	/* Checkpoint name of series committed (any commit: rename, setxattr,
	 * marker, idle), right after the store took it and before the view
	 * catches up; on the committing thread.  The GPU health watcher's
	 * emergency flag of the series goes at once. */
	void (*committed)(void *ctx, const char *series, const char *name);
};

struct ck_writer;

/* ---- Life cycle ---- */

/* A writer for store (an absolute path) over view, which it uses and never
 * closes.  opts and notify are copied; opts->marker_files must stay valid
 * until ck_writer_close.  mount_lock is the descriptor of STORE/mount.lock
 * the caller holds (ck_store_mount_claim), which helper children keep, or
 * -1.  Starts the parse-at-close thread (if it cannot, that is logged and
 * commits parse every file themselves).  Creates nothing on disk.  0 or
 * -ENOMEM. */
int ck_writer_open(const char *store, struct ck_view *view, const struct ck_writer_opts *opts,
		   const struct ck_writer_notify *notify, int mount_lock, struct ck_writer **out);
/* Starts the background threads: the marker grace timer (which first looks
 * at every in-progress directory and series marker once, so a marker that
 * landed while no daemon ran still commits), idle commits when
 * opts->commit_idle, compaction when opts->compact_secs.  Call once the
 * notify callbacks work.  A thread that cannot start is logged and its
 * feature is off. */
void ck_writer_start(struct ck_writer *w);
/* Stops the background threads, waiting for a commit they run; a
 * compaction under way gets SIGTERM, then SIGKILL after 5 s.  Safe without
 * a start.  Before the start and after the stop, markers that would wait
 * for grace commit at once. */
void ck_writer_stop(struct ck_writer *w);
/* Stops what still runs, frees the writer and its namespace.  NULL is
 * accepted. */
void ck_writer_close(struct ck_writer *w);

/* The in-progress namespace, valid until ck_writer_close. */
struct ck_staging *ck_writer_staging(struct ck_writer *w);

/* ---- Rules with the series' stored pattern ---- */

/* The step in name under the rules of series (see writer_rules.h).  0 and
 * *step, or -EINVAL when the name carries none. */
int ck_writer_step_of(struct ck_writer *w, const char *series, const char *name, int64_t *step);
/* ck_rule_is_commit_rename with the pattern of series. */
int ck_writer_is_commit_rename(struct ck_writer *w, const char *series, const char *from, const char *to);
/* ck_rule_commit_target with the pattern of series. */
int ck_writer_commit_target(struct ck_writer *w, const char *series, const char *dir, const char *value,
			    size_t size, char **final);

/* ---- Commits ---- */

/* Commits top directory name of series as checkpoint final (a rename or
 * setxattr commit): claims it whatever is open (the caller may not have
 * seen its own last release yet), commits it in a child, releases the
 * claim, forgets its node once it left STORE/staging, and lets the view
 * catch up (ck_writer_catch_up).  The names are not notified: answer the
 * request first (the kernel holds the directory's lock until then), then
 * tell the kernel.  The commit waits up to CK_WRITERS_COMMIT_WAIT_MS for
 * files of the directory open for writing through other mounts (other
 * nodes) to be closed; this mount's own handles do not hold it up.  0
 * (also when another node committed it meanwhile); -EBUSY when a commit of
 * it runs here, or files of it stay open for writing elsewhere; -EIO when
 * it was quarantined (or the child was killed: the next writable open
 * finishes it); or the store's -errno (-EINVAL: final carries no step,
 * -EEXIST: committed already, -ENOENT: no such directory). */
int ck_writer_commit_now(struct ck_writer *w, const char *series, const char *name, const char *final);
/* How ck_writer_commit_dir commits. */
#define CK_WRITER_CLOSED 1    /* only when no handle is open in it here */
#define CK_WRITER_AT_REST 2   /* a commit of a directory at rest (marker grace,
			       * idle): files open for writing on another node
			       * make it -EBUSY at once, to be tried again once
			       * at rest (without it, the commit waits for them
			       * as ck_writer_commit_now does: a marker written
			       * strictly last) */
/* Commits top directory name of series under its own name when it carries
 * a step, is a directory, and (CK_WRITER_CLOSED in how) no handle is open
 * in it; the view catches up while it is still claimed (a lookup
 * meanwhile waits, see ck_staging_wait_unclaimed), then names_changed is
 * notified.  0, -EAGAIN when it is not (or no longer) to be committed
 * here, or the commit's -errno as for ck_writer_commit_now (-EBUSY: files
 * of it are open for writing on another node). */
int ck_writer_commit_dir(struct ck_writer *w, const char *series, const char *name, unsigned how);
/* The view follows the index (ck_view_refresh), then inodes_changed is
 * notified with the directories that changed.  Logs a failure to read
 * the index. */
void ck_writer_catch_up(struct ck_writer *w);
/* For a lookup that found top directory name of series neither in progress
 * nor in the view, or an open of a node in it that found its directory
 * gone: when this mount knew it in progress and it left STORE/staging,
 * another node committed (or quarantined) it; once that commit is over
 * (its writers lock given up, waiting up to CK_WRITERS_COMMIT_WAIT_MS),
 * its node goes and the view catches up now rather than at the next
 * refresh, so that it does not vanish here meanwhile.  1 (look again) or
 * 0.  May block: any request thread. */
int ck_writer_moved_elsewhere(struct ck_writer *w, const char *series, const char *name);

/* ---- Files landing ---- */

/* After a handle of staged node ino was released (the reply sent: this
 * may commit).  wrote: it was open for writing; left: handles still open
 * on it (ck_staging_open_end).  A file written and closed for good is
 * queued for its parse; then the marker check (ck_writer_marker_check)
 * runs on its path.  An unknown or removed node is ignored. */
void ck_writer_released(struct ck_writer *w, uint64_t ino, int wrote, unsigned left);
/* A file is in place at path (last close, or a rename onto it: DCP's
 * .metadata.tmp -> .metadata).  When it is a series marker, commits the
 * directory it names; when it is in a directory whose marker is there,
 * commits that directory (releases arrive in any order, so the last close
 * of any file of a marked directory counts), at once or, for HF and
 * user-named markers, after opts->marker_grace s of quiet.  Paths outside
 * STORE/staging are ignored.  Failures are logged. */
void ck_writer_marker_check(struct ck_writer *w, const char *path);
/* The user.ckptfs.state text of the in-progress file at path (see the
 * parse at last close), appended to out.  0 or -ENOMEM. */
int ck_writer_file_state(struct ck_writer *w, const char *path, struct ck_buf *out);

/* ---- Listings ---- */

/* The in-progress directories of series (NULL: the in-progress series,
 * STORE/staging/<series>/, at the root) that the view's directory dir does
 * not list (dir may be NULL: the series has none yet), then those claimed
 * by a commit that moved them out and the view does not list yet: a
 * listing that shows dir's children, then these, never misses a directory
 * being committed.  One this mount knew in progress that another node's
 * commit moved out is waited for (ck_writer_moved_elsewhere: the view
 * changes, and a listing taken before must be taken again).  Dot names
 * are skipped.  Allocated (ck_strv_free).  0 or -ENOMEM.  May block. */
int ck_writer_staged_names(struct ck_writer *w, const char *series, const struct ck_vnode *dir,
			   char ***names, size_t *n);

/* ---- Deleting ---- */

/* Deletes committed checkpoint name of series in the store
 * (ck_delete_checkpoint) in a child process.  The view is not changed:
 * the caller hides the node, then calls ck_writer_catch_up.  0, -EIO when
 * the child was killed (the next writable open rolls the deletion
 * forward), or the deletion's -errno. */
int ck_writer_delete(struct ck_writer *w, const char *series, const char *name);

/* ---- Helper children (sanitizer builds) ---- */

/* Whether argv asks for a commit or deletion helper:
 *   PROGRAM --commit-helper STORE SERIES STAGED FINAL [WAIT_MS]
 *   PROGRAM --delete-helper STORE SERIES NAME
 * (WAIT_MS: how long the commit waits for other nodes' writers, default
 * CK_WRITERS_COMMIT_WAIT_MS).  ck_writer_helper_main runs it and returns the exit status: 0, or the
 * positive errno of the operation (EINVAL for a bad command line). */
int ck_writer_helper_wanted(int argc, char **argv);
int ck_writer_helper_main(int argc, char **argv);

#endif
