/* The packed store: committed file versions kept as chunks in pack files.
 *
 * Compaction (ck_store_compact) moves committed file versions from raw
 * files into packs (include/ckptfs/pack.h) as a "file map": the file's
 * bytes [0, size) cut into chunks of at most CK_CHUNK_MAX bytes, a new
 * chunk starting at every tensor storage (so a storage's chunks line up
 * version after version), each chunk named by the XXH3-128 of its raw
 * bytes.  The chunk table in the index says where each chunk lives:
 *
 *   - packed: a record of a pack file, possibly a delta (XOR/SUB against a
 *     reference chunk, named by its hash) — see include/ckptfs/chunk.h;
 *   - raw: a byte range of a raw file still in the store (the newest
 *     checkpoint of a series stays raw, and serves as the reference of
 *     the reverse deltas of the versions before it).
 *
 * Identical chunks are stored once (dedup by hash).  A changed chunk of
 * version v of a tensor is stored as the smallest of: planes + zstd, or a
 * delta against the same chunk of the same tensor in the nearest newer
 * version that has it, v+1 unless a partial save left it out (reverse
 * deltas, so the version users resume from is never behind a chain).  Every chunk has a depth: 0 for raw and for self-contained
 * ("anchor") records, 1 + its reference's depth for a delta; no delta is
 * written whose depth would exceed the anchor interval K, so rebuilding
 * any chunk decodes at most K deltas.
 *
 * Durability: records are appended and the pack fdatasynced, then the
 * file's map is written durably beside its manifest
 * (STORE/manifests/SERIES/CKPT.packmap), then one index transaction
 * records the chunks and marks the file packed.  A crash leaves unused
 * records (reclaimed by gc) or a packmap the index lacks (recovery and
 * reindex pick it up); never a packed file whose chunks are missing.
 *
 * docs/format.md ("Packed store") has the byte layouts.
 */
#ifndef CKPTFS_PACKSTORE_H
#define CKPTFS_PACKSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckptfs/chunk.h"
#include "ckptfs/error.h"
#include "ckptfs/store.h"

/* Default anchor interval (the longest delta chain): nearly all of the
 * ratio of longer chains, with rebuilds that read at most four deltas
 * (docs/bench.md, "Anchor interval K"). */
#define CK_PACK_DEFAULT_ANCHOR_K 4

/* ---- The lossy tier (docs/design.md, "The lossy tier") ----
 *
 * A series may have a lossy policy: every checkpoint but the newest
 * keep_newest live ones and those whose step is a multiple of
 * exact_every is coded lossily by compaction: each float32, bfloat16 or
 * float16 tensor of at least CK_LOSSY_MIN_ELEMS elements that no
 * checkpoint kept exact draws from decodes with every element within
 * bound * (the tensor's largest |x|) of its original; everything else
 * (pickles, zip layout, integer tensors, step counters, RNG states,
 * small tensors, configs) stays bit for bit.  Opt-in: a policy is
 * recorded per series (STORE/lossy.conf) or given to one compaction. */
struct ck_lossy_policy {
	double bound;           /* relative to each tensor's max |x|; 0 < bound <= 0.5 */
	unsigned keep_newest;   /* the newest N live checkpoints stay exact; >= 1 */
	uint64_t exact_every;   /* steps that are multiples of it stay exact; 0: none */
	unsigned chain;         /* the longest chain of lossy residuals, 1..CK_PACK_MAX_CHAIN;
	                         * 0: the compaction's anchor interval */
};
#define CK_LOSSY_KEEP_NEWEST_DEFAULT 2
#define CK_LOSSY_MIN_ELEMS 4096
#define CK_LOSSY_BOUND_MAX 0.5
#define CK_LOSSY_CONF "lossy.conf"

/* The policy recorded for series: 0 and *out, -ENOENT when it has none,
 * or -errno with err (a lossy.conf that does not parse). */
