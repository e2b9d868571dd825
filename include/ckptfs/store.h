/* The checkpoint store: a directory with an LMDB index of imported
 * checkpoint files.  Imported files stay where they are; the index records
 * their identity (device, inode, size, mtime) so a file changed behind the
 * store's back is detected and refused, never served.
 *
 * On disk (docs/format.md):
 *   STORE/ckptfs-store      marker + format version (text)
 *   STORE/index/            LMDB environment (data.mdb, lock.mdb)
 *   STORE/index.lock        taken by writers (shared) and reindex (exclusive)
 *   STORE/manifests/        one checksummed text manifest per checkpoint:
 *                           the durable record the index can be rebuilt from
 *   STORE/layers.conf       optional user layer rules (see layers.h)
 *   STORE/staging/          SERIES/DIR/: checkpoints being written, bytes as written
 *   STORE/data/             SERIES/CKPT/: committed checkpoints, owned by the store
 *   STORE/quarantine/       SERIES/DIR.TIME/: torn checkpoints set aside, with a REASON
 *   STORE/commit.lock       taken by staged commits and recovery (exclusive)
 */
#ifndef CKPTFS_STORE_H
#define CKPTFS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "ckptfs/buf.h"
#include "ckptfs/dtype.h"
#include "ckptfs/error.h"
#include "ckptfs/layers.h"
#include "ckptfs/ingest.h"
#include "ckptfs/records.h"

struct ck_store;

struct ck_ckpt_info {
	uint64_t id;
	char *series;
	char *name;          /* directory or file name in the series: "checkpoint-300", "model_000500.pt" */
	int64_t step;
	int is_file;         /* the checkpoint is a single file, not a directory */
	char *src_path;      /* where it was imported from */
	int deleted;         /* deleted (rm -r, ckptctl rm): never listed by the mount, but newer
				composites still draw from the files it keeps (ck_store_delete_checkpoint) */
	int64_t imported_ns; /* when it was imported or committed (read from the index; writers
				pass the time apart) */
};

struct ck_import_opts {
	const char *series;        /* series name; default: basename of the imported dir */
	const char *step_pattern;  /* POSIX ERE whose first group is the step; default: built-in patterns */
	int verbose;
};


int ck_store_init(const char *dir, struct ck_error *err);
/* Opens a store.  A store whose index is gone fails with -ENOENT and
 * "STORE: index missing: run ckptctl reindex STORE". */
int ck_store_open(const char *dir, int readonly, struct ck_store **out, struct ck_error *err);
void ck_store_close(struct ck_store *st);
const char *ck_store_path(const struct ck_store *st);

/* Where the index of a store on a shared (network or distributed)
 * filesystem is kept on this node: under dir (default /var/cache/ckptfs,
 * or ~/.cache/ckptfs for a user who cannot write there), in a directory
 * named after the store's id and path.  Process-wide: call before opening
 * stores (ckptfs -o index_dir=, ckptctl --index-dir).  0 or -ENOMEM. */
int ck_store_set_index_base(const char *dir);
/* What ck_store_set_index_base set (NULL: the default), for a process to
 * hand on to the children it runs. */
const char *ck_store_index_base(void);

/* Whether the store lives on a shared filesystem, and so keeps its index
 * on this node (docs/design.md, "One store, many nodes"): 1 or 0; *fs gets
 * the filesystem's kind, *index_dir the index's directory (both valid
 * while st is open; either may be NULL). */
int ck_store_is_shared(const struct ck_store *st, const char **fs, const char **index_dir);

/* Whether physical file f is still the file that was imported
 * (ck_file_check), accepting a copy of it: a file whose device, inode or
 * modification time changed but whose size did not (the whole store
 * copied, restored or synced) is parsed and hashed again once, and when
 * its storages, tensors and (when compaction mapped it) chunks are exactly
 * those recorded, f gets its new identity and, with persist, the manifest,
 * packmap and index record it (also from a read-only open: the one change
 * it makes), so that no process reads it again.  0; -ESTALE with err for
 * a changed file; -errno.  Not with STORE/commit.lock or an index
 * transaction held when persist is set. */
int ck_store_file_check(struct ck_store *st, struct ck_file_info *f, int persist, struct ck_error *err);

/* Files imported in place that moved: every recorded path that is old or
 * lies under it (whole components) is rewritten under new, in the
 * manifests (each rewrite journaled) and the index.  report gets 0 and
 * "N paths" per checkpoint changed, -errno for a damaged manifest (skipped).
 * dry_run changes nothing.  Returns the number of checkpoints changed, or
 * -errno with err. */
