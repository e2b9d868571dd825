/* torch.distributed.checkpoint (DCP): the .metadata of a save, parsed
 * with the symbolic pickle VM (nothing is imported or called), checked,
 * and merged across the saves of a series into one .metadata that torch's
 * own reader loads.
 *
 * A DCP save is a directory: data files (`__<rank>_<n>.distcp`, one per
 * item in torch 1.13) holding one torch.save archive per tensor chunk or
 * bytes item, and `.metadata`, a pickled Metadata written last:
 *   state_dict_metadata  FQN -> TensorStorageMetadata(properties, size,
 *                        chunks: [ChunkStorageMetadata(offsets, sizes)])
 *                        or BytesStorageMetadata()
 *   storage_data         MetadataIndex(fqn, offset, index) ->
 *                        _StorageInfo(relative_path, offset, length
 *                        [, transform_descriptors])
 *   planner_data         (2.x) flat key -> path tuple, or None
 *   storage_meta, version and other attributes (kept as they are).
 * Layouts: torch 1.13's prototype (torch.distributed._shard.checkpoint,
 * one data file per item), 2.0-2.3 and 2.4+ (torch.distributed.checkpoint,
 * one file per rank or writer thread; 2.4 added storage_meta and changed
 * how nested keys are flattened).
 *
 * Threads: a parsed ck_dcp_meta is immutable and may be read by many
 * threads; the functions keep no global state.
 */
#ifndef CKPTFS_DCP_H
#define CKPTFS_DCP_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/buf.h"
#include "ckptfs/dtype.h"
#include "ckptfs/error.h"
#include "ckptfs/pickle.h"

/* The name torch gives a save's metadata file, and its data files' suffix. */
#define CK_DCP_METADATA ".metadata"
#define CK_DCP_DATA_SUFFIX ".distcp"

/* Which torch wrote a save, as far as merging is concerned: saves of
 * different families flatten nested keys differently and are never mixed. */
enum ck_dcp_family {
	CK_DCP_PROTOTYPE = 1,   /* torch 1.13: torch.distributed._shard.checkpoint */
	CK_DCP_V20,             /* torch 2.0-2.3: torch.distributed.checkpoint, no storage_meta */
	CK_DCP_V24,             /* torch 2.4 and later: storage_meta (and later version, ...) */
};

/* One stored item: a chunk of a tensor, or a bytes item. */
struct ck_dcp_chunk {
	size_t entry;                       /* its ck_dcp_meta.entries[] */
	uint64_t offsets[CK_MAX_DIMS];      /* tensors: where the chunk starts (entry's ndim) */
	uint64_t sizes[CK_MAX_DIMS];        /* tensors: its extent */
	const char *relpath;                /* data file, relative to the save's directory */
	uint64_t offset, length;            /* the item's bytes in that file */
	int transformed;                    /* transform_descriptors not empty: the bytes are
					     * not a plain torch.save archive */
	const struct pk_node *key;          /* the MetadataIndex and _StorageInfo objects */
	const struct pk_node *storage;
};

/* One FQN of state_dict_metadata. */
struct ck_dcp_entry {
	const char *fqn;                    /* NUL-free UTF-8 */
	int is_bytes;                       /* BytesStorageMetadata */
	enum ck_dtype dtype;                /* tensors */
	int ndim;
	uint64_t size[CK_MAX_DIMS];         /* the whole tensor */
	const size_t *chunks;               /* indexes into ck_dcp_meta.chunks, in the order of
					     * TensorStorageMetadata.chunks (bytes: its one item) */
	size_t nchunks;
	const struct pk_node *key, *value;  /* the state_dict_metadata key and value */
};

struct ck_dcp_meta {
	struct pk_doc *doc;
	enum ck_dcp_family family;
	int protocol;                       /* of the pickle (PROTO), 0 without one */
	const struct pk_node *root;         /* the Metadata object */
	const struct pk_node *attrs;        /* its attributes (the BUILD dict) */
	struct ck_dcp_entry *entries;       /* state_dict_metadata order */
	size_t nentries;
	struct ck_dcp_chunk *chunks;        /* storage_data order */
	size_t nchunks;
	const struct pk_node *planner_data; /* a dict, or NULL (None) */
	/* private */
	size_t *chunk_index;
	size_t *by_fqn;                     /* entries sorted by fqn */
};

