/* What the per-format ingesters share (ingester.h): building a file's
 * records, marking it bad or plain bytes, reusing the hashes of an
 * unchanged file, and reading through the window an ingester sees. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/torchzip.h"
#include "ingester.h"

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
		s = ck_grow(in->st, &in->capst, sizeof(*s), 16);
		if (!s)
			return -ENOMEM;
		in->st = s;
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
		t = ck_grow(in->t, &in->capt, sizeof(*t), 64);
		if (!t)
			return -ENOMEM;
		in->t = t;
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

/* The same bytes of an unchanged file, whatever they were named (a DCP
 * data file's storages are renamed after its items once the .metadata
 * beside it is read). */
static int same_storage(const struct ck_storage_info *a, const struct ck_storage_info *b)
{
	return a->offset == b->offset && a->length == b->length;
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