int ck_store_relocate(struct ck_store *st, const char *old, const char *new, int dry_run,
		      ck_import_report_fn report, void *ctx, struct ck_error *err);

/* Brings the index up to date with the store's journal: what other
 * processes or other nodes committed, deleted, compacted or collected
 * since it last looked (ck_store_open does it once).  *changed (may be
 * NULL) is set when the index changed.  Costs one open() of the next
 * journal entry when nothing changed.  A store whose index cannot be
 * written (no permission) is not followed.  0 or -errno with err. */
int ck_store_follow(struct ck_store *st, int *changed, struct ck_error *err);
const struct ck_layer_rules *ck_store_layer_rules(const struct ck_store *st);

/* Indexes a directory in place: either a run dir holding checkpoints
 * (checkpoint-N/, global_stepN/, model_N.pt ...) or one checkpoint dir.
 * Returns the number of checkpoints indexed or -errno. */
int ck_store_import(struct ck_store *st, const char *src, const struct ck_import_opts *opts,
		    ck_import_report_fn report, void *ctx, struct ck_error *err);

struct ck_reindex_opts {
	int verify;   /* also re-stat every physical file and report those changed since import */
	int force;    /* replace the index even where it holds checkpoints that have no manifest */
};

/* What ck_store_reindex reports through report(ctx, path, status, msg):
 *   0                   a checkpoint indexed; path "SERIES/CKPT", msg its number of files
 *   -errno              a damaged manifest, skipped; path is the file, msg why
 *   CK_REINDEX_STALE    (verify) a file changed since import; path "SERIES/CKPT",
 *                       msg names the file and what changed (it stays indexed; the
 *                       mount refuses it, as before) */
#define CK_REINDEX_STALE 2

/* Rebuilds STORE/index from the manifests in STORE/manifests alone (no
 * checkpoint file is read).  The new LMDB environment is built in a
 * temporary directory of STORE and swapped in with renames, so a crash
 * leaves the old index or the new one; an import waits meanwhile.  Ids may
 * change.  Unless opts->force, refuses (-EEXIST, nothing changed) when the
 * current index holds checkpoints that have no manifest at all (imported
 * before manifests existed): import them again first.  Returns the number
 * of checkpoints indexed, or -errno with err (the old index is kept). */
int ck_store_reindex(const char *dir, const struct ck_reindex_opts *opts, ck_import_report_fn report, void *ctx,
		     struct ck_error *err);

/* ---- Staged commits (the writable mount's store side) ----
 *
 * Trainers write a checkpoint directory into STORE/staging/<series>/<dir>/.
 * Committing it makes it a checkpoint of the series atomically, or sets it
 * aside in the quarantine when any file does not parse completely; never
 * anything in between, and a crash at any point leaves either the staged
 * directory (not committed) or a committed checkpoint (after
 * ck_store_recover).  See docs/format.md, "Staging, data and quarantine". */
#define CK_STORE_MARKER_NAME "ckptfs-store"   /* the file that makes a directory a store */
#define CK_STORE_STAGING_DIR "staging"
#define CK_STORE_DATA_DIR "data"
#define CK_STORE_QUARANTINE_DIR "quarantine"
#define CK_STORE_WRITERS_DIR "writers"       /* SERIES/DIR: see ck_writers_share */

/* Statuses report() gets from the calls below besides those of an import
 * (0 / -errno per file): the directory was quarantined (path: where it is
 * now), or recovery finished a commit (path: the directory under data/). */
#define CK_COMMIT_QUARANTINED 3
#define CK_COMMIT_RECOVERED 4

/* STORE/staging/<series>/<name> (name NULL: STORE/staging/<series>), newly
 * allocated; NULL with errno EINVAL for a name that cannot be a series or
 * directory name (empty, ".", "..", a '/', over 255 bytes), or ENOMEM.
 * The caller creates the directories. */
char *ck_store_staging_path(const struct ck_store *st, const char *series, const char *name);

