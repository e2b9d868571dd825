/* Private to src/store and the layers above it that work on packs
 * (src/packstore): the packed store's records in the index -- the chunk
 * table (where each chunk lives) and the file maps (which chunks make a
 * file version) -- and the packmaps that keep them durable beside the
 * manifests.  docs/format.md ("Packed store") describes every byte; keep
 * them in step.  Functions taking a txn run inside the caller's LMDB
 * transaction (LMDB's thread rules apply). */
#ifndef CKPTFS_STORE_CHUNK_TABLE_H
#define CKPTFS_STORE_CHUNK_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#include "ckptfs/buf.h"
#include "ckptfs/chunk.h"
#include "ckptfs/error.h"
#include "index.h"

#define CK_DB_CHUNKS "chunks"
#define CK_DB_FMAPS  "fmaps"
#define CK_PACKS_DIR "packs"
#define CK_PACKMAP_SUFFIX ".packmap"
#define CK_PACKMAP_MAGIC "CKPTPMAP"           /* 8 bytes, no NUL */
#define CK_PACKMAP_VERSION 2
#define CK_PACK_ROTATE_BYTES (1ULL << 30)     /* a new pack once one passes 1 GiB */
#define CK_PACK_MAX_CHAIN 64                  /* the largest anchor interval accepted */

/* meta keys: the pack being appended to and the end of its last record
 * that an index transaction made durable. */
#define CK_META_PACK_CUR "pack_cur"
#define CK_META_PACK_END "pack_end"

/* 1 when st has the chunks and fmaps databases, asking the index again
 * when it had not (a reader opened before the first writable open). */
int ck_pack_ready(struct ck_store *st);

/* ---- chunks: XXH3-128 (hi, lo; big-endian) -> where the chunk lives ---- */
enum ck_chunk_where {
	CK_CHUNK_PACKED = 1,
	CK_CHUNK_RAW = 2,
};

struct ck_chunk_loc {
	enum ck_chunk_where where;
	enum ck_codec codec;       /* packed: the record's codec; raw: CK_CODEC_RAW */
	unsigned elem;
	uint32_t raw_len;
	uint32_t tail;             /* longest chain of deltas that rests on this chunk */
	uint32_t pack_id;          /* packed */
	uint64_t offset;           /* packed: record offset; raw: byte offset in the file */
	uint32_t enc_len;          /* packed */
	struct ck_hash128 ref;     /* packed deltas: the reference */
	uint64_t file_id;          /* raw */
	char *path;                /* raw: the physical file (allocated by ck_chunk_loc_get) */
};

void ck_chunk_key(uint8_t out[16], struct ck_hash128 h);
int ck_chunk_loc_put(struct ck_buf *b, const struct ck_chunk_loc *l);
/* 0, -EIO for a record that does not parse, -ENOMEM.  Free with _clear. */
int ck_chunk_loc_get(const MDB_val *v, struct ck_chunk_loc *out);
void ck_chunk_loc_clear(struct ck_chunk_loc *l);
/* Looks h up in txn: 0, -ENOENT, -EIO or -errno. */
int ck_chunk_lookup(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, struct ck_chunk_loc *out);
int ck_chunk_store(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, const struct ck_chunk_loc *l);

/* ---- fmaps: file id -> its file map ---- */
#define CK_FMAP_PACKED 0x01   /* served from chunks; else a raw file with its chunks mapped */
#define CK_FMAP_LOSSY 0x02    /* packed, some storages coded lossily: a lossy section
			       * follows the chunks (docs/format.md, "Lossy records") */

struct ck_fmap_chunk {
	struct ck_hash128 hash;
	uint32_t len;
	unsigned elem;
};

struct ck_fmap {
	unsigned flags;
	uint64_t size;
	uint64_t dedup_bytes, delta_bytes, plain_bytes, stored_bytes;
	struct ck_fmap_chunk *chunks;
	uint32_t nchunks;
	/* CK_FMAP_LOSSY: how, and every storage coded lossily */
	unsigned lossy_method;                 /* CK_LOSSY_METHOD_* (include/ckptfs/lossy.h) */
	double lossy_bound;                    /* relative to each storage's max_abs */
	struct ck_lossy_storage *lossy;
	uint32_t nlossy;
};

int ck_fmap_put(struct ck_buf *b, const struct ck_fmap *m);
/* Parses n bytes: 0, -EIO (with err) when they are not a map whose chunk
 * lengths add up to its size, -ENOMEM. */
int ck_fmap_get(const void *p, size_t n, struct ck_fmap *out, struct ck_error *err);
void ck_fmap_clear(struct ck_fmap *m);
/* fmaps[file_id] in txn: 0, -ENOENT, -EIO or -errno. */
int ck_fmap_lookup(MDB_txn *txn, struct ck_store *st, uint64_t file_id, struct ck_fmap *out);

/* ---- packmaps: STORE/manifests/SERIES/CKPT.packmap ---- */
struct ck_packmap_file {
	char *relpath;
	uint64_t dev, ino, size;      /* the file's identity, as its manifest has it: a map */
	int64_t mtime_ns;             /* applies only to that very file version */
	struct ck_fmap map;
};

struct ck_packmap {
	char *series, *ckpt;      /* whose maps these are */
	struct ck_packmap_file *files;
	size_t nfiles;
};

char *ck_packmap_path(const char *store, const char *series, const char *ckpt);
/* Writes pm durably (temporary file, fsync, rename, fsync of the directory). */
int ck_packmap_store(const char *path, const struct ck_packmap *pm, struct ck_error *err);
/* -ENOENT when there is none, -EBADMSG (err) when damaged. */
int ck_packmap_load(const char *path, struct ck_packmap *out, struct ck_error *err);
/* Parses n untrusted bytes: 0, -EBADMSG, -EPROTONOSUPPORT (err says why)
 * or -ENOMEM; free with _clear. */
int ck_packmap_parse(const void *p, size_t n, struct ck_packmap *out, struct ck_error *err);
void ck_packmap_clear(struct ck_packmap *pm);

/* ---- pack files ---- */
char *ck_pack_path(const char *store, uint32_t pack_id);
/* Pack pack_id of store opened read-only (close-on-exec): the descriptor,
 * or -errno (-ENOENT: no such pack; -ENOMEM).  Its header is not checked. */
int ck_pack_open(const char *store, uint32_t pack_id);

/* Raises the tails along the chain from x: something t deltas deep now
 * rests on x.  0 or -errno. */
int ck_chunk_raise_tails(MDB_txn *txn, struct ck_store *st, struct ck_hash128 x, uint32_t t);

/* "0123...": 32 lowercase hex digits, the high half first. */
void ck_hash128_hex(struct ck_hash128 h, char out[33]);

#endif
