/* Internal interface of the ckptfs daemon (src/fs/): the configuration
 * parsed from the command line, the state shared by the FUSE operations,
 * and the small setup helpers main.c strings together.
 *
 * The daemon is a thin adapter over the view (include/ckptfs/view.h): it
 * turns FUSE requests into view calls and -errno results into replies.
 * A writable mount adds in-progress directories beside the view's
 * committed checkpoints (staging.c, staged_names.c, write.c, commit.c).
 */
#ifndef CKPTFS_FS_CKPTFS_H
#define CKPTFS_FS_CKPTFS_H

#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <fuse_lowlevel.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/view.h"

/* Largest read and write request we ask the kernel for. */
#define CKFS_MAX_REQUEST (1024u * 1024u)
/* The preferred I/O size reported to readers (st_blksize), which Python's io
 * and stdio size their buffers by.  Not a full request: torch.load seeks to
 * every storage's zip header and reads one buffer there, so a 1 MiB buffer
 * copied (and, for packed files, decoded) up to 1 MiB past each of a few
 * hundred headers.  128 KiB is the kernel's readahead window and the least
 * coreutils' cp and cat use; reads larger than the buffer bypass it. */
#define CKFS_BLKSIZE (128u * 1024u)

/* Everything the command line decides. */
struct ckfs_config {
	char *store;            /* as given, and absolute (for fsname and logs) */
	char *mountpoint;       /* absolute (realpath) unless it is /dev/fd/N */
	int foreground;         /* -f */
	int debug;              /* -d, -o debug: foreground + libfuse and our debug logs */
	int single_thread;      /* -s */
	int show_help;          /* -h, --help */
	int show_version;       /* -V, --version */
	int read_only;          /* -o ro: the kernel refuses writes too */
	struct ck_view_opts view;
	enum ck_log_level log_level;
	double attr_timeout;    /* seconds the kernel may cache attributes */
	double entry_timeout;   /* seconds the kernel may cache names */
	unsigned max_threads;
	unsigned max_idle_threads;
	int clone_fd;
	char *pidfile;
	unsigned readahead_kb;  /* bdi read_ahead_kb to set as root; 0 = leave */
	unsigned pipe_max_kb;   /* lower bound for fs.pipe-max-size as root; 0 = leave */
	unsigned refresh_secs;  /* follow new imports/commits every N s; 0 = never */
	unsigned commit_idle;   /* commit a closed step dir idle N s; 0 = never */
	unsigned markers;       /* CKFS_MARK_*: completion markers honoured */
	char **marker_files;    /* -o commit_markers=FILE: per-directory markers */
	size_t nmarker_files;
	double marker_grace;    /* s of quiet after an HF or user marker */
	unsigned compact_secs;  /* writable mount: compact every N s after a commit; 0 = never */
	int direct_io;          /* CKFS_DIO_*: which committed files bypass the page cache */
	int passthrough;        /* -o passthrough (default): the kernel reads whole raw files itself */
	int warmup;             /* -o warmup (default): build the newest composites at mount */
	unsigned preload_mib;   /* -o preload: push up to this many MiB of them to the kernel; CKFS_PRELOAD_AUTO */
	/* Options handed to fuse_session_new() ("ro,allow_other,fsname=..."),
	 * NUL-terminated, commas inside values escaped. */
	struct ck_buf fuse_opts;
	int has_fsname;
	int has_subtype;
};

/* -o preload=auto: a quarter of the memory available when the warm-up runs. */
#define CKFS_PRELOAD_AUTO UINT32_MAX

/* Completion markers (-o commit_markers=, markers.c).  DCP's .metadata and
 * the two series markers are written strictly last by their formats and
 * commit at once; trainer_state.json and user-named files commit after
 * -o marker_grace seconds of quiet (older transformers write
 * rng_state.pth after trainer_state.json). */
