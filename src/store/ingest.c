/* Ingesting one file: classify it by its first bytes (not its extension),
 * hand it to the parser for its format, and make sure it did not change
 * while it was being read.
 *
 *   "PK\3\4"                  torch.save zip (needs data.pkl, else OTHER)
 *   legacy torch.save magic   BAD: legacy (pre-1.6) format not supported
 *   *.safetensors             safetensors (must parse, else BAD)
 *   *.safetensors.index.json  index of a sharded safetensors checkpoint (must parse)
 *   *.pt *.pth *.bin *.ckpt   BAD when none of the above: a checkpoint we cannot read
 *   anything else             OTHER: served as it is
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/fileio.h"
#include "ckptfs/torchzip.h"
#include "index.h"
#include "ingest.h"

#define READ_BUF (1u << 20)
#define HEAD_LEN 512     /* enough for the tar magic of the oldest torch.save */

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int checkpoint_extension(const char *name)
{
	return ends_with(name, ".pt") || ends_with(name, ".pth") || ends_with(name, ".bin") ||
	       ends_with(name, ".ckpt");
}

static int64_t mtime_ns(const struct stat *sb)
{
	return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

void ck_ingest_clear(struct ck_ingest *in)
{
	free(in->info.relpath);
	free(in->info.src_path);
	free(in->info.error);
	ck_storage_info_free(in->st, in->nst);
	ck_tensor_info_free(in->t, in->nt);
	memset(in, 0, sizeof(*in));
}

static void drop_contents(struct ck_ingest *in)
{
	ck_storage_info_free(in->st, in->nst);
	ck_tensor_info_free(in->t, in->nt);
	in->st = NULL;
	in->t = NULL;
	in->nst = in->capst = in->nt = in->capt = 0;
	in->info.ntensors = 0;
}

void ck_ingest_as_bytes(struct ck_ingest *in)
{
	drop_contents(in);
	free(in->info.error);
	in->info.error = NULL;
	in->hostile = 0;
	in->info.kind = CK_FILE_OTHER;
}

int ck_ingest_bad(struct ck_ingest *in, const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int n;

	drop_contents(in);
	in->info.kind = CK_FILE_BAD;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	free(in->info.error);
	in->info.error = msg;
	return 0;
}

int ck_ingest_add_storage(struct ck_ingest *in, const char *key, uint64_t offset, uint64_t length)
{
	struct ck_storage_info *s;

	if (in->nst == in->capst) {
		size_t cap = in->capst ? in->capst * 2 : 16;

		s = realloc(in->st, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		in->st = s;
		in->capst = cap;
	}
	s = &in->st[in->nst];
	memset(s, 0, sizeof(*s));
	s->key = strdup(key);
	if (!s->key)
		return -ENOMEM;
	s->offset = offset;
	s->length = length;
	in->nst++;
	return 0;
}

int ck_ingest_add_tensor(struct ck_ingest *in, const char *name, const char *layer, enum ck_dtype dtype,
			 int ndim, const uint64_t *shape, const char *storage_key, uint64_t storage_offset)
{
	struct ck_tensor_info *t;

	if (ndim < 0 || ndim > CK_MAX_DIMS)
		return -EINVAL;
	if (in->nt == in->capt) {
		size_t cap = in->capt ? in->capt * 2 : 64;

		t = realloc(in->t, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		in->t = t;
		in->capt = cap;
	}
	t = &in->t[in->nt];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->layer = strdup(layer);
	t->storage_key = strdup(storage_key);
	if (!t->name || !t->layer || !t->storage_key) {
		ck_tensor_info_clear(t);
		return -ENOMEM;
	}
	t->dtype = dtype;
	t->ndim = ndim;
	if (ndim)
		memcpy(t->shape, shape, (size_t)ndim * sizeof(*shape));
	t->storage_offset = storage_offset;
	in->nt++;
	in->info.ntensors = (uint32_t)in->nt;
	return 0;
}

static int same_storage(const struct ck_storage_info *a, const struct ck_storage_info *b)
{
	return a->offset == b->offset && a->length == b->length && strcmp(a->key, b->key) == 0;
}

int ck_ingest_reuse_hashes(const struct ck_ingest_io *io, struct ck_ingest *in)
{
	const struct ck_ingest_prev *p = io->prev;
	size_t i, j;

	if (!p)
		return 0;
	for (i = io->st_from; i < in->nst; i++) {
		struct ck_storage_info *s = &in->st[i];

		/* An unchanged file lists its storages in the same order as before. */
		j = i;
		if (j >= p->nst || !same_storage(&p->st[j], s)) {
			for (j = 0; j < p->nst && !same_storage(&p->st[j], s); j++)
				;
		}
		if (j == p->nst)
			return 0;
		s->hash_lo = p->st[j].hash_lo;
		s->hash_hi = p->st[j].hash_hi;
	}
	return 1;
}

int ck_ingest_read(struct ck_ingest_io *io, uint64_t off, uint64_t len, uint64_t hash_len,
		   uint32_t *crc, uint64_t *lo, uint64_t *hi)
{
	XXH3_state_t *xs = NULL;
	uint32_t c = 0;
	uint64_t done = 0;
	int rc = 0;

	if (lo) {
		xs = XXH3_createState();
		if (!xs || XXH3_128bits_reset(xs) != XXH_OK) {
			XXH3_freeState(xs);
			return -ENOMEM;
		}
	}
	while (done < len) {
		size_t want = len - done < io->bufsize ? (size_t)(len - done) : io->bufsize;
		ssize_t got = pread(io->fd, io->buf, want, (off_t)(io->base + off + done));

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO;
			break;
		}
		if (crc)
			c = ck_crc32(c, io->buf, (size_t)got);
		if (xs && done < hash_len) {
			uint64_t h = hash_len - done < (uint64_t)got ? hash_len - done : (uint64_t)got;

			XXH3_128bits_update(xs, io->buf, (size_t)h);
		}
		done += (uint64_t)got;
	}
	if (rc == 0) {
		if (crc)
			*crc = c;
		if (xs) {
			XXH128_hash_t h = XXH3_128bits_digest(xs);

			*lo = h.low64;
			*hi = h.high64;
		}
	}
	XXH3_freeState(xs);
	return rc;
}

int ck_ingest_pread(const struct ck_ingest_io *io, void *buf, size_t len, uint64_t off)
{
	return ck_pread_full(io->fd, buf, len, io->base + off);
}

int ck_ingest_slurp(struct ck_ingest_io *io, uint64_t off, uint64_t len, uint8_t **out)
{
	uint8_t *p;
	int rc;

	if (len > SIZE_MAX - 1)
		return -EFBIG;
	p = malloc(len ? (size_t)len : 1);
	if (!p)
		return -ENOMEM;
	rc = ck_ingest_pread(io, p, (size_t)len, off);
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* The first bytes of the whole file (io->base is 0 here). */
static int read_head(struct ck_ingest_io *io, uint8_t *head, size_t *n)
{
	size_t want = io->size < HEAD_LEN ? (size_t)io->size : HEAD_LEN;
	int rc = ck_ingest_pread(io, head, want, 0);

	*n = rc < 0 ? 0 : want;
	return rc;
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
	if (ends_with(io->name, CK_DCP_DATA_SUFFIX))
		return ck_ingest_distcp(io, in);
	if (tz_is_zip(head, n)) {
		in->info.kind = CK_FILE_TORCH;
		return ck_ingest_torch(io, in);
	}
	if (tz_is_legacy_torch(head, n))
		return ck_ingest_bad(in, "legacy (pre-1.6) torch.save format not supported");
	if (ends_with(io->name, ".safetensors")) {
		in->info.kind = CK_FILE_SAFETENSORS;
		return ck_ingest_safetensors(io, in);
	}
	if (ends_with(io->name, ".safetensors.index.json")) {
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

static int same_identity(const struct ck_file_info *f, const struct stat *sb)
{
	return f->dev == (uint64_t)sb->st_dev && f->ino == (uint64_t)sb->st_ino &&
	       f->size == (uint64_t)sb->st_size && f->mtime_ns == mtime_ns(sb);
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
	out->info.dev = (uint64_t)sb.st_dev;
	out->info.ino = (uint64_t)sb.st_ino;
	out->info.size = (uint64_t)sb.st_size;
	out->info.mtime_ns = mtime_ns(&sb);
	if (!S_ISREG(sb.st_mode)) {
		rc = ck_ingest_bad(out, "not a regular file");
		goto out;
	}
	io.size = (uint64_t)sb.st_size;
	if (prev && prev->file->kind != CK_FILE_BAD && same_identity(prev->file, &sb))
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
	if (fstat(io.fd, &after) < 0 || after.st_size != sb.st_size || mtime_ns(&after) != mtime_ns(&sb))
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
