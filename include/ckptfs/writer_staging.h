/* The in-progress namespace of a writable mount (src/writer/staging.c).
 *
 * Directories being written live in STORE/staging/<series>/<dir>/; the
 * real files there are the truth.  This table gives them inode numbers
 * and remembers where each node is, named by (parent, name): a rename
 * moves one node and its subtree follows.  Inode numbers have
 * CK_STAGING_BIT set, so they never meet the view's, and are never reused
 * while the table lives (a forgotten number cannot come back as another
 * file).
 *
 * Three kinds of node:
 *   series node   STORE/staging/<series> itself: a series with no committed
 *                 checkpoint yet (parent 0, name NULL when looked up);
 *   top node      a directory right under a series, STORE/staging/<series>/<dir>
 *                 (parent 0), or a series marker file there;
 *   inner node    anything below a top node (parent: a staged inode).
 *
 * Claims: while a top directory is being committed it is claimed, and
 * writes into it fail with EBUSY (ck_staging_open_begin, ck_staging_busy),
 * so the commit validates the bytes it commits.  Open handles are counted
 * per node so that a marker or idle commit waits for the last close.
 *
 * Other nodes: while a handle is open for writing in a top directory, the
 * table holds that directory's writers lock shared
 * (STORE/writers/<series>/<dir>, ck_writers_share), so that a commit of it
 * on any node waits for this node's last close.
 *
 * Thread rules: every function may be called from any thread at once;
 * one mutex guards the table.  Strings passed in are copied.  No function
 * here calls back into its caller, and none blocks except
 * ck_staging_wait_unclaimed.
 */
#ifndef CKPTFS_WRITER_STAGING_H
#define CKPTFS_WRITER_STAGING_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckptfs/perm.h"

#define CK_STAGING_BIT ((uint64_t)1 << 62)

struct ck_staging;
struct ck_staged_dir;

/* Whether ino is one of this namespace's inode numbers. */
static inline int ck_staging_is_staged(uint64_t ino)
{
	return (ino & CK_STAGING_BIT) != 0;
}

/* A table for STORE/staging of store (a path, kept as given).  Nothing is
 * created on disk but the writers locks (ck_staging_open_begin).  0 or
 * -ENOMEM. */
int ck_staging_new(const char *store, struct ck_staging **out);
/* Frees the table and closes the directory handles still open.  NULL is
 * accepted.  No other call on s may run or follow. */
void ck_staging_free(struct ck_staging *s);

/* ---- Nodes ---- */

/* Finds or adds a node and counts one lookup: parent 0 with name NULL is
 * the series node of series; parent 0 with a name, the top node name of
 * series; otherwise child name of staged node parent (series ignored).
 * 0 and *ino, or -ENOMEM. */
int ck_staging_get(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		   uint64_t *ino);
/* Drops nlookup lookups of ino.  A node with no lookup left is freed once
 * it has no name (removed or renamed over); a named one stays, as it may
 * be a parent.  Unknown numbers are ignored. */
void ck_staging_forget(struct ck_staging *s, uint64_t ino, uint64_t nlookup);
/* The real path of node ino, or of its child name (child NULL: the node
 * itself), allocated.  0, -ESTALE for a node removed or renamed away (or
 * unknown), -ENOMEM. */
int ck_staging_path(struct ck_staging *s, uint64_t ino, const char *child, char **path);
/* STORE/staging/<series>[/<name>] (name NULL: the series directory),
 * allocated; NULL when out of memory.  ck_staging_top_path(s, "", NULL)
 * is "STORE/staging/", the prefix of every staged path.  No lock taken. */
char *ck_staging_top_path(struct ck_staging *s, const char *series, const char *name);
/* For a top node: its series and name (both allocated) and 0; -EINVAL for
 * any other node (or one without a name), -ENOMEM. */
int ck_staging_top(struct ck_staging *s, uint64_t ino, char **series, char **name);
/* For a series node: its series (allocated) and 0; -EINVAL for any other, -ENOMEM. */
int ck_staging_series(struct ck_staging *s, uint64_t ino, char **series);
/* The series and name (allocated) of the top directory that ino is in (ino
 * itself when it is one): 0, -EINVAL for a series node or a node without
 * a name, -ENOMEM. */
int ck_staging_top_of(struct ck_staging *s, uint64_t ino, char **series, char **name);
/* Whether ino is a node right under a series (a series marker, when it is
 * a regular file: the only files a series directory takes). */
int ck_staging_is_series_file(struct ck_staging *s, uint64_t ino);

/* After a rename of (parent, name) to (newparent, newname) within series
 * (parent/newparent 0: top names of series): the node follows, and a node
 * that was at the destination is left without a name.  Out of memory, the
 * moved node loses its name (its next use gets -ESTALE). */
void ck_staging_moved(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		      uint64_t newparent, const char *newname);
/* Whether top node name of series is in the table (with its name). */
int ck_staging_known(struct ck_staging *s, const char *series, const char *name);
/* After an unlink, rmdir or commit: the node at (parent, series, name), if
 * any, has no name any more. */
void ck_staging_removed(struct ck_staging *s, uint64_t parent, const char *series, const char *name);

