/* Private to src/store: the packed store's index records, packmaps, pack
 * files and the chunk resolver shared by compaction, reading and verify.
 * docs/format.md ("Packed store") describes every byte; keep them in step. */
#ifndef CKPTFS_STORE_PACK_STORE_H
#define CKPTFS_STORE_PACK_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#include "ckptfs/buf.h"
#include "ckptfs/chunk.h"
#include "ckptfs/error.h"
#include "ckptfs/packstore.h"
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

/* Open pack descriptors of a store, shared by threads, and a few raw
 * files that chains end in (a chunk read should not cost an open). */
#define CK_RAW_FDS 8

struct ck_pack_fds {
	pthread_mutex_t lock;
	int *fd;
	size_t n;
	struct {
		uint64_t file_id;
		int fd;                 /* -1: free */
		unsigned users;         /* threads reading through it now */
		uint64_t used;          /* when last taken, for replacement */
	} raw[CK_RAW_FDS];
	uint64_t clock;
};
void ck_pack_fds_init(struct ck_pack_fds *f);
void ck_pack_fds_close(struct ck_pack_fds *f);
/* The descriptor of pack_id (opened on first use): >= 0 or -errno. */
int ck_pack_fds_get(struct ck_pack_fds *f, const char *store, uint32_t pack_id);
/* A descriptor of the raw file of a raw location (kept open for the next
 * chunks): >= 0 or -errno; give it back with ck_pack_fds_put_raw. */
int ck_pack_fds_get_raw(struct ck_pack_fds *f, const struct ck_chunk_loc *l);
void ck_pack_fds_put_raw(struct ck_pack_fds *f, int fd);

/* Scratch of one decoding thread: a chunk context and buffers. */
struct ck_decoder {
	struct ck_chunk_ctx *ctx;
	uint8_t *payload;
	uint8_t *buf[2];            /* a chain's intermediate chunks */
	uint8_t *out;               /* a whole chunk for the caller */
};
int ck_decoder_init(struct ck_decoder *d);
void ck_decoder_clear(struct ck_decoder *d);

/* pack_pool.c: decoders and CK_CHUNK_MAX-byte buffers reused by every
 * packed file read through st, so their pages are faulted in once per
 * open store.  take returns NULL when out of memory; give frees what the
 * pool has no room for (NULL is ignored). */
int ck_pack_pool_new(struct ck_pack_pool **out);
void ck_pack_pool_free(struct ck_pack_pool *p);
struct ck_decoder *ck_pool_decoder_take(struct ck_store *st);
void ck_pool_decoder_give(struct ck_store *st, struct ck_decoder *d);
uint8_t *ck_pool_buffer_take(struct ck_store *st);
void ck_pool_buffer_give(struct ck_store *st, uint8_t *b);

/* Decodes the chunk h (raw_len bytes) into out (CK_CHUNK_MAX bytes) by
 * following its chain in txn; cache (may be NULL) supplies decoded
 * references.  Every step is hash-checked: -EIO with err naming the chunk,
 * pack or file, offset and the failing step.  *depth (may be NULL) gets
 * the number of deltas decoded.  0 or -errno. */
int ck_chunk_resolve(MDB_txn *txn, struct ck_store *st, struct ck_pack_fds *fds, struct ck_decoder *d,
		     struct ck_chunk_cache *cache, struct ck_hash128 h, uint8_t *out, uint32_t *len,
		     unsigned *depth, struct ck_error *err);
/* Walks h's chain without decoding: its delta depth, and whether avoid
 * appears on it (a delta against h would close a cycle).  0 or -errno. */
int ck_chunk_depth(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, struct ck_hash128 avoid,
		   unsigned *depth, int *meets);

/* Cache internals used by the resolver: copies a cached chunk into out
 * (1) or reports a miss (0); inserts a decoded chunk. */
int ck_chunk_cache_copy(struct ck_chunk_cache *c, struct ck_hash128 h, uint8_t *out, uint32_t *len);
/* The same for bytes [off, off + n) of the chunk only (a read of part of
 * it): 1 when cached and that long, with *len its whole length. */
int ck_chunk_cache_read(struct ck_chunk_cache *c, struct ck_hash128 h, uint32_t off, uint32_t n, uint8_t *out,
			uint32_t *len);
void ck_chunk_cache_insert(struct ck_chunk_cache *c, struct ck_hash128 h, const uint8_t *p, uint32_t len);
int ck_chunk_cache_has(struct ck_chunk_cache *c, struct ck_hash128 h);
/* Raises the cache's bound to max_bytes (never lowers it). */
void ck_chunk_cache_grow(struct ck_chunk_cache *c, uint64_t max_bytes);

/* Raises the tails along the chain from x: something t deltas deep now
 * rests on x.  0 or -errno. */
int ck_chunk_raise_tails(MDB_txn *txn, struct ck_store *st, struct ck_hash128 x, uint32_t t);

/* "0123...": 32 lowercase hex digits, the high half first. */
void ck_hash128_hex(struct ck_hash128 h, char out[33]);


#endif