/* Commits STORE/staging/<series>/<staged_name>/ as checkpoint final_name
 * (NULL: staged_name) of series, whose name must carry a step by the
 * series' pattern (the built-ins unless `import --pattern` stored one):
 *   1. every file is ingested (parsed, verified, hashed), nothing written;
 *   2. if a file is bad (truncated zip, short safetensors, hostile pickle),
 *      or a DCP directory is incomplete (.distcp without .metadata, a
 *      .metadata naming a missing data file), or an entry is not a regular
 *      file or directory: the directory is renamed to
 *      STORE/quarantine/<series>/<staged_name>.<YYYYmmddTHHMMSSZ>/ with a
 *      REASON file ("relpath: why" per line), and -EBADMSG is returned
 *      (err names the first reason);
 *   3. else every file and directory is fsynced, the directory renamed to
 *      STORE/data/<series>/<final_name>/ and its parents fsynced, then its
 *      manifest and index records are written as an import's are.
 * report (may be NULL) gets each file as import reports it, then
 * CK_COMMIT_QUARANTINED or 0 with "committed" for the directory.  Refuses
 * to replace a committed checkpoint (-EEXIST).  When another process or
 * node committed this very directory since it was validated (under
 * STORE/commit.lock the staged directory is gone and final_name is
 * committed), returns -EALREADY: the checkpoint is committed, exactly once.
 * Before reading the files it holds the directory's writers lock
 * exclusive (ck_writers_exclusive): -EBUSY when files in it are still
 * open for writing through a writable mount, on this node or another,
 * after CK_WRITERS_COMMIT_WAIT_MS.  0 or -errno with err. */
int ck_store_commit_staged(struct ck_store *st, const char *series, const char *staged_name,
			   const char *final_name, ck_import_report_fn report, void *ctx, struct ck_error *err);

/* ck_store_commit_staged, reusing what preparsed (may be NULL) returns,
 * waiting wait_ms (ck_store_commit_staged: CK_WRITERS_COMMIT_WAIT_MS) for
 * writers of the directory on other nodes to close their files. */
int ck_store_commit_staged_with(struct ck_store *st, const char *series, const char *staged_name,
				const char *final_name, ck_import_report_fn report, void *ctx,
				ck_preparsed_fn preparsed, void *pctx, unsigned wait_ms, struct ck_error *err);

/* Who writes into a staged directory, on every node: the lock file
 * STORE/writers/<series>/<dir> (docs/design.md, "Writers on many nodes").
 * Coordinates through flock only, which the store's filesystem carries
 * between its clients; no other state is shared.
 *
 * share: a writable mount holds it shared (LOCK_SH) from the first file of
 *   the directory it opens for writing to the last close, after closing
 *   its own descriptors of those files (so that its writes reached the
 *   filesystem).  -EBUSY when a commit holds it for
 *   CK_WRITERS_SHARE_WAIT_MS (the directory is being committed).
 * exclusive: a commit holds it exclusive (LOCK_EX) from before it reads
 *   the files until the directory left staging: then no node has a file
 *   of it open for writing.  Tries for wait_ms, then -EBUSY (err: files
 *   are open for writing elsewhere).  A process holding it shared itself
 *   must give that up first (flock locks of one process conflict too).
 * wait: for a directory that left staging a moment ago (another node's
 *   commit moved it): waits up to wait_ms while a commit still holds the
 *   lock exclusive; the commit has recorded the checkpoint in the journal
 *   when it gives the lock up.  0 (no commit holds it, or no lock file:
 *   none is under way), -EBUSY, or -errno.
 * unlock: gives up either (closes fd; -1 is ignored).
 * done: the directory left staging (committed, quarantined, gone): the
 *   lock file is removed, under the exclusive lock fd, which is given up.
 * sweep: removes the lock files of directories no longer staged that
 *   nobody holds (what a process killed between its commit and done left).
 * Descriptors are close-on-exec; a forked child shares the lock until it
 * closes its copy too.  Names are checked as staged names (-EINVAL).
 * 0 or -errno with err (may be NULL). */
#define CK_WRITERS_SHARE_WAIT_MS 200
#define CK_WRITERS_COMMIT_WAIT_MS 5000
int ck_writers_share(const char *store, const char *series, const char *dir, int *fd, struct ck_error *err);
int ck_writers_exclusive(const char *store, const char *series, const char *dir, unsigned wait_ms, int *fd,
			 struct ck_error *err);
int ck_writers_wait(const char *store, const char *series, const char *dir, unsigned wait_ms);
void ck_writers_unlock(int fd);
void ck_writers_done(const char *store, const char *series, const char *dir, int fd);
int ck_writers_sweep(const char *store);

/* The writable mount of a store (STORE/mount.lock, held with flock for
 * as long as the daemon runs).  claim: takes it for mountpoint, fd to
 * keep open; -EBUSY (err names the pid and mountpoint) when another
 * daemon holds it.  release: gives it up.  owner: 1 with the live
 * daemon's pid and mountpoint (allocated), 0 when none holds it, -errno. */
int ck_store_mount_claim(const char *store, const char *mountpoint, int *fd, struct ck_error *err);
void ck_store_mount_release(int fd);
int ck_store_mount_owner(const char *store, long *pid, char **mountpoint);