/* Creates STORE/staging/<series>/<name> (name NULL: STORE/staging/<series>)
 * with mode, and STORE/staging and the series directory (0755) when they
 * are missing.  0, or mkdir's -errno for the last component (-EEXIST when
 * it is there already). */
int ck_staging_mkdir(struct ck_staging *s, const char *series, const char *name, mode_t mode);

/* ---- Owners (src/writer/owners.c) ----
 *
 * The daemon creates and changes the real files as root; these make them
 * what a local filesystem makes them for the user c who asked
 * (docs/design.md, "Owners and modes").  A process that is not root
 * keeps the owner (it could not give files away) and sets only the mode. */

/* Gives the node just made at path (fd: open on it, or -1) the owner of
 * what c makes with mode (the umask applied) in a directory of owner
 * parent: c's uid, c's gid or parent's with setgid (ck_perm_new_owner).
 * 0 or -errno (the node stays as made). */
int ck_staging_give(const char *path, int fd, const struct ck_owner *parent, const struct ck_cred *c, mode_t mode,
		    int is_dir);
/* Makes STORE/staging/<series> when it is missing, owned as o says (the
 * series directory the mount shows, which the commit's
 * STORE/data/<series> then copies; NULL: 0755, the process's).  0 or
 * -errno; 0 when it was there. */
int ck_staging_series_dir(struct ck_staging *s, const char *series, const struct ck_owner *o);
/* chown(2) of the node at path (fd, or -1) to uid and gid (-1: kept) for c,
 * under chown(2)'s rule (ck_perm_chown_ok): 0, -EPERM, or -errno. */
int ck_staging_chown(const char *path, int fd, const struct ck_cred *c, uint32_t uid, uint32_t gid);
/* Whether c may commit top directory name of series without renaming it
 * (the user.ckptfs.commit attribute): what renaming it inside its series
 * directory, of owner series_dir, would need (ck_perm_may_delete).  0,
 * -EACCES, -EPERM, or -errno. */
int ck_staging_may_commit(struct ck_staging *s, const char *series, const char *name,
			  const struct ck_owner *series_dir, const struct ck_cred *c);

/* ---- Open handles and claims ---- */

/* Counts one handle open on ino.  writing: it is open for writing; then
 * -EBUSY while its top directory is claimed here, or being committed by
 * any node (its writers lock held exclusive), and the first such handle
 * in a top directory takes the writers lock shared (a lock that cannot be
 * taken for another reason is logged, and the handle counted without it).
 * 0, -ESTALE for an unknown node. */
int ck_staging_open_begin(struct ck_staging *s, uint64_t ino, int writing);
/* Drops one handle of ino, writing as it was opened (the caller closed
 * its descriptor first: the last writing handle of a top directory gives
 * up the writers lock); returns how many are still open on it. */
unsigned ck_staging_open_end(struct ck_staging *s, uint64_t ino, int writing);
/* For a commit of top directory name of series by this process while its
 * own handles may still be open (a rename commit): off gives up the
 * writers lock held for them (the commit takes it exclusive); on takes it
 * again, when the directory is still there and written. */
void ck_staging_writers_off(struct ck_staging *s, const char *series, const char *name);
void ck_staging_writers_on(struct ck_staging *s, const char *series, const char *name);
/* Whether the top directory that ino is in is claimed (being committed). */
int ck_staging_busy(struct ck_staging *s, uint64_t ino);
/* Claims top directory name of series for a commit.  0; -EBUSY when it is
 * claimed already, or (need_closed) a handle is open on any node in it.
 * A directory with no node yet (never looked up) has nothing open: 0, and
 * nothing is marked.  Every 0 is paired with ck_staging_unclaim. */
int ck_staging_claim(struct ck_staging *s, const char *series, const char *name, int need_closed);
/* Releases the claim (if any) and wakes ck_staging_wait_unclaimed. */
void ck_staging_unclaim(struct ck_staging *s, const char *series, const char *name);
/* Blocks while top directory name of series is claimed.  Returns 1 if it
 * waited (look again: the commit may have moved it), 0 if not claimed. */
int ck_staging_wait_unclaimed(struct ck_staging *s, const char *series, const char *name);
/* The names of the claimed top directories of series, allocated (free
 * with ck_strv_free).  0 or -ENOMEM (*names NULL, *n 0). */
int ck_staging_claimed(struct ck_staging *s, const char *series, char ***names, size_t *n);
/* The names of the top directories of series in the table (claimed or
 * not), allocated (ck_strv_free).  A walk of every node the table holds.
 * 0 or -ENOMEM (*names NULL, *n 0). */
int ck_staging_tops(struct ck_staging *s, const char *series, char ***names, size_t *n);

/* ---- Directory handles ---- */

/* Opens the real directory at path as a handle the table tracks, so that
 * one never closed by its user is closed by ck_staging_free.  0 or -errno
 * from opendir. */
int ck_staging_opendir(struct ck_staging *s, const char *path, struct ck_staged_dir **out);
/* The handle's stream, for readdir/seekdir by one thread at a time. */
DIR *ck_staged_dir_stream(struct ck_staged_dir *d);
void ck_staging_closedir(struct ck_staging *s, struct ck_staged_dir *d);

#endif
