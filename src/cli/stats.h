/* ckptctl stats: what a series costs and how its layers change.
 *
 * The numeric core (decoding floating-point tensor bytes, accumulating the
 * squared norms of an update) is include/ckptfs/tensor_math.h. */
#ifndef CKPTFS_CLI_STATS_H
#define CKPTFS_CLI_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/dtype.h"
#include "ckptfs/store.h"
#include "ckptfs/tensor_math.h"

/* ---- The store walk (stats_walk.c) ---- */

struct ck_view;

/* One logical tensor of a composite, as a resume would load it. */
struct stats_tensor {
	char *key;            /* "relpath\nname": unique within a composite */
	char *layer;
	enum ck_dtype dtype;
	char *src_path;       /* physical file and byte range serving it */
	uint64_t file_id;     /* the store's id of that file (read packed once its raw copy is gone) */
	uint64_t off, nbytes;
	double norm2;         /* sum of squares, when norm_known */
	int norm_known;
};

/* A checkpoint's composite and what it costs. */
struct stats_ckpt {
	struct stats_tensor *t;
	size_t n, cap;
	uint64_t logical;     /* bytes of every composite file (headers + tensors) */
	uint64_t physical;    /* bytes of the files the checkpoint itself holds */
	uint64_t tensor_bytes;
	uint64_t partial;     /* tensor bytes served from older checkpoints */
	uint64_t dedup;       /* packed files: bytes stored once already elsewhere */
	uint64_t delta;       /* packed files: bytes stored as deltas */
	uint64_t compressed;  /* packed files: bytes saved by encoding (planes, zstd, deltas) */
	size_t unservable;    /* composite files the view refuses (changed or bad): their tensors are not counted */
};

/* How one layer changed from the previous checkpoint. */
struct stats_layer {
	char *name;
	size_t tensors;       /* in both checkpoints */
	size_t measured;      /* of those, floating-point with the same dtype and size */
	size_t added;         /* only in the newer checkpoint */
	uint64_t bytes, chunks, same_chunks;
	struct ck_l2 l2;
};

/* Collects the composite of series/name from the view and the physical
 * size of the checkpoint's own files (ckpt_id) from the store: what its
 * pack records take for a packed file, else the raw file's size. */
int stats_collect(struct ck_view *v, struct ck_store *st, const char *series, const struct ck_ckpt_info *c,
		  struct stats_ckpt *out);
void stats_ckpt_free(struct stats_ckpt *c);

/* Compares cur with prev layer by layer, reading chunk_size bytes at a
 * time from each side (norms learnt on the way are kept in cur for the
 * next comparison): from the raw file, or decoded from st's packs when
 * compaction dropped it.  *layers is allocated, in order of first
 * appearance. */
int stats_compare(struct ck_store *st, struct stats_ckpt *prev, struct stats_ckpt *cur, size_t chunk_size,
		  struct stats_layer **layers, size_t *nlayers);
void stats_layers_free(struct stats_layer *l, size_t n);

/* sqrt(diff2 / prev2); NAN when undefined (nothing measured, or a zero
 * previous norm under a non-zero update). */
double stats_relative_l2(const struct stats_layer *l);

#endif
