/* Private to compaction (pack_compact.c, and pack_lossy.c for the lossy
 * tier): one run's state and the steps both passes take -- file versions
 * cut into chunks, their neighbouring versions as delta references, exact
 * chunks stored, and one checkpoint committed as compaction commits it
 * (records durable, packmap, one index transaction). */
#ifndef CKPTFS_PACKSTORE_COMPACT_INT_H
#define CKPTFS_PACKSTORE_COMPACT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>
#include <xxhash.h>

#include "ckptfs/pack.h"
#include "ckptfs/packstore.h"
#include "pack_layout.h"
#include "packstore_int.h"

/* The recent cache must hold the newer version of the checkpoint being
 * packed: a chunk is inserted when its version is mapped and asked for as
 * a reference a whole checkpoint of inserts later.  It starts small and
 * grows to twice the largest checkpoint mapped, up to RECENT_CACHE_MAX;
 * sized by the file instead, a checkpoint of two files thrashes it and
 * most references are decoded again from the packs.  Every byte of it
 * is fresh memory the first time, a page fault per 4 KiB, so a cache
 * larger than the checkpoints costs time.  It is first in, first out: the
 * newer version's chunks leave before the ones of the version being packed
 * (an LRU that a reference's lookup refreshes interleaves the two and
 * evicts the next reference), and one list, not the readers' 16 shards,
 * each bounded to a 16th, which a checkpoint of a few chunks overflows
 * (docs/bench.md, "packs.sh"). */
#define RECENT_CACHE_MIN (8ull << 20)
#define RECENT_CACHE_MAX (256ull << 20)

struct compact {
	struct ck_store *st;
	const struct ck_compact_opts *o;
	unsigned k;
	ck_compact_progress_fn progress;
	void *pctx;
	struct ck_compact_stats s;
	struct ck_error *err;
	struct ck_pack_writer *w;      /* NULL in a dry run */
	uint32_t pack_id;
	struct ck_pack_fds fds;
	struct ck_decoder dec;
	struct ck_chunk_ctx *enc;
	uint8_t *raw;
	int first_rc;             /* the first checkpoint that could not be compacted */
	unsigned seq;             /* checkpoints written so far, for the crash hooks */
	struct ck_chunk_cache *recent;   /* chunks of the versions just mapped: the next
					  * version's references, without decoding */
	int dry;                  /* a lossy dry run: encode and count, write nothing */
	uint32_t start_pack;      /* where the pack writer stood when the locks were taken: */
	uint64_t start_end;       /* the journal names the records appended since */
	double last_journaled;    /* when the last packed versions were journaled (monotonic) */
};

/* The crash test hook (store/staging.h) at stage, and at "stage-N" during
 * the N-th checkpoint written (from 1). */
void ck_compact_crash_point(const struct compact *c, const char *stage);

/* A file version, cut into chunks. */
struct fver {
	const struct ck_file_info *f;
	struct ck_storage_info *s;
	size_t ns;
	struct ck_tensor_info *t;
	size_t nt;
	struct ck_layout lay;
};
int ck_compact_fver_load(struct ck_store *st, const struct ck_file_info *f, struct fver *v);
void ck_compact_fver_clear(struct fver *v);

/* Other versions of a file (the same path in the nearest other
 * checkpoints, nearest first) whose chunks serve as delta references: a
 * tensor a partial save left out of the next checkpoint is found in a
 * later one.  Eight: a layer an LLMTailor-like policy saves every fifth
 * time finds its last version (docs/bench.md). */
#define NEWER_MAX 8

struct refs {
	struct fver v[NEWER_MAX];
	struct ck_fmap m[NEWER_MAX];
	size_t n;
};
void ck_compact_refs_clear(struct refs *r);
/* The versions of relpath in the files nf[k] (nn[k] of them) of nother
 * checkpoints, those with a file map. */
void ck_compact_refs_load(struct compact *c, MDB_txn *txn, struct ck_file_info *const *nf, const size_t *nn,
			  size_t nother, const char *relpath, struct refs *r);
/* The reference for a chunk: the same chunk (same tensor, same number
 * inside it) of the nearest version in r that has it with the same length
 * and other bytes than h: 1 and *ref, or 0. */
int ck_compact_pick_ref(const struct refs *r, const struct ck_layout_chunk *lc, struct ck_hash128 h,
			struct ck_hash128 *ref);

