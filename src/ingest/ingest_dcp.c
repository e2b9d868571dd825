/* Ingesting a torch DCP data file (*.distcp).
 *
 * torch.distributed.checkpoint's FileSystemWriter appends one whole
 * torch.save zip per item (a tensor, or an io.BytesIO of any object) to
 * the file, and only the .metadata beside it says where each begins
 * (docs/formats.md §4.1).  torch reads the file by offset, so it is served as it
 * is (kind other).  Its blobs are indexed anyway, so that compaction cuts
 * and codes its tensors as it does a torch.save file's (a storage per
 * chunk run, its element size, deltas against the same storage of the
 * previous save) and verify checks them.
 *
 * The blobs are found from the end: torch's zip writer always ends a zip
 * with a zip64 end record (56 bytes, right after the central directory),
 * its locator (20) and the end record (22, no comment), and the zip64 end
 * record gives the central directory's size and blob-relative offset, so
 * the blob starts at (its position - size - offset).  The walk repeats
 * from there to offset 0.  A file that does not walk to 0, or a blob that
 * does not parse as a torch.save, is only bytes (nothing indexed, nothing
 * refused: the next torch may write something else); a pickle that names
 * a dangerous global is refused, as in any torch.save.
 *
 * Once every file of a checkpoint is ingested, ck_ingest_dcp_names reads
 * each .metadata and renames its items' records from blob ordinals
 * ("17/0") to what they hold: "model.layers.3.weight", or for one chunk
 * of a sharded tensor "model.layers.3.weight[8:16, 0:16]". */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/dcp.h"
#include "ckptfs/fileio.h"
#include "ckptfs/str.h"
#include "ingester.h"

#define Z64_END_LEN 56
#define Z64_LOCATOR_LEN 20
#define END_LEN 22
#define TAIL_LEN (Z64_END_LEN + Z64_LOCATOR_LEN + END_LEN)

struct blob {
	uint64_t start, end;
};

/* The start of the zip that ends at end, or -1 if none does. */
static int64_t blob_start(const struct ck_ingest_io *io, uint64_t end)
{
	uint8_t t[TAIL_LEN];
	const uint8_t *z64 = t, *loc = t + Z64_END_LEN, *eocd = loc + Z64_LOCATOR_LEN;
	uint64_t z64_pos, cd_size, cd_off, start;

	if (end < TAIL_LEN || ck_ingest_pread(io, t, sizeof(t), end - TAIL_LEN) < 0)
		return -1;
	if (ck_le32(eocd) != 0x06054b50 || eocd[20] || eocd[21] || ck_le32(loc) != 0x07064b50 ||
	    ck_le32(z64) != 0x06064b50 || ck_le64(z64 + 4) != Z64_END_LEN - 12)
		return -1;
	z64_pos = end - TAIL_LEN;
	cd_size = ck_le64(z64 + 40);
	cd_off = ck_le64(z64 + 48);
	if (cd_size > z64_pos || cd_off > z64_pos - cd_size)
		return -1;
	start = z64_pos - cd_size - cd_off;
	/* The locator points at the zip64 end record, blob-relative. */
	if (ck_le64(loc + 8) != z64_pos - start)
		return -1;
	return (int64_t)start;
}

/* The blobs of the file in order, or 0 of them if it is not made of zips. */
static int find_blobs(const struct ck_ingest_io *io, struct blob **out, size_t *n)
{
	struct blob *b = NULL;
	size_t nb = 0, cap = 0;
	uint64_t end = io->size;

	*out = NULL;
	*n = 0;
	while (end > 0) {
		int64_t start = blob_start(io, end);

		if (start < 0) {
			free(b);
			return 0;
		}
		if (nb == cap) {
			struct blob *v = ck_grow(b, &cap, sizeof(*v), 64);

			if (!v) {
				free(b);
				return -ENOMEM;
			}
			b = v;
		}
		b[nb++] = (struct blob){ (uint64_t)start, end };
		end = (uint64_t)start;
	}
	for (size_t i = 0; i < nb / 2; i++) {
		struct blob x = b[i];

		b[i] = b[nb - 1 - i];
		b[nb - 1 - i] = x;
	}
	*out = b;
	*n = nb;
	return 0;
}

