/* The in-progress namespace of a writable mount (src/writer/staging.c).
 *
 * Directories being written live in STORE/staging/<series>/<dir>/; the
 * real files there are the truth.  This table gives them inode numbers
 * and remembers where each node is by its names (parent, name): one for a
 * directory, one per hard link for a regular file, the first giving its
 * path.  A rename moves one name and a directory's subtree follows.
 * Inode numbers have CK_STAGING_BIT set, so they never meet the view's,
 * and are never reused while the table lives (a forgotten number cannot
 * come back as another file).  Nodes are reached with the *at system
 * calls (ck_staging_at), below STORE/staging without following a symbolic
 * link and whatever the length of their path; a file whose names are all
 * gone while handles are still open is reached through one of them
 * (ck_staging_held_fd), as a local filesystem serves an unlinked file.
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
#include <sys/stat.h>

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
 * st (or NULL): what lstat says of the real entry now; a regular file
 * with several links that the table knows under another name still
 * leading to it gets this name too (the same node).  0 and *ino, or
 * -ENOMEM. */
int ck_staging_get(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		   const struct stat *st, uint64_t *ino);
/* Drops nlookup lookups of ino.  A node with no lookup left is freed once
 * it has no name (removed or renamed over) and no handle; a named one
 * stays, as it may be a parent.  Unknown numbers are ignored. */
void ck_staging_forget(struct ck_staging *s, uint64_t ino, uint64_t nlookup);
/* The real path of node ino, or of its child name (child NULL: the node
 * itself), allocated: for messages, for the commit rules that look at its
 * first components, and for files the indexer parses.  It may be longer
 * than a system call takes and may not be used for one (ck_staging_at).
 * 0, -ESTALE for a node removed or renamed away (or unknown), -ENOMEM. */
int ck_staging_path(struct ck_staging *s, uint64_t ino, const char *child, char **path);

/* Where a node is, for the *at system calls: dir, a descriptor (O_PATH)
 * of the directory that holds it, and name, its name there. */
struct ck_staged_at {
	int dir;
	char *name;
};
/* *at of node ino (child NULL: by its first name) or of its child name:
 * the directory reached from STORE/staging by names, never through a
 * symbolic link (a component that became one gives -ELOOP or -ENOTDIR).
 * Free with ck_staging_at_free.  0, -ESTALE for a node without a name (or
 * below one), -ENOENT when STORE/staging is missing, -errno. */
int ck_staging_at(struct ck_staging *s, uint64_t ino, const char *child, struct ck_staged_at *at);
/* *at of STORE/staging/<series>/<name> (name NULL: STORE/staging/<series>). */
int ck_staging_top_at(struct ck_staging *s, const char *series, const char *name, struct ck_staged_at *at);
/* Closes and frees what ck_staging_*at filled (and only that); at may be
 * freed twice. */
void ck_staging_at_free(struct ck_staged_at *at);

/* After an open of file node ino gave descriptor fd (its handle counted
 * by ck_staging_open_begin): the node keeps a copy while any handle is
 * open, so that it is still reached once its names are gone.  Directory
 * handles (ck_staging_opendir) keep one the same way. */
void ck_staging_hold(struct ck_staging *s, uint64_t ino, int fd);
/* A new descriptor (the caller closes it) of the file of node ino kept by
 * ck_staging_hold, or -ESTALE when no handle is open on it. */
int ck_staging_held_fd(struct ck_staging *s, uint64_t ino);
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
 * (parent/newparent 0: top names of series): the name follows, and the
 * node that was at the destination loses that name, or with exchange
 * (RENAME_EXCHANGE) takes the source's; nothing changes when both are
 * names of one file (rename(2) of a link over another does nothing).  Out
 * of memory, a node loses its name (its next use gets -ESTALE). */
void ck_staging_moved(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		      uint64_t newparent, const char *newname, int exchange);
/* After link(2) made newname in staged directory newparent for file node
 * ino: the node gets that name, and one more lookup (the kernel's new
 * entry).  0, -ESTALE (unknown node), -ENOMEM. */
int ck_staging_linked(struct ck_staging *s, uint64_t ino, uint64_t newparent, const char *newname);
/* Whether staged nodes a and b are in the same top directory (one
 * checkpoint being written). */
int ck_staging_same_top(struct ck_staging *s, uint64_t a, uint64_t b);
/* Whether top node name of series is in the table (with its name). */
int ck_staging_known(struct ck_staging *s, const char *series, const char *name);
/* After an unlink, rmdir or commit: the node at (parent, series, name), if
 * any, loses that name. */
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

/* Gives the node just made (through fd when >= 0, else at at) the owner
 * of what c makes with mode (the umask applied) in a directory of owner
 * parent: c's uid, c's gid or parent's with setgid (ck_perm_new_owner).
 * 0 or -errno (the node stays as made). */
int ck_staging_give(const struct ck_staged_at *at, int fd, const struct ck_owner *parent, const struct ck_cred *c,
		    mode_t mode, int is_dir);
/* Makes STORE/staging/<series> when it is missing, owned as o says (the
 * series directory the mount shows, which the commit's
 * STORE/data/<series> then copies; NULL: 0755, the process's).  0 or
 * -errno; 0 when it was there. */
int ck_staging_series_dir(struct ck_staging *s, const char *series, const struct ck_owner *o);
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

/* Opens the real directory of node ino (ck_staging_at) as a handle the
 * table tracks, so that one never closed by its user is closed by
 * ck_staging_free.  0 or -errno. */
int ck_staging_opendir(struct ck_staging *s, uint64_t ino, struct ck_staged_dir **out);
/* The handle's stream, for readdir/seekdir by one thread at a time. */
DIR *ck_staged_dir_stream(struct ck_staged_dir *d);
void ck_staging_closedir(struct ck_staging *s, struct ck_staged_dir *d);

#endif