/* Stores the exact chunk h (its lc->len bytes in c->raw) as a pack record,
 * self-contained or a delta on a reference from refs, replacing a raw
 * location into the file being packed (keeping its tail); counts it in
 * map.  In a dry run only counts what it would store. */
int ck_compact_pack_chunk(struct compact *c, MDB_txn *txn, struct ck_hash128 h, const struct ck_layout_chunk *lc,
			  uint32_t tail, const struct refs *refs, struct ck_fmap *map);
/* The exact chunk h of file version v, whose chunk-table lookup gave
 * found (0 with *loc, or -ENOENT): stored already (packed, or raw in
 * another file) it costs nothing and counts as dedup; else it is packed
 * by ck_compact_pack_chunk.  Clears *loc. */
int ck_compact_store_chunk(struct compact *c, MDB_txn *txn, const struct fver *v, struct ck_hash128 h,
			   const struct ck_layout_chunk *lc, int found, struct ck_chunk_loc *loc,
			   const struct refs *refs, struct ck_fmap *map);
/* A new pack once the current one passed CK_PACK_ROTATE_BYTES. */
int ck_compact_maybe_rotate(struct compact *c);

/* The files of a checkpoint (none for NULL). */
int ck_compact_files_of(struct ck_store *st, const struct ck_ckpt_info *ck, struct ck_file_info **f, size_t *n);

/* What compacting one checkpoint starts from, in either pass: its files,
 * those of the checkpoints its delta references come from (nearest
 * first), and the index transaction it is written in. */
struct ckpt_job {
	struct ck_file_info *f;
	size_t n;
	struct ck_file_info *rf[NEWER_MAX];
	size_t rn[NEWER_MAX];
	size_t nrefs;
	MDB_txn *txn;             /* read-only in a dry run */
};
/* Lists ck's files and those of refs[0..nrefs) (up to NEWER_MAX), begins
 * the transaction, and sizes c->recent for the checkpoint.  0 or -errno
 * with c->err; ck_compact_job_end either way. */
int ck_compact_job_begin(struct compact *c, const struct ck_ckpt_info *ck, const struct ck_ckpt_info *const *refs,
			 size_t nrefs, struct ckpt_job *j);
/* Aborts the transaction if it is still open (set j->txn to NULL once it
 * is committed) and frees the lists. */
void ck_compact_job_end(struct ckpt_job *j);

/* Makes the records appended for ck durable, writes its packmap (every
 * file's map as txn holds it), the pack position, and commits txn; txn is
 * gone afterwards, committed or not.  Crash points: PREFIX-synced,
 * PREFIX-packmap, PREFIX-committed.  before_packmap, when not NULL, runs
 * between the sync and the packmap (the lossy tier re-reads its records
 * there).  0 or -errno with c->err. */
int ck_compact_commit(struct compact *c, MDB_txn *txn, const struct ck_ckpt_info *ck, const struct ck_file_info *f,
		      size_t n, const char *prefix, int (*before_packmap)(struct compact *, MDB_txn *, void *),
		      void *arg);
int ck_compact_put_fmap(MDB_txn *txn, struct ck_store *st, uint64_t file_id, const struct ck_fmap *m);

/* Runs fn(c, arg) under STORE/commit.lock and the index lock, as a commit,
 * after following the pack position a gc may have moved. */
int ck_compact_locked(struct compact *c, int (*fn)(struct compact *, void *), void *arg);

/* Logs that ck could not be compacted (c->err says why) and keeps the
 * first such rc for the caller. */
void ck_compact_note_failure(struct compact *c, const struct ck_ckpt_info *ck, int rc);

/* ---- the lossy tier (pack_lossy.c) ---- */

/* Which of a series' checkpoints ck[0..n) (step order) policy p codes
 * lossily: candidate[i] set (the exact pass leaves them alone).  0 or
 * -errno with c->err. */
int ck_compact_lossy_plan(struct compact *c, const struct ck_ckpt_info *ck, size_t n, const struct ck_lossy_policy *p,
			  unsigned char *candidate);
/* Codes the candidates, oldest first, each under the locks as one
 * commit; a checkpoint that fails is noted (ck_compact_note_failure) and
 * the others go on. */
void ck_compact_lossy_series(struct compact *c, const struct ck_ckpt_info *ck, size_t n,
			     const struct ck_lossy_policy *p, const unsigned char *candidate);

#endif