int ck_ingest_distcp(struct ck_ingest_io *io, struct ck_ingest *in)
{
	const uint64_t size = io->size;
	struct blob *b;
	size_t n, i;
	int rc;

	in->info.kind = CK_FILE_OTHER;
	rc = find_blobs(io, &b, &n);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "%zu/", i);
		io->base = b[i].start;
		io->size = b[i].end - b[i].start;
		io->prefix = prefix;
		io->st_from = in->nst;
		in->info.kind = CK_FILE_TORCH;
		rc = ck_ingest_torch(io, in);
		io->base = 0;
		io->size = size;
		io->prefix = NULL;
		io->st_from = 0;
		if (rc < 0 || in->info.kind != CK_FILE_TORCH)
			break;
	}
	if (rc == 0 && in->info.kind == CK_FILE_BAD && in->hostile) {
		char *why = in->info.error;

		in->info.error = NULL;
		rc = ck_ingest_bad(in, "item %zu (bytes %" PRIu64 "-%" PRIu64 "): %s", i, b[i].start, b[i].end,
				   why ? why : "refused");
		free(why);
	} else if (rc == 0 && i < n) {
		ck_ingest_as_bytes(in);   /* a blob that is not a torch.save: bytes only */
	} else if (rc == 0) {
		in->info.kind = CK_FILE_OTHER;
	}
	free(b);
	return rc;
}

/* ---- the items of a checkpoint's data files, named after its .metadata ---- */

#define MAX_METADATA (256u << 20)

static const char *base_of(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? slash + 1 : rel;
}

static size_t dir_len(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? (size_t)(slash - rel) : 0;
}

struct dcp_dir {
	struct ck_ingest *files;
	size_t n;
	const char *dir;        /* of the .metadata, dlen bytes */
	size_t dlen;
	char path[4096];
};

/* The ingested file at relpath rel (relative to the .metadata's directory). */
static struct ck_ingest *file_at(struct dcp_dir *d, const char *rel)
{
	for (size_t i = 0; i < d->n; i++) {
		const char *r = d->files[i].info.relpath;

		if (d->dlen ? !strncmp(r, d->dir, d->dlen) && r[d->dlen] == '/' && !strcmp(r + d->dlen + 1, rel)
			    : !strcmp(r, rel))
			return &d->files[i];
	}
	return NULL;
}

static int64_t sibling_size(void *ctx, const char *rel)
{
	struct ck_ingest *f = file_at(ctx, rel);

	return f ? (int64_t)f->info.size : -ENOENT;
}

/* Whether the .metadata's directory holds data files. */
static int has_data_files(const struct dcp_dir *d)
{
	for (size_t i = 0; i < d->n; i++) {
		const char *r = d->files[i].info.relpath;

		if (dir_len(r) == d->dlen && !strncmp(r, d->dir, d->dlen) && ck_ends_with(r, CK_DCP_DATA_SUFFIX))
			return 1;
	}
	return 0;
}

/* The blob ordinal a record of an unnamed data file carries ("17/0" -> 17), or -1. */
static long blob_of(const char *key)
{
	char *end;
	long n;

	if (!key || key[0] < '0' || key[0] > '9')
		return -1;
	n = strtol(key, &end, 10);
	return *end == '/' ? n : -1;
}

/* A tensor: "<item>" for the blob's root, "<item>.<path>" below it; a
 * storage (sep '/'): "<item>" when it is the blob's only one, else
 * "<item>/<key>". */
static char *renamed(const char *item, const char *old, char sep, int only)
{
	const char *rest = strchr(old, '/') + 1;
	size_t n = strlen(item) + 1 + strlen(rest) + 1;
	char *s = malloc(n);

	if (only)
		rest = "";
	if (s)
		snprintf(s, n, "%s%c%s", item, sep, rest);
	if (s && !*rest)
		s[strlen(item)] = '\0';
	return s;
}

