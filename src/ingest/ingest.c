/* Ingesting one file: classify it by its first bytes (not its extension),
 * hand it to the parser for its format, and make sure it did not change
 * while it was being read.
 *
 *   "PK\3\4"                  torch.save zip (needs data.pkl, else OTHER)
 *   legacy torch.save magic   BAD: legacy (pre-1.6) format not supported
 *   *.safetensors             safetensors (must parse, else BAD)
 *   *.safetensors.index.json  index of a sharded safetensors checkpoint (must parse)
 *   *.pt *.pth *.bin *.ckpt   BAD when none of the above: a checkpoint we cannot read
 *   .metadata, a pickle       a DCP save's metadata: must parse (else BAD), OTHER
 *   anything else             OTHER: served as it is
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/clock.h"
#include "ckptfs/fileio.h"
#include "ckptfs/str.h"
#include "ckptfs/torchzip.h"
#include "ckptfs/fstype.h"
#include "ingester.h"

#define READ_BUF (1u << 20)
#define HEAD_LEN 512     /* enough for the tar magic of the oldest torch.save */

static int checkpoint_extension(const char *name)
{
	return ck_ends_with(name, ".pt") || ck_ends_with(name, ".pth") || ck_ends_with(name, ".bin") ||
	       ck_ends_with(name, ".ckpt");
}

void ck_ingest_clear(struct ck_ingest *in)
{
	ck_file_info_clear(&in->info);
	ck_storage_info_free(in->st, in->nst);
	ck_tensor_info_free(in->t, in->nt);
	memset(in, 0, sizeof(*in));
}

static int read_head(struct ck_ingest_io *io, uint8_t *head, size_t *n)
{
	size_t want = io->size < HEAD_LEN ? (size_t)io->size : HEAD_LEN;
	int rc = ck_ingest_pread(io, head, want, 0);

	*n = rc < 0 ? 0 : want;
	return rc;
}

/* A DCP save's .metadata (a pickle): served as it is, once it reads as
 * one.  What it says about the files beside it is checked with them
 * (ck_ingest_dcp_names). */
static int check_dcp_metadata(struct ck_ingest_io *io, struct ck_ingest *in)
{
	struct ck_dcp_meta *m = NULL;
	struct ck_error err = { "" };
	uint8_t *data;
	int rc;

	in->info.kind = CK_FILE_OTHER;
	if (io->size > CK_INGEST_MAX_PICKLE)
		return ck_ingest_bad(in, "not a valid DCP .metadata: larger than %llu bytes",
				     (unsigned long long)CK_INGEST_MAX_PICKLE);
	rc = ck_ingest_slurp(io, 0, io->size, &data);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_ingest_bad(in, "read error: %s", strerror(-rc));
	rc = ck_dcp_parse(data, (size_t)io->size, &m, &err);
	free(data);
	ck_dcp_free(m);
	if (rc == -ENOMEM)
		return rc;
	return rc < 0 ? ck_ingest_bad(in, "not a valid DCP .metadata: %s", err.msg) : 0;
}

static int classify_and_parse(struct ck_ingest_io *io, struct ck_ingest *in)
{
	uint8_t head[HEAD_LEN];
	size_t n = 0;
	int rc;

	rc = read_head(io, head, &n);
	if (rc < 0)
		return ck_ingest_bad(in, "read error: %s", strerror(-rc));
	/* A DCP data file is many torch.save blobs end to end, each found
	 * only through the .metadata beside it (docs/formats.md §4.1): it starts
	 * like a zip but is not one, and torch reads it by offset, so it is
	 * served as it is (ingest_dcp.c).  Its completeness is dcp_check's. */
	if (ck_ends_with(io->name, CK_DCP_DATA_SUFFIX))
		return ck_ingest_distcp(io, in);
	if (!strcmp(io->name, CK_DCP_METADATA) && n && head[0] == 0x80)
		return check_dcp_metadata(io, in);
	if (tz_is_zip(head, n)) {
		in->info.kind = CK_FILE_TORCH;
		return ck_ingest_torch(io, in);
	}
	if (tz_is_legacy_torch(head, n))
		return ck_ingest_bad(in, "legacy (pre-1.6) torch.save format not supported");
	if (ck_ends_with(io->name, ".safetensors")) {
		in->info.kind = CK_FILE_SAFETENSORS;
		return ck_ingest_safetensors(io, in);
	}
	if (ck_ends_with(io->name, ".safetensors.index.json")) {
		in->info.kind = CK_FILE_SAFETENSORS_INDEX;
		return ck_ingest_safetensors_index(io, in);
	}
	if (checkpoint_extension(io->name))
		return ck_ingest_bad(in, "not a torch.save zip file (and not safetensors): cannot read this checkpoint");
	in->info.kind = CK_FILE_OTHER;
	return 0;
}