enum {
	CKFS_MARK_DCP = 1u << 0,        /* DIR/.metadata */
	CKFS_MARK_HF = 1u << 1,         /* DIR/trainer_state.json */
	CKFS_MARK_MEGATRON = 1u << 2,   /* SERIES/latest_checkpointed_iteration.txt */
	CKFS_MARK_DEEPSPEED = 1u << 3,  /* SERIES/latest */
	CKFS_MARK_ALL = 0xfu,
};

/* -o direct_io=: which committed files are opened with FOPEN_DIRECT_IO
 * (none by default).  torch: torch.save files, which torch.load reads
 * with read() (direct I/O fills its buffers by pinning the pages) or
 * maps MAP_PRIVATE (mmap=True), which direct I/O allows; it helps a
 * first load and costs repeated ones (docs/bench.md).  safetensors and
 * numpy map their files MAP_SHARED, which FUSE refuses on direct I/O
 * files before libfuse 3.17: only `all` gives them direct I/O. */
enum {
	CKFS_DIO_NONE,
	CKFS_DIO_TORCH,
	CKFS_DIO_ALL,
};

/* Parses argv into cfg (which the caller zeroes first).  Returns 0, or
 * -EINVAL after printing what is wrong to stderr.  Help and version only
 * set cfg->show_help / show_version. */
int ckfs_parse_args(int argc, char **argv, struct ckfs_config *cfg);
/* Completes cfg->fuse_opts once cfg->store is absolute: fsname, subtype,
 * ro and max_read.  0 or -ENOMEM. */
int ckfs_finish_fuse_opts(struct ckfs_config *cfg);
void ckfs_config_free(struct ckfs_config *cfg);
void ckfs_print_help(const char *progname);
void ckfs_print_version(void);

/* FUSE passthrough (passthrough.c): files served as they were saved are
 * read by the kernel from the physical file, never through the daemon. */
struct ckfs_passthrough {
	int on;                 /* negotiated at INIT */
	int disabled;           /* registration refused (no CAP_SYS_ADMIN): stop asking */
	int warned;             /* a registration failed otherwise: logged once */
	uint64_t max_size;      /* larger files are served by the daemon */
	pthread_mutex_t lock;
	int32_t *ids;           /* by FUSE node id: backing id, -1 through the daemon, 0 undecided */
	size_t cap;
};

/* State of one mounted filesystem, the userdata of every request. */
struct ckfs {
	const struct ckfs_config *cfg;
	struct ck_view *view;
	uint64_t root_ino;      /* the view's inode number of its root */
	uid_t uid;              /* owner shown for every node: whoever mounted */
	gid_t gid;
	struct fuse_session *se;        /* for invalidations after a commit */
	struct ckfs_staging *staging;   /* in-progress directories; NULL with -o ro */
	struct ckfs_indexer *indexer;   /* parses files at their last close; NULL with -o ro */
	struct ckfs_grace *grace;       /* marker grace; NULL with -o ro */
	struct ckfs_passthrough passthrough;
	int mount_lock;                 /* STORE/mount.lock held by a writable mount, else -1 */
	pthread_mutex_t listings_lock;
	struct ckfs_listing *listings;  /* open directory handles (listing.c) */
};

/* Directory handles of view directories (listing.c): the first READDIR
 * (offset 0) takes the whole listing at one moment, the view's children
 * and, in a writable mount, the in-progress directories after them, and
 * later READDIRs page through it.  A handle opened with a series name is
 * for that series' in-progress directory node (a series with no committed
 * checkpoint when it was looked up): its listing is the view's directory
 * of the series once there is one, then the in-progress directories.
 * Handles still open at unmount (their RELEASEDIR lost) are freed by
 * ckfs_listings_free. */
struct ckfs_listing;
int ckfs_listing_open(struct ckfs *fs, const char *series, struct ckfs_listing **out);
void ckfs_listing_close(struct ckfs *fs, struct ckfs_listing *l);
void ckfs_listings_free(struct ckfs *fs);
/* Entry i of the listing of dir (i == 0 takes it anew): a view node into
 * *node, or an in-progress directory's name into *staged (valid until the
 * next call on l).  0, -ENOENT past the end, or -errno. */
