/* Private to src/store and the packs in it (src/packstore): checkpoint
 * manifests, the durable record of what each committed checkpoint holds and
 * where (docs/format.md, "Manifests"). Every commit writes
 * STORE/manifests/<series>/<checkpoint>.manifest before its index
 * transaction commits; `ckptctl reindex` rebuilds the index from these
 * files alone. A manifest is text: one record per line, strings quoted and
 * escaped so that the file is printable ASCII, and a last line with the
 * XXH3-128 of everything before it, so that a torn or edited manifest is
 * detected and never half-used. */
#ifndef CKPTFS_STORE_MANIFEST_H
#define CKPTFS_STORE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/buf.h"
#include "ckptfs/error.h"
#include "ckptfs/store.h"
#include "ckptfs/ingest.h"

/* Version 1: files without owners, absolute paths; version 2 adds each
 * file's owner, group and mode; version 3 (with owners) records paths
 * inside the store relative to its root; version 4 may also hold symbolic
 * links (kind=symlink, with their target) and empty directories (kind=dir).
 * Readers read all four; writers write 4 for a checkpoint that holds a
 * link or an empty directory, else 3, or 1 for a checkpoint whose files
 * have no owners recorded (one imported before owners were, rewritten by
 * a reclaim). */
#define CK_MANIFEST_VERSION 4
#define CK_MANIFEST_VERSION_PLAIN 3
#define CK_MANIFEST_VERSION_NO_OWNER 1
#define CK_MANIFEST_OLDEST 1
#define CK_MANIFEST_DIR "manifests"
#define CK_MANIFEST_SUFFIX ".manifest"
/* Bounds on untrusted manifests (the writer refuses what the parser would). */
#define CK_MANIFEST_MAX_BYTES (256u << 20)
#define CK_MANIFEST_MAX_STRING (1u << 20)      /* decoded bytes of one string */
#define CK_MANIFEST_MAX_FILES (1u << 20)
#define CK_MANIFEST_MAX_NAME 255               /* series and checkpoint names */

/* Everything the index holds for one checkpoint and its series.  Ids are
 * not part of it: they are the index's own and change on reindex. */
struct ck_manifest {
	int version;                  /* format: 0 writes the one its files need; parse sets what it read */
	struct ck_ckpt_info ckpt;     /* series, name, step, is_file, src_path (id unused); paths
					 as recorded: absolute, or (version 2) relative to the store */
	int64_t imported_ns;
	char *pattern;                /* the series' stored step pattern; NULL = built-ins */
	int64_t series_created_ns;
	struct ck_ingest *files;      /* info (ids unused), storages and tensors; relpath order */
	size_t nfiles;
};

/* Appends the manifest text to out.  0, -ENOMEM, or -EINVAL (with err) for
 * what a manifest cannot hold (a string over the bounds, a NUL byte...).
 * Files must be in strictly increasing relpath order, as import makes them. */
int ck_manifest_write(struct ck_buf *out, const struct ck_manifest *m, struct ck_error *err);

/* Parses untrusted manifest text.  0 and *out (free with
 * ck_manifest_clear); -EBADMSG when the checksum line is missing or does not
 * match (torn, truncated or edited); -EPROTONOSUPPORT for another format
 * version; -EINVAL for content that is not a valid manifest; -E2BIG over a
 * bound; -ENOMEM.  err says why, with the line number. */
int ck_manifest_parse(const char *text, size_t len, struct ck_manifest *out, struct ck_error *err);
void ck_manifest_clear(struct ck_manifest *m);

/* 0 if name can be a series or checkpoint name (and so a file name in the
 * manifests directory), -EINVAL otherwise. */
int ck_manifest_check_name(const char *name);

/* STORE/manifests/<series>/<file> for (series, name), newly allocated, or
 * NULL.  Long checkpoint names are shortened with a hash of the name: the
 * file name only locates a manifest, the manifest itself names its
 * checkpoint. */
char *ck_manifest_path(const char *store, const char *series, const char *name);

/* Replacing a checkpoint's manifest so that a failed index commit can put
 * the previous one back. */
struct ck_manifest_txn {
	char *path;       /* the manifest's path */
	char *backup;     /* a hard link to the previous manifest, or NULL */
	int had_old;      /* a previous manifest existed */
};

/* Writes m durably to its path (temporary file, fsync, rename, fsync of the
 * directory), keeping the previous manifest as a backup.  Paths under
 * store are recorded relative to it, in the current format version.  0 or -errno with
 * err.  Then exactly one of _commit (the index commit went through) or
 * _rollback (it did not) must follow. */
int ck_manifest_store(const char *store, const struct ck_manifest *m, struct ck_manifest_txn *tx,
		      struct ck_error *err);
void ck_manifest_store_commit(struct ck_manifest_txn *tx);
void ck_manifest_store_rollback(struct ck_manifest_txn *tx);

/* Reads and parses the manifest at path (a regular file of at most
 * CK_MANIFEST_MAX_BYTES).  Same return values as ck_manifest_parse, or
 * -errno for I/O; err says why (without the path).  Paths recorded
 * relative to the store are made absolute against root (NULL: left as
 * recorded). */
int ck_manifest_load(const char *root, const char *path, struct ck_manifest *out, struct ck_error *err);

#endif