/* An item without records inside it: one storage over all its bytes, hashed. */
static int add_whole_item(struct ck_ingest *f, const char *item, uint64_t off, uint64_t len)
{
	struct ck_ingest_io io = { .fd = -1 };
	struct stat sb;
	int rc;

	for (size_t i = 0; i < f->nst; i++)
		if (f->st[i].offset < off + len && off < f->st[i].offset + f->st[i].length)
			return 0;   /* bytes some record names already */
	io.fd = open(f->info.src_path, O_RDONLY | O_CLOEXEC);
	if (io.fd < 0 || fstat(io.fd, &sb) < 0) {
		rc = ck_ingest_bad(f, "cannot open: %s", strerror(errno));
		goto out;
	}
	if ((uint64_t)sb.st_dev != f->info.dev || (uint64_t)sb.st_ino != f->info.ino ||
	    (uint64_t)sb.st_size != f->info.size) {
		rc = ck_ingest_bad(f, "changed while it was being imported (still being written?)");
		goto out;
	}
	io.size = f->info.size;
	io.bufsize = len < (1u << 20) ? (size_t)len + 1 : (1u << 20);
	io.buf = malloc(io.bufsize);
	rc = io.buf ? ck_ingest_add_storage(f, item, off, len) : -ENOMEM;
	if (!rc) {
		struct ck_storage_info *s = &f->st[f->nst - 1];

		rc = ck_ingest_read(&io, off, len, len, NULL, &s->hash_lo, &s->hash_hi);
		if (rc < 0 && rc != -ENOMEM)
			rc = ck_ingest_bad(f, "read error at %" PRIu64 ": %s", off, strerror(-rc));
	}
out:
	free(io.buf);
	if (io.fd >= 0)
		close(io.fd);
	return rc;
}

/* Names the records of the items that data file f holds. */
/* Names the records of the items idx[0..n) (chunks of m) that data file f holds. */
static int name_file(struct ck_ingest *f, const struct ck_dcp_meta *m, const size_t *idx, size_t n,
		     const struct ck_layer_rules *rules)
{
	char **by_blob = NULL;
	size_t *nst = NULL;
	long nblobs = 0;
	int rc = 0;

	for (size_t i = 0; i < f->nst; i++)
		if (blob_of(f->st[i].key) >= nblobs)
			nblobs = blob_of(f->st[i].key) + 1;
	by_blob = calloc((size_t)nblobs + 1, sizeof(*by_blob));
	nst = calloc((size_t)nblobs + 1, sizeof(*nst));
	if (!by_blob || !nst) {
		free(by_blob);
		free(nst);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->nst; i++)
		if (blob_of(f->st[i].key) >= 0)
			nst[blob_of(f->st[i].key)]++;
	/* Each item: the blob of the records inside its bytes (the storages
	 * ingested are in offset order; whole items are appended after them),
	 * or a storage of its own. */
	for (size_t k = 0, nst0 = f->nst; k < n && !rc && f->info.kind != CK_FILE_BAD; k++) {
		const struct ck_dcp_chunk *c = &m->chunks[idx[k]];
		char *item;
		long blob = -1;
		size_t lo = 0, hi = nst0;

		item = ck_dcp_item_name(&m->entries[c->entry], c);
		if (!item) {
			rc = -ENOMEM;
			break;
		}
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (f->st[mid].offset < c->offset)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nst0 && f->st[lo].offset < c->offset + c->length)
			blob = blob_of(f->st[lo].key);
		if (blob >= 0 && !by_blob[blob]) {
			by_blob[blob] = item;
		} else {
			if (blob < 0)
				rc = add_whole_item(f, item, c->offset, c->length);
			free(item);
		}
	}
	for (size_t i = 0; i < f->nst && !rc; i++) {
		long b = blob_of(f->st[i].key);
		char *s;

		if (b < 0 || !by_blob[b])
			continue;
		s = renamed(by_blob[b], f->st[i].key, '/', nst[b] == 1);
		if (!s) {
			rc = -ENOMEM;
			break;
		}
		free(f->st[i].key);
		f->st[i].key = s;
	}
	for (size_t i = 0; i < f->nt && !rc; i++) {
		struct ck_tensor_info *t = &f->t[i];
		long b = blob_of(t->name), sb = blob_of(t->storage_key);
		char layer[128], *name = NULL, *key = NULL, *lay = NULL;

		if (b < 0 || !by_blob[b])
			continue;
		name = renamed(by_blob[b], t->name, '.', 0);
		key = sb >= 0 && by_blob[sb] ? renamed(by_blob[sb], t->storage_key, '/', nst[sb] == 1)
					     : strdup(t->storage_key);
		if (name && (!rules || ck_layer_of(rules, name, layer, sizeof(layer)) < 0))
			strcpy(layer, "other");
		lay = name ? strdup(layer) : NULL;
		if (!name || !key || !lay) {
			free(name);
			free(key);
			free(lay);
			rc = -ENOMEM;
			break;
		}
		free(t->name);
		free(t->storage_key);
		free(t->layer);
		t->name = name;
		t->storage_key = key;
		t->layer = lay;
	}
	for (long b = 0; b < nblobs; b++)
		free(by_blob[b]);
	free(by_blob);
	free(nst);
	return rc;
}

