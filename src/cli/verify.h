/* ckptctl verify: what is damaged in a store, and which composites depend
 * on it.  Two passes:
 *
 *   verify_scan()  walks the files in scope through the index: identity of
 *                  each physical file and (content mode) the XXH3-128 of
 *                  every storage / tensor byte range, as import recorded it;
 *   verify_deps()  asks the view which composites of the damaged files'
 *                  series serve tensors from damaged bytes, or cannot be
 *                  built at all because a file they need changed.
 *
 * The scan needs the store open, the dependents need a view of it; never
 * both at once (one LMDB environment per process at a time).
 */
#ifndef CKPTFS_CLI_VERIFY_H
#define CKPTFS_CLI_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/store.h"

enum vfy_reason {
	VFY_MISSING,         /* the physical file is gone */
	VFY_CHANGED,         /* identity (dev, ino, size, mtime) differs from import */
	VFY_UNREADABLE,      /* cannot be opened or read (detail: why) */
	VFY_SHORT_READ,      /* a byte range ends past the end of the file */
	VFY_HASH_MISMATCH,   /* a byte range no longer hashes to what import recorded */
};

/* One damaged thing: a whole file (storage == NULL: the mount refuses the
 * file) or one byte range of it. */
struct vfy_damage {
	char *series, *ckpt;
	int64_t step;
	char *relpath;       /* path inside the checkpoint; "" for a single-file checkpoint */
	char *src_path;      /* the physical file */
	enum vfy_reason reason;
	char *detail;        /* what changed, or why it cannot be read; may be NULL */
	char *storage;       /* storage key (torch) or tensor name (safetensors); NULL for a whole file */
	uint64_t offset, length;   /* byte range in src_path (whole file: 0 and the size at import) */
	char **tensors;      /* logical tensors using the range (NULL for a whole file) */
	size_t ntensors;
	uint32_t file_tensors;   /* how many tensors the file has */
};

/* A file refused at import: never served, listed for completeness. */
struct vfy_bad {
	char *series, *ckpt, *relpath, *src_path, *error;
};

/* A composite file that serves damaged bytes, or cannot be served. */
struct vfy_dep_tensor {
	char *name;
	size_t damage;       /* index into vfy_report.dmg */
};

struct vfy_dependent {
	char *series, *ckpt, *relpath;
	int unservable;      /* the composite cannot be built: every read of the file fails */
	char *why;           /* unservable: the error */
	struct vfy_dep_tensor *tensors;
	size_t ntensors;
	size_t *sources;     /* damages this file depends on (indices into vfy_report.dmg) */
	size_t nsources;
};

/* A checkpoint file whose composite may depend on damage: same series and
 * relative path as a damaged file, at the same or a later step. */
struct vfy_target {
	char *series, *ckpt, *relpath;
	int64_t step;
};

/* A chunk of a packed file that does not decode to its hash
 * (ck_store_verify_packs), found once for the whole store. */
struct vfy_pack_bad {
	uint64_t file_id, offset, length;
	char *why;
};

struct vfy_packs {
	int loaded;
	uint64_t chunks_checked;
	struct vfy_pack_bad *bad;
	size_t nbad;
};

struct vfy_report {
	int content;                 /* content mode: byte ranges re-hashed */
	int progress;                /* show progress on stderr (a TTY) */
	size_t files, files_ok;      /* files checked (bad ones excluded), and those found intact */
	uint64_t bytes_total, bytes_hashed;
	struct vfy_damage *dmg;
	size_t ndmg;
	struct vfy_bad *bad;
	size_t nbad;
	struct vfy_target *targets;
	size_t ntargets;
	struct vfy_dependent *deps;
	size_t ndeps;
	struct vfy_packs packs;      /* packed files: checked through their chunks */
};

const char *vfy_reason_name(enum vfy_reason r);
/* "SERIES/CKPT/RELPATH" (or "SERIES/CKPT" for a single-file checkpoint); caller frees. */
char *vfy_path(const char *series, const char *ckpt, const char *relpath);

/* Adds the bytes verify_scan will hash to r->bytes_total (for progress). 0 or -errno. */
int verify_count(struct ck_store *st, const struct ck_ckpt_info *ckpts, size_t n, struct vfy_report *r);
/* Checks the files of the checkpoints (of one series) in ckpts[0..n). 0 or -errno. */
int verify_scan(struct ck_store *st, const struct ck_ckpt_info *ckpts, size_t n, struct vfy_report *r);
/* After the scans: the composites to look at for dependents (r->targets). 0 or -errno. */
int verify_targets(struct ck_store *st, struct vfy_report *r);
/* Opens a view of store_dir and fills r->deps from r->targets. 0 or -errno (err says why). */
int verify_deps(const char *store_dir, struct vfy_report *r, struct ck_error *err);

/* verify_packs.c: decodes every chunk of every packed file once into
 * r->packs (first call only).  0 or -errno (err says why). */
int verify_packs_load(struct ck_store *st, struct vfy_report *r, struct ck_error *err);
void verify_packs_free(struct vfy_packs *p);

void vfy_report_free(struct vfy_report *r);

#endif