int ckfs_listing_entry(struct ckfs *fs, const struct ck_vnode *dir, struct ckfs_listing *l, size_t i,
		       const struct ck_vnode **node, const char **staged);
/* Answers a READDIR(PLUS) of size bytes from off with l's entries after
 * "." and ".." (dir_st gives their inode); dir is the view's directory, or
 * NULL for a handle opened with a series name. */
void ckfs_listing_reply(fuse_req_t req, const struct ck_vnode *dir, const struct stat *dir_st,
			struct ckfs_listing *l, size_t size, off_t off, int plus);

/* A thread that calls tick(arg) every secs seconds until stopped
 * (ticker.c); stop wakes it at once and joins it. */
struct ckfs_ticker {
	unsigned secs;
	void (*tick)(void *arg);
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stop;
	int running;
};

int ckfs_ticker_start(struct ckfs_ticker *t, unsigned secs, void (*tick)(void *arg), void *arg);
void ckfs_ticker_stop(struct ckfs_ticker *t);

/* Follows the store while mounted (refresh.c): every refresh_secs a thread
 * asks the view for new series and checkpoints and tells the kernel which
 * directories changed; with warm set, it then builds the composites of a
 * new newest checkpoint (imported, or committed through the mount) before
 * a reader asks. */
struct ckfs_refresher {
	struct ck_view *view;
	struct fuse_session *se;
	uint64_t root_ino;
	int warm;
	uint64_t warm_verify_max;   /* see ck_view_warm_newest */
	uint64_t warmed_gen;    /* ck_view_generation when last warmed */
	atomic_int stop;
	struct ckfs_ticker ticker;
};

int ckfs_refresher_start(struct ckfs_refresher *r, struct ck_view *view, struct fuse_session *se,
			 uint64_t root_ino, unsigned secs, int warm, uint64_t warm_verify_max);
void ckfs_refresher_stop(struct ckfs_refresher *r);

/* Builds the newest checkpoints' composites once the mount is live
 * (warmup.c, -o warmup), checking those served as saved of at most
 * verify_max bytes (ck_view_warm_newest), then preloads them (preload.c);
 * stop ends it early and joins it. */
struct ckfs_warmup {
	struct ckfs *fs;
	uint64_t verify_max;
	atomic_int stop;
	pthread_t thread;
	int running;
};

int ckfs_warmup_start(struct ckfs_warmup *w, struct ckfs *fs, uint64_t verify_max);
/* What the warm-ups check ahead: files up to the passthrough limit when
 * passthrough is on (their first open would hash them), else none. */
uint64_t ckfs_warm_verify_max(const struct ckfs *fs);
void ckfs_warmup_stop(struct ckfs_warmup *w);

/* The operation table (table.c): namespace, read path, EROFS for writes. */
extern const struct fuse_lowlevel_ops ckfs_ops;

/* The table of a writable mount (write.c): routes each request to the
 * view (committed, read-only) or to the in-progress space (staging.c). */
extern const struct fuse_lowlevel_ops ckfs_rw_ops;

/* Pieces of the table: namespace (ops.c), read path (read.c), xattrs (xattr.c). */
void ckfs_op_init(void *userdata, struct fuse_conn_info *conn);
void ckfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ckfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void ckfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void ckfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi);
void ckfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void ckfs_op_access(fuse_req_t req, fuse_ino_t ino, int mask);
void ckfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void ckfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ckfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ckfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);

/* Write-type operations, all EROFS while the mount is read-only (readonly.c). */
void ckfs_rofs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi);
void ckfs_rofs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ckfs_rofs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ckfs_rofs_remove(fuse_req_t req, fuse_ino_t parent, const char *name);
void ckfs_rofs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void ckfs_rofs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags);
void ckfs_rofs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void ckfs_rofs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi);
void ckfs_rofs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi);
void ckfs_rofs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags);
void ckfs_rofs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void ckfs_rofs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi);
void ckfs_rofs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags);