/* Finishes what commits cut short by a crash: every directory under
 * STORE/data that the index does not hold is recorded (it was validated
 * before its rename), temporary manifests are removed, and a quarantined
 * directory without its REASON gets one.  ck_store_open() runs it for
 * writable opens (a failure there is only logged).  Returns the number of
 * commits finished, or -errno with err (the first failure; the others were
 * still tried). */
int ck_store_recover(struct ck_store *st, ck_import_report_fn report, void *ctx, struct ck_error *err);

struct ck_quarantine_info {
	char *series;
	char *name;          /* "<staged dir>.<YYYYmmddTHHMMSSZ>" */
	char *path;          /* the directory */
	char *reason;        /* its REASON file (first 64 KiB; "" when missing) */
};

/* The quarantined directories, by series then name.  Free with ck_quarantine_info_free. */
int ck_store_list_quarantine(struct ck_store *st, struct ck_quarantine_info **out, size_t *n);
void ck_quarantine_info_free(struct ck_quarantine_info *v, size_t n);

/* Listing.  Arrays are allocated (never NULL on success, even when empty);
 * free with the matching *_free. */
int ck_store_list_series(struct ck_store *st, char ***names, size_t *n);
/* Checkpoints of a series in ascending step order. */
int ck_store_list_checkpoints(struct ck_store *st, const char *series, struct ck_ckpt_info **out, size_t *n);
void ck_ckpt_info_free(struct ck_ckpt_info *v, size_t n);
int ck_store_list_files(struct ck_store *st, uint64_t ckpt_id, struct ck_file_info **out, size_t *n);
int ck_store_list_storages(struct ck_store *st, uint64_t file_id, struct ck_storage_info **out, size_t *n);
int ck_store_list_tensors(struct ck_store *st, uint64_t file_id, struct ck_tensor_info **out, size_t *n);
/* One checkpoint by series and name: 0, -ENOENT, or -errno.  Free with ck_ckpt_info_free(*out, 1). */
int ck_store_find_checkpoint(struct ck_store *st, const char *series, const char *name, struct ck_ckpt_info **out);
/* The step pattern stored for a series by `import --pattern` (NULL when it uses the built-ins).
 * 0 and *pattern (caller frees), or -ENOENT if there is no such series. */
int ck_store_series_pattern(struct ck_store *st, const char *series, char **pattern);


/* Step number in a checkpoint name, by pattern (NULL = built-ins:
 * checkpoint-N, global_stepN, iter_NNNNNNN, step_N, stepN, *_NNNN.pt/.pth/.bin/.safetensors, dcp_N).
 * Returns 0 and sets *step, or -ENOENT. */
int ck_series_step(const char *name, const char *pattern, int64_t *step);
/* Checks a user step pattern: compiles as a POSIX ERE and has a group.  0 or -EINVAL with err. */
int ck_series_pattern_check(const char *pattern, struct ck_error *err);

/* ---- Deleting checkpoints (docs/format.md, "Deleting checkpoints") ----
 *
 * A deleted checkpoint keeps its record, flagged deleted (listings still
 * return it, with ck_ckpt_info.deleted set), because newer composites may
 * still draw from its files; a checksummed tombstone beside its manifest
 * makes the deletion durable, so that a reindex rebuilds it deleted.  Its
 * files are dropped from the index (and unlinked when the store owns them,
 * under STORE/data/) by ck_store_reclaim once nothing draws from them;
 * include/ckptfs/refs.h says which, and runs the whole deletion. */

/* Marks checkpoint (series, name) deleted: its tombstone is written
 * durably, then the flag is committed to the index (a crash between the
 * two is rolled forward by the next writable open).  0; -ENOENT when there
 * is no such checkpoint or it is deleted already; -EINVAL when it has no
 * manifest (imported before manifests: import it again first); or -errno,
 * each with err. */
int ck_store_delete_checkpoint(struct ck_store *st, const char *series, const char *name, struct ck_error *err);

/* A fingerprint of the checkpoint records of a series (ids, steps, names,
 * import times, flags): any commit, import or deletion in the series
 * changes it.  0 and *stamp, or -errno. */
int ck_store_series_stamp(struct ck_store *st, const char *series, uint64_t *stamp);

/* What ck_store_reclaim reports through report(ctx, path, status, msg):
 * status CK_RECLAIM_DROPPED for a file dropped from the index (path: the
 * physical file, msg "unlinked" when the store owned it and removed it,
 * else "kept on disk"), CK_RECLAIM_REMOVED for a deleted checkpoint whose
 * last file went (path "SERIES/CKPT"), -errno for a failure (msg: why). */
#define CK_RECLAIM_DROPPED 5
#define CK_RECLAIM_REMOVED 6

