/* Private to src/ingest: what the per-format ingesters share (the window
 * on the file they read through, building records, reading and hashing),
 * and their entry points, called by the dispatcher (ingest.c). */
#ifndef CKPTFS_INGEST_INGESTER_H
#define CKPTFS_INGEST_INGESTER_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/layers.h"
#include "ckptfs/pickle.h"
#include "ckptfs/ingest.h"

/* State shared by the per-format ingesters for one file.  An ingester
 * sees the window [base, base + size) of the file as a file of its own:
 * reads are relative to base; the offsets it records are absolute. */
struct ck_ingest_io {
	int fd;
	uint64_t base;                /* 0, or where a DCP blob starts */
	uint64_t size;
	const char *prefix;           /* NULL, or put before storage keys and tensor names ("3/") */
	size_t st_from;               /* storages recorded before this window (in->st[0..st_from)) */
	const char *name;             /* basename, for classification */
	const struct ck_layer_rules *rules;
	const struct ck_ingest_prev *prev;   /* NULL unless the file is unchanged */
	uint8_t *buf;                 /* read buffer */
	size_t bufsize;
};

/* Per format; same return convention as ck_ingest_file. */
int ck_ingest_torch(struct ck_ingest_io *io, struct ck_ingest *in);
/* A DCP data file (*.distcp): kind other, served as it is, with the tensors
 * of the torch.save blobs it is made of indexed when they all parse. */
int ck_ingest_distcp(struct ck_ingest_io *io, struct ck_ingest *in);
int ck_ingest_safetensors(struct ck_ingest_io *io, struct ck_ingest *in);
int ck_ingest_safetensors_index(struct ck_ingest_io *io, struct ck_ingest *in);

/* Helpers for the ingesters. */
/* Marks the file BAD with a reason (drops storages and tensors); returns 0,
 * or -ENOMEM if even the message cannot be kept. */
int ck_ingest_bad(struct ck_ingest *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forgets what was parsed: the file is kind other, served as its bytes. */
void ck_ingest_as_bytes(struct ck_ingest *in);
int ck_ingest_add_storage(struct ck_ingest *in, const char *key, uint64_t offset, uint64_t length);
int ck_ingest_add_tensor(struct ck_ingest *in, const char *name, const char *layer, enum ck_dtype dtype,
			 int ndim, const uint64_t *shape, const char *storage_key, uint64_t storage_offset);
/* Copies the previous import's hash of each storage of the window (same
 * offset and length: the file is unchanged, whatever the storage was
 * named).  1 if every one got one, 0 if it must be hashed. */
int ck_ingest_reuse_hashes(const struct ck_ingest_io *io, struct ck_ingest *in);
/* Reads len bytes at off (window-relative) into buf.  0 or -errno (-EIO at the end). */
int ck_ingest_pread(const struct ck_ingest_io *io, void *buf, size_t len, uint64_t off);
/* Reads [off, off+len) once: CRC-32 of all of it into *crc (if crc is
 * non-NULL) and XXH3-128 of its first hash_len bytes into *lo and *hi (if lo is
 * non-NULL).  0 or -errno (-EIO for a short file). */
int ck_ingest_read(struct ck_ingest_io *io, uint64_t off, uint64_t len, uint64_t hash_len,
		   uint32_t *crc, uint64_t *lo, uint64_t *hi);
/* Reads len bytes at off into a new buffer (caller frees).  0 or -errno. */
int ck_ingest_slurp(struct ck_ingest_io *io, uint64_t off, uint64_t len, uint8_t **out);

/* Optimizer state_dicts whose param_groups carry param_names: maps the
 * tensor path "<prefix>state.<N>.<...>" to the FQN of parameter N. */
struct ck_optim_names;
int ck_optim_names_scan(const struct pk_node *root, struct ck_optim_names **out);
/* The parameter name for a tensor path, or NULL.  Valid while the document lives. */
const char *ck_optim_names_lookup(const struct ck_optim_names *o, const char *path);
void ck_optim_names_free(struct ck_optim_names *o);

#endif