/* Helpers shared by the operations. */
static inline struct ckfs *ckfs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}
/* The view node behind a FUSE inode number, or NULL. */
const struct ck_vnode *ckfs_node(struct ckfs *fs, fuse_ino_t ino);
/* stat for a node: 0 or -errno from the view. */
int ckfs_stat(struct ckfs *fs, const struct ck_vnode *n, struct stat *st);
/* The entry for the view's child name of parent: 0 or -errno. */
int ckfs_view_entry(struct ckfs *fs, fuse_ino_t parent, const char *name, struct fuse_entry_param *e);
/* Directory listings of root and series directories in a writable mount
 * go on, after the view's children, with the in-progress directories
 * (staged_names.c): their names, allocated (ck_strv_free), the ones the
 * view does not list.  A directory being committed is among them until
 * the view lists it.  0 or -ENOMEM. */
int ckfs_staged_names(struct ckfs *fs, const struct ck_vnode *dir, char ***names, size_t *n);
/* The same for series (NULL: the root's in-progress series) against the
 * view's directory dir, which may be NULL (the series has none yet). */
int ckfs_staged_names_of(struct ckfs *fs, const char *series, const struct ck_vnode *dir, char ***names,
			 size_t *n);

/* The in-progress space (staging.c): directories being written, backed by
 * STORE/staging/<series>/<dir>/.  Its inode numbers have CKFS_STAGED_BIT
 * set, so they never meet the view's.  Nodes are named by their parent and
 * name (a path is built on demand); a node is "top" when it is a
 * directory right under a series, "series" when it is STORE/staging/<series>
 * itself (a series with no committed checkpoint yet).  Thread-safe. */
#define CKFS_STAGED_BIT ((uint64_t)1 << 62)
struct ckfs_staging;
static inline int ckfs_is_staged(fuse_ino_t ino)
{
	return (ino & CKFS_STAGED_BIT) != 0;
}
int ckfs_staging_new(const char *store, struct ckfs_staging **out);
void ckfs_staging_free(struct ckfs_staging *s);
/* Finds or adds the node (parent 0: a series node when name is NULL, else
 * the top directory name of series), counting one lookup.  0 or -ENOMEM. */
int ckfs_staging_get(struct ckfs_staging *s, uint64_t parent, const char *series, const char *name,
		     uint64_t *ino);
void ckfs_staging_forget(struct ckfs_staging *s, uint64_t ino, uint64_t nlookup);
/* The real path of a node, or of its child name (NULL: the node itself);
 * allocated.  -ESTALE for a node removed or renamed away, -ENOMEM. */
int ckfs_staging_path(struct ckfs_staging *s, uint64_t ino, const char *child, char **path);
/* The real path of STORE/staging/<series>[/<name>], allocated, or NULL (ENOMEM/EINVAL). */
char *ckfs_staging_top_path(struct ckfs_staging *s, const char *series, const char *name);
/* For a top node: its series and name (allocated) and 0; -EINVAL for any other. */
int ckfs_staging_top(struct ckfs_staging *s, uint64_t ino, char **series, char **name);
/* For a series node: its series (allocated); -EINVAL for any other. */
int ckfs_staging_series(struct ckfs_staging *s, uint64_t ino, char **series);
/* After a rename of (parent, name) to (newparent, newname): the node
 * follows; a node that was at the destination is left without a name. */
void ckfs_staging_moved(struct ckfs_staging *s, uint64_t parent, const char *series, const char *name,
			uint64_t newparent, const char *newname);
/* After an unlink, rmdir or commit: the node at (parent, name) has no name any more. */
void ckfs_staging_removed(struct ckfs_staging *s, uint64_t parent, const char *series, const char *name);
/* Open handles, counted per node so a commit waits for the last close.
 * open_begin counts one; -EBUSY when writing into a directory being
 * committed, -ESTALE for an unknown node.  open_end drops one. */
int ckfs_staging_open_begin(struct ckfs_staging *s, uint64_t ino, int writing);
unsigned ckfs_staging_open_end(struct ckfs_staging *s, uint64_t ino);  /* handles left */
/* Whether ino is right under a series (a series marker file, when it is
 * a regular file: those are the only files a series directory takes). */
