/* Ingest: one physical file in, its records out.  A file is classified by
 * its first bytes (not its extension), parsed by the reader of its format
 * (src/format; nothing in a pickle is ever executed), verified, and its
 * tensor bytes hashed, giving the records an import or a commit hands to
 * the store (include/ckptfs/records.h).  Nothing here touches LMDB.
 *
 * Thread rules: every function may run on any thread at once for
 * different files; a struct ck_ingest or ck_preparsed belongs to whoever
 * holds it. */
#ifndef CKPTFS_INGEST_H
#define CKPTFS_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/dcp.h"
#include "ckptfs/layers.h"
#include "ckptfs/records.h"

/* Called once per file the import looked at.  status 0 = indexed, -errno = refused (msg says why),
 * CK_IMPORT_SKIPPED = an entry of a run dir that is not a checkpoint (no step in its name). */
typedef void (*ck_import_report_fn)(void *ctx, const char *path, int status, const char *msg);
#define CK_IMPORT_SKIPPED 1

/* Largest data.pkl / index.json read into memory. */
#define CK_INGEST_MAX_PICKLE (1ULL << 30)
#define CK_INGEST_MAX_JSON (64ULL << 20)

struct ck_ingest {
	struct ck_file_info info;     /* id and ckpt_id are set at commit */
	int hostile;                  /* refused for a pickle naming a dangerous global */
	struct ck_storage_info *st;
	size_t nst, capst;
	struct ck_tensor_info *t;
	size_t nt, capt;
};

/* What the previous import recorded for the same path: when the file is
 * unchanged its hashes are reused instead of reading it all again. */
struct ck_ingest_prev {
	const struct ck_file_info *file;
	const struct ck_storage_info *st;
	size_t nst;
};

/* Fills out for the file at path (relpath inside its checkpoint).  Returns 0
 * (the file is indexed, possibly as CK_FILE_BAD with info.error set) or
 * -ENOMEM.  prev may be NULL. */
int ck_ingest_file(const char *path, const char *relpath, const struct ck_layer_rules *rules,
		   const struct ck_ingest_prev *prev, struct ck_ingest *out);
/* Fills out for what lies at path when it is a symbolic link
 * (CK_FILE_SYMLINK, its target recorded) or a directory (CK_FILE_DIR):
 * what a checkpoint committed through a writable mount keeps of them.
 * Their identity and owner are lstat's.  0 (anything else, or a link that
 * cannot be read, is indexed as CK_FILE_BAD with info.error set) or
 * -ENOMEM. */
int ck_ingest_entry(const char *path, const char *relpath, struct ck_ingest *out);
void ck_ingest_clear(struct ck_ingest *in);
/* Tells an import report callback (may be NULL) how a file went: refused
 * with its reason, or indexed with its kind and tensor count. */
void ck_ingest_report(const struct ck_ingest *in, ck_import_report_fn fn, void *ctx);

/* Reads the torch DCP saves among the ingested files of one checkpoint
 * (files[0..n), as ck_ingest_file left them).  Every file named .metadata
 * whose directory holds *.distcp files, or that is a pickle, is parsed and
 * checked (ck_dcp_parse, and ck_dcp_check_files against the sizes of the
 * files ingested beside it); one that fails is made CK_FILE_BAD with the
 * reason ("not a valid DCP .metadata: ...", "'model.w' is stored in
 * __0_3.distcp, which is not there").  The records of a good save's data
 * files are then named after its items: storages and tensors of the blob
 * that holds an item take the item's FQN ("model.layers.3.weight"; one
 * chunk of a sharded tensor: "model.layers.3.weight[8:16, 0:16]"; objects
 * inside a bytes item: "<fqn>.<path>"), tensors their layer by rules (may
 * be NULL); an item with nothing recorded inside its bytes (a bytes item
 * holding no tensor, a file whose blobs are not torch.save archives) gets
 * one storage over all of them, hashed.  0, or -ENOMEM. */
int ck_ingest_dcp_names(struct ck_ingest *files, size_t n, const struct ck_layer_rules *rules);

/* Files parsed and hashed ahead of their commit.  The writable mount
 * parses each file at its last close; a commit given the result (see
 * ck_store_commit_staged_with) reuses its hashes when the file is still
 * the same (device, inode, size, mtime) and reads only its headers again.
 * A result that does not parse is never reused. */
struct ck_preparsed;
/* Parses, verifies and hashes the file at path as a commit would (relpath:
 * its path inside the checkpoint).  0 (see ck_preparsed_info: kind
 * CK_FILE_BAD with error set when it does not parse) or -ENOMEM. */
int ck_preparse_file(const struct ck_layer_rules *rules, const char *path, const char *relpath,
		     struct ck_preparsed **out);
void ck_preparsed_free(struct ck_preparsed *p);
/* What the parse found: identity, kind, error, tensor count. */
const struct ck_file_info *ck_preparsed_info(const struct ck_preparsed *p);
/* The parse of the file at path, or NULL: asked once per file by a commit. */
typedef const struct ck_preparsed *(*ck_preparsed_fn)(void *ctx, const char *path);
/* The previous-import view of a preparsed file, for ck_ingest_file, or NULL. */
const struct ck_ingest_prev *ck_preparsed_prev(const struct ck_preparsed *p);

#endif