/* One .metadata: parsed, checked against the files beside it, its items
 * named in their data files. */
/* qsort has no context argument; ck_ingest_dcp_names runs on one thread
 * per checkpoint, but several imports may share a process: thread-local. */
static _Thread_local const struct ck_dcp_meta *sort_chunks_m;

static int cmp_chunk_relpath(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(sort_chunks_m->chunks[x].relpath, sort_chunks_m->chunks[y].relpath);

	return c ? c : (x > y) - (x < y);
}

static int name_save(struct ck_ingest *files, size_t n, struct ck_ingest *meta, const struct ck_layer_rules *rules)
{
	struct dcp_dir d = { .files = files, .n = n, .dir = meta->info.relpath, .dlen = dir_len(meta->info.relpath) };
	struct ck_dcp_meta *m = NULL;
	struct ck_error err = { "" };
	uint8_t *data = NULL;
	size_t len = 0, *order = NULL;
	int rc;

	rc = ck_read_file(meta->info.src_path, MAX_METADATA, &data, &len);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_ingest_bad(meta, "cannot read it: %s", strerror(-rc));
	if (!has_data_files(&d) && (!len || data[0] != 0x80)) {
		free(data);
		return 0;   /* some other tool's .metadata, not a pickle */
	}
	rc = ck_dcp_parse(data, len, &m, &err);
	free(data);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_ingest_bad(meta, "not a valid DCP .metadata: %s", err.msg);
	rc = ck_dcp_check_files(m, sibling_size, &d, &err);
	if (rc < 0 && rc != -ENOMEM) {
		rc = ck_ingest_bad(meta, "%s", err.msg);
		goto out;
	}
	/* The items file by file. */
	order = malloc((m->nchunks + 1) * sizeof(*order));
	if (!order) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->nchunks; i++)
		order[i] = i;
	sort_chunks_m = m;
	qsort(order, m->nchunks, sizeof(*order), cmp_chunk_relpath);
	for (size_t i = 0, j; i < m->nchunks && !rc; i = j) {
		const char *rel = m->chunks[order[i]].relpath;
		struct ck_ingest *f = file_at(&d, rel);

		for (j = i + 1; j < m->nchunks && !strcmp(m->chunks[order[j]].relpath, rel); j++)
			;
		if (f && f->info.kind != CK_FILE_BAD)
			rc = name_file(f, m, order + i, j - i, rules);
	}
out:
	free(order);
	ck_dcp_free(m);
	return rc;
}

int ck_ingest_dcp_names(struct ck_ingest *files, size_t n, const struct ck_layer_rules *rules)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++)
		if (!strcmp(base_of(files[i].info.relpath), CK_DCP_METADATA) && files[i].info.kind != CK_FILE_BAD)
			rc = name_save(files, n, &files[i], rules);
	return rc;
}