int ckfs_staging_is_series_file(struct ckfs_staging *s, uint64_t ino);
/* Whether the top directory that ino is in is being committed. */
int ckfs_staging_busy(struct ckfs_staging *s, uint64_t ino);
/* Marks top directory name of series as being committed: 0, or -EBUSY
 * when a commit of it runs or (need_closed) a file in it is open.  A
 * directory with no node yet (never looked up) has nothing open: 0,
 * nothing marked. */
int ckfs_staging_claim(struct ckfs_staging *s, const char *series, const char *name, int need_closed);
void ckfs_staging_unclaim(struct ckfs_staging *s, const char *series, const char *name);
/* Waits while a commit holds top directory name of series (claimed):
 * between the move of the directory into the store and the view catching
 * up, neither shows it.  1 if it waited (look again), 0 if not claimed. */
int ckfs_staging_wait_unclaimed(struct ckfs_staging *s, const char *series, const char *name);
/* The names of the claimed top directories of series, allocated (free
 * with ck_strv_free).  0 or -ENOMEM. */
int ckfs_staging_claimed(struct ckfs_staging *s, const char *series, char ***names, size_t *n);
/* In-progress directory handles (opendir's fi->fh), tracked so that a
 * handle whose RELEASEDIR never came is closed by ckfs_staging_free. */
struct ckfs_staged_dir;
int ckfs_staging_opendir(struct ckfs_staging *s, const char *path, struct ckfs_staged_dir **out);
DIR *ckfs_staged_dir_stream(struct ckfs_staged_dir *d);
void ckfs_staging_closedir(struct ckfs_staging *s, struct ckfs_staged_dir *d);
/* The series and name (allocated) of the top directory ino is in: 0,
 * -EINVAL for a series node or one without a name, -ENOMEM. */
int ckfs_staging_top_of(struct ckfs_staging *s, uint64_t ino, char **series, char **name);

/* Parsing files at their last close (indexer.c): a worker thread parses,
 * verifies and hashes each file queued, and keeps the result by file
 * identity for the commit, which then reads only headers again.  All
 * functions accept a NULL indexer (nothing is kept). */
struct ckfs_indexer;
int ckfs_indexer_start(struct ckfs_indexer **out, const struct ck_layer_rules *rules, const char *staging_dir);
void ckfs_indexer_stop(struct ckfs_indexer *ix);
/* Queues the file at path (its last writable handle was released). */
void ckfs_indexer_enqueue(struct ckfs_indexer *ix, const char *path);
/* Waits until no file under directory dir is queued or being parsed. */
void ckfs_indexer_wait(struct ckfs_indexer *ix, const char *dir);
/* Drops what was kept for files under dir (committed, quarantined, removed). */
void ckfs_indexer_forget(struct ckfs_indexer *ix, const char *dir);
/* fork() with the kept parses frozen and no parse running: the child may use
 * ckfs_indexer_find_in_child (a ck_preparsed_fn, ctx = the indexer). */
pid_t ckfs_indexer_fork(struct ckfs_indexer *ix);
const struct ck_preparsed *ckfs_indexer_find_in_child(void *ctx, const char *path);
/* The user.ckptfs.state text of the in-progress file at path. */
int ckfs_indexer_state(struct ckfs_indexer *ix, const char *path, struct ck_buf *out);

/* The step in name under the rules of series: its stored pattern
 * (`ckptctl import --pattern`) or the built-ins.  0, or -EINVAL when the
 * name carries none (markers.c). */
int ckfs_step_of(struct ckfs *fs, const char *series, const char *name, int64_t *step);

/* Commits the in-progress directory STORE/staging/<series>/<staged> as
 * checkpoint final (commit.c): ck_store_commit_staged() in a child process
 * (the view holds the store's LMDB environment open read-only, and one
 * process must not open it twice).  0, -EIO when it was quarantined, or
 * the commit's -errno. */
int ckfs_commit(struct ckfs *fs, const char *series, const char *staged, const char *final);
/* Commits top directory name of series under its own name when it
 * carries a step, exists and (need_closed) has no open file; new writes
 * into it fail with EBUSY meanwhile.  Then the view and the kernel catch
 * up.  0, -EAGAIN when it is not (or no longer) to be committed, or the
 * commit's -errno (markers.c). */