/* Parses and checks a .metadata: a pickle of a DCP Metadata, with no
 * dangerous global (pk_doc_dangerous_global), whose every FQN is described
 * once, every tensor's chunks lie inside it, do not overlap and cover it
 * exactly, every chunk and bytes item has exactly one storage entry and
 * every storage entry one chunk or bytes item, every relative_path is a
 * relative path inside the save (no '..', '.' or empty component, no
 * leading '/', no NUL or backslash) and offset + length does not overflow.
 * Tensors have at most CK_MAX_DIMS dimensions.  Returns 0 and *out (free
 * with ck_dcp_free), -EINVAL with err saying what is wrong ("storage_data:
 * model.w chunk [0, 0]: relative_path '../x' leaves the checkpoint"), or
 * -ENOMEM. */
int ck_dcp_parse(const uint8_t *data, size_t len, struct ck_dcp_meta **out, struct ck_error *err);
void ck_dcp_free(struct ck_dcp_meta *m);

/* "torch 1.13", "torch 2.0-2.3", "torch 2.4+". */
const char *ck_dcp_family_name(enum ck_dcp_family f);

/* The entry of fqn, or NULL.  O(log n). */
const struct ck_dcp_entry *ck_dcp_find(const struct ck_dcp_meta *m, const char *fqn);

/* The size of the data file relpath of the save: >= 0, or -ENOENT (or
 * another -errno) when it cannot be used. */
typedef int64_t (*ck_dcp_size_fn)(void *ctx, const char *relpath);

/* Checks every item against its data file: the file exists and the item's
 * bytes lie inside it.  0, -EINVAL with err ("model.w chunk [0]: bytes
 * 100-900 of __0_0.distcp, which has 512"), or the first other -errno. */
int ck_dcp_check_files(const struct ck_dcp_meta *m, ck_dcp_size_fn size, void *ctx, struct ck_error *err);

/* Writes "[0, 4]" (a chunk's offsets) into out.  0 or -ENOSPC. */
int ck_dcp_format_dims(const uint64_t *v, int ndim, char *out, size_t size);

/* What an item is called in the store's records and in listings: the FQN
 * for a bytes item or a chunk that is the whole tensor, else the FQN and
 * the chunk's slice, "model.layers.3.weight[8:16, 0:16]".  Allocated (the
 * caller frees it), or NULL when out of memory. */
char *ck_dcp_item_name(const struct ck_dcp_entry *e, const struct ck_dcp_chunk *c);

/* ---- merging the saves of a series ---- */

struct ck_dcp_source {
	const struct ck_dcp_meta *meta;
	const char *prefix;   /* put before its items' relative_path ("" or NULL: none) */
	const char *name;     /* for out->why ("checkpoint-10"); NULL: "save N" */
};

/* Where an FQN of the merged save comes from. */
struct ck_dcp_pick {
	size_t source;        /* index into the sources */
	size_t entry;         /* into that source's entries */
};

struct ck_dcp_merged {
	size_t nmerged;       /* sources merged: the newest and the next nmerged - 1 */
	char why[512];        /* why the next older source was not merged ("" when all were) */
	struct ck_dcp_pick *picks;   /* one per FQN of the result, in its order */
	size_t npicks;
	struct ck_buf bytes;  /* the .metadata */
};

/* ck_dcp_merge flags: write the .metadata even when every FQN is the
 * newest save's (which is then the result as it is). */
#define CK_DCP_MERGE_ALWAYS_EMIT 0x1

/* Merges the saves src[0..n) (newest first) the way a partial save is
 * meant to be read: every FQN of the newest save, plus every FQN that only
 * older saves have, from the newest one that has it, with all its chunks
 * (a tensor is never stitched across saves); planner_data (and Megatron's
 * mcore_data) merge by FQN the same way, every other attribute is the
 * newest's.  An older save is merged only when it and every save between
 * it and the newest are of one family and agree with the FQNs picked so
 * far on their kind, dtype and global shape; the first one that does not
 * ends the merge (out->why says why).  The result is pickled with the
 * newest save's protocol (2 when it had none below 2) and class paths
 * (an older save's classes are mapped to the newest save's of the same
 * name), the dict order being Python's {**older, **newer}; unless flags
 * has CK_DCP_MERGE_ALWAYS_EMIT, out->bytes stays empty when no FQN comes
 * from an older save.  0, -EINVAL with err, or -ENOMEM; free out with
 * ck_dcp_merged_free. */
int ck_dcp_merge(const struct ck_dcp_source *src, size_t n, unsigned flags, struct ck_dcp_merged *out,
		 struct ck_error *err);
void ck_dcp_merged_free(struct ck_dcp_merged *m);

#endif
