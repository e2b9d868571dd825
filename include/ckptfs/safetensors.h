/* safetensors: u64 header length, JSON header, bytes (docs/formats.md §3).
 * The reader applies the reference loader's rules; the writer lays tensors
 * out as the Rust writer does (dtype descending, then name) so files match
 * what safetensors.torch.save_file writes. */
#ifndef CKPTFS_SAFETENSORS_H
#define CKPTFS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/buf.h"
#include "ckptfs/dtype.h"
#include "ckptfs/error.h"

#define ST_MAX_HEADER 100000000ULL

struct st_tensor {
	char *name;
	enum ck_dtype dtype;
	int ndim;
	uint64_t shape[CK_MAX_DIMS];
	uint64_t begin, end;     /* relative to the byte buffer */
};

struct st_meta {
	char *key;
	char *value;
};

struct st_file {
	uint64_t header_len;     /* N */
	uint64_t data_start;     /* 8 + N: file offset of the byte buffer */
	size_t n;
	struct st_tensor *tensors;   /* sorted by begin */
	size_t nmeta;
	struct st_meta *meta;        /* __metadata__, in document order; non-NULL (maybe
	                              * with nmeta 0) iff the header has a __metadata__ object */
};

/* Reads the 8-byte length prefix: 0, or -EINVAL if N is out of bounds for file_size. */
int st_header_len(const uint8_t prefix[8], uint64_t file_size, uint64_t *n, struct ck_error *err);
/* Parses and validates the JSON header (the n bytes after the prefix) of a
 * file of file_size bytes, with the reference loader's rules: a JSON object
 * (whitespace around it allowed), tensors {"dtype","shape","data_offsets"}
 * (other fields ignored), offsets that tile the byte buffer from 0 to the
 * end of the file exactly, end - begin == prod(shape) * element size,
 * __metadata__ (optional, or null) string -> string.  Stricter than the
 * reference: duplicate names or metadata keys, U+0000 in names or values,
 * more than CK_MAX_DIMS dimensions and dtypes without a ck_dtype (F4, F6_*)
 * are refused.  Returns 0, -EINVAL (err says why) or -ENOMEM. */
int st_parse(const char *header, size_t n, uint64_t file_size, struct st_file *out, struct ck_error *err);
void st_file_free(struct st_file *f);

/* Writer input: name, dtype, shape; begin/end are filled in by st_layout(). */
/* Sorts tensors[] (in place) into the reference writer's order, assigns
 * contiguous offsets, and appends the complete prefix (u64 N + JSON header
 * padded with spaces to a multiple of 8) to out.  On return tensors[] is
 * in file order with begin/end set.  meta may be NULL (no __metadata__);
 * a non-NULL meta with nmeta 0 writes "__metadata__":{}, so an st_file's
 * meta/nmeta round-trip.  Metadata is written in the order given (the Rust
 * writer's order for 2+ keys is its HashMap's, i.e. random).  Returns 0,
 * -EINVAL (unknown dtype, duplicate name), -EOVERFLOW, -E2BIG (header over
 * ST_MAX_HEADER) or -ENOMEM; on failure out is unchanged. */
int st_layout(struct st_tensor *tensors, size_t n, const struct st_meta *meta, size_t nmeta,
	      struct ck_buf *out, struct ck_error *err);

/* Sharded checkpoints: model.safetensors.index.json (and pytorch_model.bin.index.json),
 *   {"metadata": {"total_size": N, ...}, "weight_map": {"tensor": "shard file", ...}}
 * as transformers writes it: json.dumps(obj, indent=2, sort_keys=True) + "\n". */
struct st_index_meta {
	char *key;
	char *json;              /* the value as compact JSON text ("123", "\"x\"", "[1,2]") */
};

struct st_index_weight {
	char *name;              /* tensor name */
	char *file;              /* shard file name, relative to the index */
};

struct st_index {
	int has_metadata;        /* write a "metadata" object even when it is empty */
	int has_total_size;
	uint64_t total_size;     /* metadata.total_size: bytes of tensor data in all shards */
	size_t nmeta;
	struct st_index_meta *meta;        /* other metadata members (e.g. total_parameters) */
	size_t n;
	struct st_index_weight *weights;   /* weight_map, in document order */
};

/* Parses an index file.  weight_map is required (an object of strings, no
 * duplicate names); metadata is optional (an integer total_size goes to
 * total_size, every other member to meta[]); other top-level members are
 * ignored.  Returns 0, -EINVAL (err says why) or -ENOMEM. */
int st_index_parse(const char *json, size_t n, struct st_index *out, struct ck_error *err);
/* Appends the index as Python writes it: keys sorted (metadata, weight_map;
 * members by code point), two-space indent, ensure_ascii escapes, final
 * newline.  Returns 0, -EINVAL (a meta value that is not JSON, total_size
 * given twice, invalid UTF-8) or -ENOMEM; on failure out is unchanged. */
int st_index_write(const struct st_index *idx, struct ck_buf *out);
void st_index_free(struct st_index *idx);

#endif