int ckfs_commit_dir(struct ckfs *fs, const char *series, const char *name, int need_closed);
/* Completion markers (markers.c).  After the last close of the staged
 * file at real path, or a rename onto it: when it is a marker (see
 * ckptfs(1)), commits the directory it completes. */
void ckfs_marker_check(struct ckfs *fs, const char *path);
/* Whether name is a marker written directly into a series directory
 * (Megatron's latest_checkpointed_iteration.txt, DeepSpeed's latest). */
int ckfs_is_series_marker(const char *name);

/* Idle commits (idle.c): every second a thread commits in-progress
 * directories whose name carries a step, with all files closed and
 * nothing written for secs seconds.  start: 0 or -errno. */
struct ckfs_idler {
	struct ckfs *fs;
	unsigned secs;
	struct ckfs_ticker ticker;
};
int ckfs_idler_start(struct ckfs_idler *r, struct ckfs *fs, unsigned secs);
void ckfs_idler_stop(struct ckfs_idler *r);
/* The newest mtime (ns) of dir and everything under it, and how many
 * regular files it holds: 0 or -errno (idle.c). */
int ckfs_newest_change(const char *dir, int64_t *newest_ns, size_t *files);
int64_t ckfs_now_ns(void);  /* CLOCK_REALTIME, as mtimes are */

/* Marker grace (grace.c): a directory completed by a marker that waits
 * (trainer_state.json, user-named files) commits once nothing in it is
 * open and nothing changed for cfg->marker_grace seconds.  At start the
 * thread also looks at every in-progress directory once, so a marker
 * that landed while no daemon ran (it was killed) still commits. */
struct ckfs_grace;
int ckfs_grace_start(struct ckfs_grace **out, struct ckfs *fs);
void ckfs_grace_stop(struct ckfs_grace *g);
/* (Re)arms the commit of series/dir marker_grace seconds from now. */
void ckfs_grace_schedule(struct ckfs_grace *g, const char *series, const char *dir);
/* Looks at every in-progress directory and series marker, as if each had
 * just been closed (markers.c). */
void ckfs_marker_rescan(struct ckfs *fs);

/* After a commit the view follows the index and the kernel forgets the
 * names and listings that changed, in two steps:
 *  - ckfs_view_catch_up: the view and the inodes it changed.  Before a
 *    rename or setxattr commit is answered, so that the trainer's next
 *    mkdir or create cannot race a series reload (it failed with ENOENT);
 *    inode invalidations take no directory lock;
 *  - ckfs_inval_commit_names: names of series a reload replaced (in the
 *    root), then old_name and new_name in dir.  Only after the answer:
 *    the kernel holds dir's lock until then, and taking its parent's
 *    lock while it is held could deadlock with an rmdir.
 * ckfs_after_commit does both (commits that answer no request). */
void ckfs_view_catch_up(struct ckfs *fs);
/* fork() for a commit or deletion child (commit.c): with the indexer's
 * table frozen (ckfs_indexer_fork) and no composite build running, whose
 * threads could hold an allocator lock the child would then wait for. */
pid_t ckfs_fork(struct ckfs *fs);

/* Commit and deletion children (helper.c).  With AddressSanitizer, whose
 * allocator has no fork handlers, a forked child of this multithreaded
 * process could hang at its first malloc, so there the child execs this
 * binary in a helper mode at once (ckfs_spawn_helper: fork + execv of
 * /proc/self/exe with "OP STORE A B [C]"; the parent's pid, or -1 with
 * errno); elsewhere it runs in the forked copy (ckfs_fork).  main() hands
 * a helper's command line to ckfs_helper_main, which returns its exit
 * status (a positive errno, 0 on success).  ckfs_log_commit and
 * ckfs_log_delete log an outcome the same way from either child. */