static int set_names(struct ck_ingest *in, const char *path, const char *relpath)
{
	in->info.src_path = strdup(path);
	in->info.relpath = strdup(relpath);
	return in->info.src_path && in->info.relpath ? 0 : -ENOMEM;
}

int ck_ingest_entry(const char *path, const char *relpath, struct ck_ingest *out)
{
	char target[PATH_MAX];
	struct stat sb;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	if (set_names(out, path, relpath) < 0) {
		ck_ingest_clear(out);
		return -ENOMEM;
	}
	if (lstat(path, &sb) < 0)
		return ck_ingest_bad(out, "cannot stat: %s", strerror(errno));
	ck_file_identity_set(&out->info, &sb, ck_fs_shared_path(path, NULL) == 1);
	out->info.has_owner = 1;
	ck_owner_from_stat(&out->info.owner, &sb);
	if (S_ISDIR(sb.st_mode)) {
		out->info.kind = CK_FILE_DIR;
		out->info.size = 0;
		return 0;
	}
	if (!S_ISLNK(sb.st_mode))
		return ck_ingest_bad(out, "not a symbolic link or directory");
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return ck_ingest_bad(out, "cannot read the link: %s", n < 0 ? strerror(errno) : "empty");
	target[n] = '\0';
	out->info.kind = CK_FILE_SYMLINK;
	out->info.size = (uint64_t)n;
	out->info.target = strdup(target);
	if (!out->info.target) {
		ck_ingest_clear(out);
		return -ENOMEM;
	}
	return 0;
}

int ck_ingest_file(const char *path, const char *relpath, const struct ck_layer_rules *rules,
		   const struct ck_ingest_prev *prev, struct ck_ingest *out)
{
	struct ck_ingest_io io = { .fd = -1, .rules = rules };
	const char *slash = strrchr(path, '/');
	struct stat sb, after;
	int rc;

	memset(out, 0, sizeof(*out));
	if (set_names(out, path, relpath) < 0) {
		ck_ingest_clear(out);
		return -ENOMEM;
	}
	io.name = slash ? slash + 1 : path;
	io.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (io.fd < 0 || fstat(io.fd, &sb) < 0) {
		rc = ck_ingest_bad(out, "cannot open: %s", strerror(errno));
		goto out;
	}
	ck_file_identity_set(&out->info, &sb, ck_fs_shared_fd(io.fd, NULL) == 1);
	out->info.has_owner = 1;
	ck_owner_from_stat(&out->info.owner, &sb);
	if (!S_ISREG(sb.st_mode)) {
		rc = ck_ingest_bad(out, "not a regular file");
		goto out;
	}
	io.size = (uint64_t)sb.st_size;
	if (prev && prev->file->kind != CK_FILE_BAD && ck_file_identity_same(prev->file, &sb))
		io.prev = prev;
	io.bufsize = READ_BUF;
	io.buf = malloc(io.bufsize);
	if (!io.buf) {
		rc = -ENOMEM;
		goto out;
	}
	posix_fadvise(io.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	rc = classify_and_parse(&io, out);
	if (rc < 0)
		goto out;
	/* A file still being written would be indexed half-done: refuse it. */
	if (fstat(io.fd, &after) < 0 || after.st_size != sb.st_size ||
	    ck_timespec_ns(after.st_mtim) != ck_timespec_ns(sb.st_mtim))
		rc = ck_ingest_bad(out, "changed while it was being imported (still being written?)");
out:
	free(io.buf);
	if (io.fd >= 0)
		close(io.fd);
	if (rc < 0)
		ck_ingest_clear(out);
	return rc;
}

void ck_ingest_report(const struct ck_ingest *in, ck_import_report_fn fn, void *ctx)
{
	char msg[64];

	if (!fn)
		return;
	if (in->info.kind == CK_FILE_BAD) {
		fn(ctx, in->info.src_path, -EINVAL, in->info.error);
		return;
	}
	if (in->info.kind == CK_FILE_TORCH || in->info.kind == CK_FILE_SAFETENSORS)
		snprintf(msg, sizeof(msg), "%s, %u tensor%s", ck_file_kind_name(in->info.kind), in->info.ntensors,
			 in->info.ntensors == 1 ? "" : "s");
	else
		snprintf(msg, sizeof(msg), "%s", ck_file_kind_name(in->info.kind));
	fn(ctx, in->info.src_path, 0, msg);
}