/* Drops the listed files (by id; only files of deleted checkpoints of
 * series count, other ids are ignored) from the index and from their
 * checkpoints' manifests, then unlinks those the store owns (under
 * STORE/data/<series>/<ckpt>/; a user's imported file is never unlinked).
 * A deleted checkpoint left with no file is removed altogether (records,
 * manifest, tombstone, data directory).  stamp is ck_store_series_stamp()
 * from before the caller decided what to drop: -EAGAIN (nothing changed)
 * when the series changed since.  A crash at any point leaves the old or
 * the new state (finished by the next writable open).  Returns the number
 * of files dropped or -errno with err. */
int ck_store_reclaim(struct ck_store *st, const char *series, uint64_t stamp, const uint64_t *file_ids,
		     size_t n, ck_import_report_fn report, void *ctx, struct ck_error *err);

/* The packed state of a file version, as the index records it (the chunk
 * table and file maps: docs/format.md, "Packed store"; compaction and gc
 * are in include/ckptfs/packstore.h). */
/* Whether file_id is packed: 1, 0, or -errno. */
int ck_store_file_packed(struct ck_store *st, uint64_t file_id);

/* What compaction recorded for one file version (ckptctl stats). */
struct ck_file_pack_info {
	int mapped;              /* compaction has seen it (0: nothing below is set) */
	int packed;              /* served from packs; else raw, its chunks mapped */
	uint64_t size;
	uint32_t chunks;
	uint64_t dedup_bytes;    /* chunks stored already elsewhere */
	uint64_t delta_bytes;    /* raw bytes of chunks stored as deltas */
	uint64_t plain_bytes;    /* raw bytes of chunks stored self-contained */
	uint64_t stored_bytes;   /* what its new records take in packs (raw: size) */
	/* The lossy tier (docs/design.md): some storages decode within a bound
	 * of their original instead of bit for bit. */
	int lossy;
	unsigned lossy_method;   /* CK_LOSSY_METHOD_* (include/ckptfs/lossy.h) */
	double lossy_bound;      /* every element within lossy_bound * its storage's max |x| */
	uint32_t lossy_storages; /* storages coded lossily */
	double lossy_max_rel;    /* the largest achieved error / max |x| among them */
};

/* A storage coded lossily: what its original was and what was achieved. */
struct ck_lossy_storage {
	uint32_t storage;        /* index in the file's storages (ck_store_list_storages order) */
	enum ck_dtype dtype;
	double max_abs;          /* largest |x| of the original's finite elements */
	double max_err;          /* largest |decoded - original| */
};
/* 0 and *out (mapped 0 when the file has no map), or -errno.
 *
 * A file mapped but not packed (the newest version of a series when it was
 * compacted) is where the chunk table locates its chunks, and older
 * versions are deltas against them: its bytes must stay until a compaction
 * packs it.  Whoever removes store-owned files (reclaim, gc) must keep such
 * a file on disk. */
int ck_store_file_pack_info(struct ck_store *st, uint64_t file_id, struct ck_file_pack_info *out);
/* The storages of file_id coded lossily, in storage order: 0 and *out
 * (free()), *n 0 for an exact file; or -errno. */
int ck_store_file_lossy(struct ck_store *st, uint64_t file_id, struct ck_lossy_storage **out, size_t *n);

/* ---- Recipes (docs/format.md, "Recipes"; include/ckptfs/recipe.h) ----
 *
 * STORE/recipes/NAME.yaml: a recipe's document as it was added.  Names
 * follow ck_recipe_name_ok.  No lock: adding links a synced temporary file
 * to the name (EEXIST when taken), removing unlinks it, and both sync the
 * directory. */
#define CK_STORE_RECIPES_DIR "recipes"

/* Adds recipe name with its text (checked already).  0, -EEXIST, -EINVAL
 * (a bad name), or -errno, with err. */
int ck_store_recipe_add(const char *store, const char *name, const char *text, size_t len, struct ck_error *err);
/* The text of recipe name, NUL-terminated (the caller frees it): 0,
 * -ENOENT, -E2BIG, or -errno, with err. */
int ck_store_recipe_read(const char *store, const char *name, char **text, size_t *len, struct ck_error *err);
/* The names of the recipes, sorted (free with ck_strv_free): 0 or -errno. */
int ck_store_recipe_list(const char *store, char ***names, size_t *n);
/* stat(2) of a recipe's file (its identity tells versions apart). */
struct stat;
int ck_store_recipe_stat(const char *store, const char *name, struct stat *sb);
/* Removes recipe name: 0, -ENOENT, or -errno, with err. */
int ck_store_recipe_remove(const char *store, const char *name, struct ck_error *err);

#endif