#if defined(__SANITIZE_ADDRESS__)
#define CKFS_CHILD_EXECS 1
#else
#define CKFS_CHILD_EXECS 0
#endif
int ckfs_helper_wanted(int argc, char **argv);
int ckfs_helper_main(int argc, char **argv);
pid_t ckfs_spawn_helper(struct ckfs *fs, const char *op, const char *a, const char *b, const char *c);
void ckfs_log_commit(const char *series, const char *staged, const char *final, int rc,
		     const struct ck_error *err);
void ckfs_log_delete(const char *series, const char *name, int rc, const struct ck_error *err);
void ckfs_inval_commit_names(struct ckfs *fs, fuse_ino_t dir, const char *old_name, const char *new_name);
void ckfs_after_commit(struct ckfs *fs, fuse_ino_t dir, const char *old_name, const char *new_name);

/* Preloading (preload.c, -o preload): pushes the bytes of the newest
 * checkpoints' files that the daemon serves into the kernel's page cache
 * of the mount (fuse_lowlevel_notify_store), checked first exactly as a
 * read would be (ck_vfile_read: verify=first), so that a trainer that
 * mounts and resumes reads cached pages instead of waiting for requests.
 * Up to cfg->preload_mib in all; files the kernel reads by passthrough,
 * and direct_io ones, are skipped.  The kernel only takes pages for an
 * inode it knows, so each file is looked up through the mountpoint
 * first.  Runs on the warm-up's thread after the builds (ck_warm_fn);
 * stop ends it at the next piece.  Returns 0 to go on, 1 to stop. */
struct ckfs_preload;
int ckfs_preload_begin(struct ckfs *fs, const atomic_int *stop, struct ckfs_preload **out);
int ckfs_preload_file(void *preload, const char *path, struct ck_vfile *f, int served_as_saved);
void ckfs_preload_end(struct ckfs_preload *p);

/* Passthrough (passthrough.c).
 *  - ckfs_passthrough_handshake: answers the kernel's INIT, which must not
 *    have been read yet (call it between fuse_session_mount and the loop),
 *    through libfuse, adding passthrough when the kernel offers it.  0, or
 *    -errno when no INIT was answered (the loop then reads it).
 *  - ckfs_passthrough_open: answers an open of node ino (fi as it would be
 *    answered) with passthrough when ino has a backing file, or gets one
 *    now: f is one whole raw file and verifies.  A node decided either way
 *    stays so for the mount (the kernel wants every open of an inode
 *    alike).  0 once answered; -ECANCELED when answered but the open was
 *    interrupted (no release will come); -ENOTSUP, nothing sent, to answer
 *    through the daemon.
 *  - ckfs_passthrough_state: ino's backing id (> 0: its reads bypass the
 *    daemon), -1 (served by the daemon) or 0 (not opened yet). */
int ckfs_passthrough_handshake(struct ckfs *fs, struct fuse_session *se);
int ckfs_passthrough_open(struct ckfs *fs, fuse_req_t req, fuse_ino_t ino, struct ck_vfile *f,
			  const struct fuse_file_info *fi);
int32_t ckfs_passthrough_state(struct ckfs_passthrough *pt, fuse_ino_t ino);
void ckfs_passthrough_destroy(struct ckfs_passthrough *pt);

/* Kernel tuning that only root may do (tune.c).  Both log what they did
 * and never fail the mount: they are about speed, not correctness. */
void ckfs_raise_pipe_max(unsigned min_kb);
void ckfs_raise_readahead(dev_t dev, unsigned kb);

/* Daemon plumbing (daemon.c). */
/* Forks.  The parent waits until the child reports the mount live (or
 * fails), then returns 1 with the exit status for it in *parent_status.
 * The child returns 0, in its own session in /, with *notify_fd to report
 * through.  -errno if the fork itself fails. */
int ckfs_daemonize(int *notify_fd, int *parent_status);
/* Reports the outcome (0 or -errno) to the waiting parent, once; closes fd. */
void ckfs_notify_parent(int *notify_fd, int status);
/* Points stdin/out/err at /dev/null once logging goes to syslog. */
void ckfs_detach_stdio(void);
int ckfs_write_pidfile(const char *path);

#endif
