/* What ingest finds in a physical checkpoint file and the store keeps:
 * the file's identity and kind, the byte ranges holding tensor data
 * (storages) and the tensors laid over them.  Plain data, no LMDB: the
 * ingest layer (src/ingest) fills these, the store (src/store) records
 * them, the view reads them back.  Thread rules: none; each value belongs
 * to whoever holds it. */
#ifndef CKPTFS_RECORDS_H
#define CKPTFS_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/dtype.h"
#include "ckptfs/error.h"
#include "ckptfs/perm.h"

enum ck_file_kind {
	CK_FILE_OTHER = 0,        /* served as it is (json, txt, tokenizer...) */
	CK_FILE_TORCH,            /* torch.save zip */
	CK_FILE_SAFETENSORS,
	CK_FILE_SAFETENSORS_INDEX,/* *.safetensors.index.json: regenerated for composites */
	CK_FILE_BAD,              /* looked like a checkpoint but failed to parse; error recorded, not served */
	CK_FILE_SYMLINK,          /* a symbolic link committed through a writable mount: target recorded */
	CK_FILE_DIR,              /* an empty directory committed through a writable mount */
};
#define CK_FILE_KIND_LAST CK_FILE_DIR

struct ck_file_info {
	uint64_t id;
	uint64_t ckpt_id;
	char *relpath;       /* path inside the checkpoint dir ("model.safetensors", "global_step10/x.pt"); "" for a file checkpoint */
	enum ck_file_kind kind;
	char *src_path;      /* absolute path of the physical file */
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	uint32_t ntensors;
	char *error;         /* CK_FILE_BAD: why */
	char *target;        /* CK_FILE_SYMLINK: what the link holds */
	int has_owner;       /* owner holds the file's at import (0: imported before owners
				were recorded, docs/format.md) */
	struct ck_owner owner;   /* uid, gid, permission bits */
};

struct ck_storage_info {   /* a byte range of the physical file holding tensor data */
	char *key;             /* torch: storage key ("0"); safetensors: tensor name */
	uint64_t offset, length;
	uint64_t hash_lo, hash_hi;  /* XXH3-128 of the bytes */
};

struct ck_tensor_info {
	char *name;            /* logical name: "model.layers.3.mlp.up_proj.weight", "state.17.exp_avg" */
	char *layer;           /* "layers.3", "embed", "head", "norm", "optimizer", "other" */
	enum ck_dtype dtype;
	int ndim;
	uint64_t shape[CK_MAX_DIMS];
	char *storage_key;     /* which ck_storage_info holds it */
	uint64_t storage_offset;  /* in elements */
};

/* Free the strings of one value (clear) or an array of n values and the
 * array itself (free).  NULL and n == 0 are fine. */
void ck_file_info_clear(struct ck_file_info *f);
void ck_storage_info_clear(struct ck_storage_info *s);
void ck_tensor_info_clear(struct ck_tensor_info *t);
void ck_file_info_free(struct ck_file_info *v, size_t n);
void ck_storage_info_free(struct ck_storage_info *v, size_t n);
void ck_tensor_info_free(struct ck_tensor_info *v, size_t n);

/* Whether a file of this kind has bytes the store serves, packs and
 * verifies (not a refused file, a symbolic link or an empty directory,
 * which the index alone describes). */
static inline int ck_file_kind_has_bytes(enum ck_file_kind kind)
{
	return kind != CK_FILE_BAD && kind != CK_FILE_SYMLINK && kind != CK_FILE_DIR;
}

/* "other", "torch", "safetensors", "safetensors-index", "bad", "symlink",
 * "dir". */
const char *ck_file_kind_name(enum ck_file_kind kind);

/* The identity recorded for a file: (dev, ino, size, mtime).  On a shared
 * filesystem (include/ckptfs/fstype.h) the device is recorded as 0: it
 * differs from one client mount to the next, while the inode number is the
 * server's.  A recorded device 0 matches any device. */
struct stat;
void ck_file_identity_set(struct ck_file_info *f, const struct stat *sb, int shared);
int ck_file_identity_same(const struct ck_file_info *f, const struct stat *sb);

/* Re-stats the physical file: 0 if it is the file that was imported,
 * -ESTALE (with err naming the file and what changed) otherwise. */
int ck_file_check(const struct ck_file_info *f, struct ck_error *err);
/* ck_file_check that also gives the file's owner, group and permission
 * bits now (owner may be NULL; filled only on 0). */
int ck_file_check_owner(const struct ck_file_info *f, struct ck_owner *owner, struct ck_error *err);

#endif