int ck_lossy_policy_get(const char *store, const char *series, struct ck_lossy_policy *out, struct ck_error *err);
/* Records p for series (NULL removes it), rewriting STORE/lossy.conf
 * durably (temporary file, fsync, rename) under STORE/commit.lock.  st
 * writable.  0, -EINVAL (a policy or series name out of range), or
 * -errno with err. */
int ck_lossy_policy_set(struct ck_store *st, const char *series, const struct ck_lossy_policy *p,
			struct ck_error *err);
/* Every recorded policy. */
struct ck_lossy_policy_entry {
	char *series;
	struct ck_lossy_policy p;
};
/* Parses lossy.conf text (untrusted): 0 and *out, n (free with
 * ck_lossy_policies_free), or -EINVAL with err naming the line. */
int ck_lossy_policies_parse(const char *text, size_t len, struct ck_lossy_policy_entry **out, size_t *n,
			    struct ck_error *err);
/* STORE/lossy.conf's policies (none when it does not exist). */
int ck_lossy_policies_load(const char *store, struct ck_lossy_policy_entry **out, size_t *n, struct ck_error *err);
void ck_lossy_policies_free(struct ck_lossy_policy_entry *v, size_t n);
/* 0 when p is a policy compaction can apply, else -EINVAL with err. */
int ck_lossy_policy_check(const struct ck_lossy_policy *p, struct ck_error *err);

/* What a checkpoint coded lossily saved (or, in a dry run, would). */
struct ck_lossy_report {
	const char *series, *ckpt;
	int64_t step;
	double bound;
	uint64_t files;          /* files coded lossily */
	uint64_t storages;       /* storages coded lossily */
	uint64_t logical_bytes;  /* the files' sizes */
	uint64_t before_bytes;   /* what they took before: packed records, or raw sizes */
	uint64_t after_bytes;    /* the records they take now */
	double max_rel;          /* the largest achieved error / max |x| of a storage */
};
typedef void (*ck_lossy_report_fn)(void *ctx, const struct ck_lossy_report *r);

struct ck_compact_opts {
	const char *series;     /* NULL: every series */
	unsigned anchor_k;      /* 0: CK_PACK_DEFAULT_ANCHOR_K */
	int level;              /* zstd level; 0: CK_CHUNK_DEFAULT_LEVEL */
	unsigned keep_raw;      /* raw files of the newest N checkpoints of a
	                         * series are kept; older store-owned raw files
	                         * of packed versions are removed once packed.
	                         * 0 keeps every raw file. */
	volatile int *stop;     /* when non-NULL and set, stops between files */
	int reclaim_delay;      /* seconds between recording versions packed and
				 * removing their raw files (keep_raw), so that readers
				 * on other nodes move to the packs first: 0 is
				 * CK_SHARED_RECLAIM_DELAY on a store on a shared
				 * filesystem and none on a local one; < 0 none */
	/* Lossy tier: the policy applied to the series compacted, instead of
	 * the recorded ones (NULL: each series' recorded policy, if any). */
	const struct ck_lossy_policy *lossy;
	int no_lossy;           /* apply no lossy policy at all */
	int dry_run;            /* code the lossy candidates, report, write
	                         * nothing; the exact pass is skipped (st may
	                         * be read-only) */
	ck_lossy_report_fn lossy_report;   /* per checkpoint coded lossily */
	void *lossy_report_ctx;
};

/* The default wait before a run on a store on a shared filesystem removes
 * what readers on other nodes may still use (raw files of packed versions,
 * packs gc emptied): longer than their refresh (-o refresh=, 5 s). */
#define CK_SHARED_RECLAIM_DELAY 15

/* What compaction did, summed over the files it packed. */
struct ck_compact_stats {
	uint64_t files;             /* file versions packed */
	uint64_t logical_bytes;     /* their sizes */
	uint64_t chunks;            /* chunks in their maps */
	uint64_t dedup_chunks, dedup_bytes;   /* already stored: cost nothing */
	uint64_t delta_chunks, delta_bytes;   /* stored as XOR/SUB deltas (raw bytes) */
	uint64_t plain_chunks, plain_bytes;   /* stored self-contained (raw bytes) */
	uint64_t stored_bytes;      /* record bytes appended to packs */
	uint64_t raw_removed_bytes; /* raw files removed (keep_raw) */
	uint64_t lossy_files;       /* file versions coded lossily */
	uint64_t lossy_logical;     /* their sizes */
	uint64_t lossy_chunks, lossy_bytes;   /* chunks coded lossily (raw bytes) */
	double seconds;             /* wall time */
};

