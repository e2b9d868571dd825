/* safetensors: u64 header length, JSON header, byte buffer (FORMATS.md section 2).
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
	struct st_meta *meta;        /* __metadata__, in document order */
};

/* Reads the 8-byte length prefix: 0, or -EINVAL if N is out of bounds for file_size. */
int st_header_len(const uint8_t prefix[8], uint64_t file_size, uint64_t *n, struct ck_error *err);
/* Parses and validates the JSON header of a file of file_size bytes. */
int st_parse(const char *header, size_t n, uint64_t file_size, struct st_file *out, struct ck_error *err);
void st_file_free(struct st_file *f);

/* Writer input: name, dtype, shape; begin/end are filled in by st_layout(). */
/* Sorts a copy of the tensors into the reference writer's order, assigns
 * contiguous offsets, and writes the complete prefix (u64 N + JSON header
 * padded with spaces to a multiple of 8) into out.  On return tensors[] is
 * in file order with begin/end set.  meta may be NULL. */
int st_layout(struct st_tensor *tensors, size_t n, const struct st_meta *meta, size_t nmeta,
	      struct ck_buf *out, struct ck_error *err);

#endif