/* Progress: called after each file with what was done so far. */
typedef void (*ck_compact_progress_fn)(void *ctx, const char *series, const char *ckpt,
				       const char *relpath, const struct ck_compact_stats *so_far);

/* Packs every committed file version not packed yet, except those of the
 * newest live checkpoint of each series (they stay raw: resume reads them
 * at full speed, and they are the references of the reverse deltas; their
 * chunks are mapped as raw locations).  Deleted checkpoints whose files
 * the index still holds are packed too.  Files of kind CK_FILE_BAD are
 * skipped; a file whose bytes no longer hash as recorded is not packed
 * (the error names it, the other checkpoints go on).  Holds
 * STORE/commit.lock and STORE/index.lock (shared) while writing one
 * checkpoint (one compaction or commit at a time); readers are never
 * blocked (LMDB MVCC; a file's raw bytes stay until its packed form is
 * committed).  Crash-safe at every point.
 *
 * Then, for a series with a lossy policy (opts->lossy, else its recorded
 * one, unless opts->no_lossy), the checkpoints the policy codes lossily,
 * oldest first: each file's float tensors as lossy records (a residual on
 * the same tensor's previous lossy version where that is smaller, the
 * chain no longer than the anchor interval), the rest as exact chunks, the
 * zip CRC-32s of the records changed; the records made durable and read
 * back (every chain decoded to its hash) before the packmap and the index
 * transaction make them the file's map.  The exact pass leaves those
 * checkpoints alone; their raw files go as packed ones do (keep_raw), and
 * exact records nothing uses any more go at the next gc.  A file once
 * lossy stays as it is.
 *
 * 0 and *stats (may be NULL), or -errno with err: the first checkpoint
 * that could not be compacted. */
int ck_store_compact(struct ck_store *st, const struct ck_compact_opts *opts,
		     ck_compact_progress_fn progress, void *ctx, struct ck_compact_stats *stats,
		     struct ck_error *err);

/* ---- Reading packed files (thread-safe) ---- */

/* A cache of decoded chunks shared by readers, bounded in bytes; one per
 * process is enough.  Besides the chunks read, it keeps the exact packed
 * chunks a chain decode of a file passes through (the same chunks of newer
 * versions) when the file is at most an eighth of the bound.
 * 0 or -ENOMEM. */
struct ck_chunk_cache;
int ck_chunk_cache_new(uint64_t max_bytes, struct ck_chunk_cache **out);
/* For one thread that inserts chunks in order and looks up each one a
 * while later (compaction's recent versions): one list under one lock,
 * first in, first out (a hit does not make an entry recent), so its bound
 * holds exactly what was inserted last; chunks passed through are not
 * kept.  0 or -ENOMEM. */
int ck_chunk_cache_new_fifo(uint64_t max_bytes, struct ck_chunk_cache **out);
void ck_chunk_cache_free(struct ck_chunk_cache *c);
/* Hits, misses and bytes held, for stats and tests. */
void ck_chunk_cache_counters(const struct ck_chunk_cache *c, uint64_t *hits, uint64_t *misses,
			     uint64_t *bytes);

/* One packed file version opened for reading: its map, and the chunks
 * resolved through the index of st (which must stay open). */
struct ck_packed_file;
/* 0, -ENOENT when file_id is not packed, or -errno with err. */
int ck_packed_open(struct ck_store *st, uint64_t file_id, struct ck_chunk_cache *cache,
		   struct ck_packed_file **out, struct ck_error *err);
void ck_packed_close(struct ck_packed_file *pf);
uint64_t ck_packed_size(const struct ck_packed_file *pf);
/* Reads len bytes at off (clamped to the size): every chunk is decoded
 * (through at most K deltas) and checked against its hash; a mismatch, a
 * damaged record or a missing pack is -EIO with err naming the chunk's
 * hash, the pack file and offset — never wrong bytes.  Returns the bytes
 * read (>= 0) or -errno. */
ssize_t ck_packed_pread(struct ck_packed_file *pf, void *buf, size_t len, uint64_t off,
			struct ck_error *err);
/* Hints that [off, off + len) will be read soon (sequential readers):
 * two background threads decode those chunks into the file's slots, where
 * they wait until read (the cache, when there is one, takes those pushed
 * out first).  Never fails. */
void ck_packed_prefetch(struct ck_packed_file *pf, uint64_t off, uint64_t len);
/* A byte range of a file. */
struct ck_byte_range {
	uint64_t off, len;
};
/* The same for ranges r[0..n) that will be read in that order, e.g. a
 * loader's next storages, which need not follow each other in the file
 * (at most 64 chunks are queued; the rest is dropped). */
void ck_packed_prefetch_ranges(struct ck_packed_file *pf, const struct ck_byte_range *r, size_t n);

/* ---- Checking and reclaiming ---- */

/* Every chunk of every packed file decoded and checked (verify): calls
 * bad(ctx, file_id, off, len, why) for each chunk that does not decode to
 * its hash.  0 (damage reported through bad), or -errno. */
typedef void (*ck_packed_bad_fn)(void *ctx, uint64_t file_id, uint64_t off, uint64_t len,
				 const char *why);
int ck_store_verify_packs(struct ck_store *st, ck_packed_bad_fn bad, void *ctx,
			  uint64_t *chunks_checked, struct ck_error *err);

/* ---- Garbage collection (ckptctl gc) ---- */

struct ck_sweep_opts {
	int dry_run;                 /* only count what would go */
	unsigned rewrite_below_pct;  /* a pack whose live records fill less than
				      * this share of it is rewritten; 0: 50 */
	int reclaim_delay;           /* seconds between recording the moves and emptying
				      * the packs moved from (as ck_compact_opts) */
};

struct ck_sweep_stats {
	uint64_t live_chunks;        /* chunk-table entries that stay */
	uint64_t dropped_chunks;     /* entries nothing live uses (dropped) */
	uint64_t dropped_fmaps;      /* file maps of files the index dropped */
	uint64_t packs;              /* pack files looked at */
	uint64_t packs_rewritten;    /* live records copied to a new pack */
	uint64_t packs_emptied;      /* no live record: emptied */
	uint64_t records_copied, bytes_copied;
	uint64_t dead_bytes;         /* bytes of the rewritten packs that no live chunk used */
	uint64_t leftovers_removed;  /* packs an earlier sweep left unreferenced */
	uint64_t pack_bytes_before, pack_bytes_after;   /* dry run: after = expected */
};

/* Sweeps the packed store: every chunk-table entry that no file map of a
 * file version the index holds uses, directly or as (a reference on) the
 * chain of a delta, is dropped, with the file maps of files the index no
 * longer has; a pack whose live records fill less than
 * rewrite_below_pct of it is rewritten (live records appended to a new
 * pack, fsync, one index transaction relocating them and making the new
 * pack the current one, then the old pack is emptied to a bare header:
 * packs keep their numbers).  A crash at any point leaves the old or the
 * new state readable; what it leaves unreferenced goes at the next sweep.
 * Holds STORE/commit.lock and STORE/index.lock (shared), like compaction.
 * Deleting checkpoints (ck_delete_checkpoint) is what makes their chunks
 * unused.  A damaged record to copy stops the sweep before anything is
 * dropped (-EIO with err).  st may be read-only for a dry run.  0 and
 * *stats (may be NULL), or -errno with err. */
int ck_store_sweep_packs(struct ck_store *st, const struct ck_sweep_opts *opts, struct ck_sweep_stats *stats,
			 struct ck_error *err);

#endif
