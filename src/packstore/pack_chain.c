/* Resolving a chunk by hash: follow its chain through the chunk table
 * (delta -> reference -> ... -> a self-contained record or a raw file),
 * then decode from the bottom up, checking every step's hash. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/pack.h"
#include "packstore_int.h"

void ck_pack_fds_init(struct ck_pack_fds *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	for (int i = 0; i < CK_RAW_FDS; i++)
		f->raw[i].fd = -1;
}

void ck_pack_fds_close(struct ck_pack_fds *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->fd[i] >= 0)
			close(f->fd[i]);
	for (int i = 0; i < CK_RAW_FDS; i++)
		if (f->raw[i].fd >= 0)
			close(f->raw[i].fd);
	free(f->fd);
	f->fd = NULL;
	f->n = 0;
	pthread_mutex_destroy(&f->lock);
}

int ck_pack_fds_get(struct ck_pack_fds *f, const char *store, uint32_t pack_id)
{
	int fd, rc = 0;

	pthread_mutex_lock(&f->lock);
	if (pack_id >= f->n) {
		size_t n = (size_t)pack_id + 8;
		int *v = realloc(f->fd, n * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&f->lock);
			return -ENOMEM;
		}
		for (size_t i = f->n; i < n; i++)
			v[i] = -1;
		f->fd = v;
		f->n = n;
	}
	fd = f->fd[pack_id];
	if (fd < 0) {
		fd = ck_pack_open(store, pack_id);
		if (fd < 0)
			rc = fd;
		else if (ck_pack_check_header(fd, NULL, NULL) < 0) {
			close(fd);
			rc = -EIO;
		} else {
			/* Advice only: a refusal leaves the readahead as it was. */
			if (f->random)
				(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
			f->fd[pack_id] = fd;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return rc < 0 ? rc : fd;
}

int ck_pack_fds_get_raw(struct ck_pack_fds *f, const struct ck_chunk_loc *l)
{
	int fd, slot = -1;

	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < CK_RAW_FDS; i++) {
		if (f->raw[i].fd >= 0 && f->raw[i].file_id == l->file_id) {
			f->raw[i].users++;
			f->raw[i].used = ++f->clock;
			fd = f->raw[i].fd;
			pthread_mutex_unlock(&f->lock);
			return fd;
		}
	}
	pthread_mutex_unlock(&f->lock);
	fd = open(l->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&f->lock);
	/* Kept in a free slot, or in place of the least recently used idle one. */
	for (int i = 0; i < CK_RAW_FDS; i++) {
		if (f->raw[i].users)
			continue;
		if (f->raw[i].fd < 0) {
			slot = i;
			break;
		}
		if (slot < 0 || f->raw[i].used < f->raw[slot].used)
			slot = i;
	}
	if (slot >= 0) {
		if (f->raw[slot].fd >= 0)
			close(f->raw[slot].fd);
		f->raw[slot].fd = fd;
		f->raw[slot].file_id = l->file_id;
		f->raw[slot].users = 1;
		f->raw[slot].used = ++f->clock;
	}
	pthread_mutex_unlock(&f->lock);
	return fd;   /* when not kept (every slot busy), put_raw closes it */
}

void ck_pack_fds_put_raw(struct ck_pack_fds *f, int fd)
{
	int kept = 0;

	pthread_mutex_lock(&f->lock);
	for (int i = 0; i < CK_RAW_FDS; i++) {
		if (f->raw[i].fd == fd && f->raw[i].users) {
			f->raw[i].users--;
			kept = 1;
			break;
		}
	}
	pthread_mutex_unlock(&f->lock);
	if (!kept)
		close(fd);
}

int ck_chunk_depth(MDB_txn *txn, struct ck_store *st, struct ck_hash128 h, struct ck_hash128 avoid,
		   unsigned *depth, int *meets)
{
	struct ck_hash128 x = h;

	*depth = 0;
	*meets = 0;
	for (;;) {
		struct ck_chunk_loc l;
		int rc = ck_chunk_lookup(txn, st, x, &l);

		if (rc < 0)
			return rc;
		if (ck_hash128_eq(x, avoid))
			*meets = 1;
		ck_chunk_loc_clear(&l);
		if (l.where != CK_CHUNK_PACKED || !ck_codec_needs_ref(l.codec))
			return 0;
		if (++*depth > CK_PACK_MAX_CHAIN)
			return -ELOOP;
		x = l.ref;
	}
}

/* A chunk from a raw file into out, checked against h unless unchecked
 * (one_pass hashes what it builds on it instead). */
static int read_raw(struct ck_pack_fds *fds, const struct ck_chunk_loc *l, struct ck_hash128 h, int unchecked,
		    uint8_t *out, struct ck_error *err)
{
	char hex[33];
	int fd = ck_pack_fds_get_raw(fds, l);
	ssize_t got = -1;

	ck_hash128_hex(h, hex);
	if (fd < 0)
		return ck_fail(err, EIO, "chunk %s: raw file %s: %s", hex, l->path, strerror(-fd));
	for (size_t at = 0; at < l->raw_len; at += (size_t)got) {
		got = pread(fd, out + at, l->raw_len - at, (off_t)(l->offset + at));
		if (got <= 0) {
			int e = errno;

			ck_pack_fds_put_raw(fds, fd);
			return ck_fail(err, EIO, "chunk %s: raw file %s at %" PRIu64 ": %s", hex, l->path, l->offset,
				       got < 0 ? strerror(e) : "the file ends first");
		}
	}
	ck_pack_fds_put_raw(fds, fd);
	if (!unchecked && !ck_hash128_eq(ck_chunk_hash(out, l->raw_len), h))
		return ck_fail(err, EIO, "chunk %s: raw file %s at %" PRIu64 ": bytes do not hash to the chunk",
			       hex, l->path, l->offset);
	return 0;
}

/* ref, when given, is a chunk checked already: it hashes to ref_h. */
static int read_packed(struct ck_store *st, struct ck_pack_fds *fds, struct ck_decoder *d,
		       const struct ck_chunk_loc *l, struct ck_hash128 h, const uint8_t *ref, uint32_t ref_len,
		       struct ck_hash128 ref_h, uint8_t *out, struct ck_error *err)
{
	struct ck_error why = { { 0 } };
	struct ck_chunk_desc desc;
	char hex[33];
	int fd, rc;

	fd = ck_pack_fds_get(fds, st->path, l->pack_id);
	if (fd < 0) {
		snprintf(why.msg, sizeof(why.msg), "cannot open the pack: %s", strerror(-fd));
		rc = fd;
	} else {
		rc = ck_pack_read_chunk(fd, l->offset, d->ctx, d->payload, ref, ref_len, ref ? &ref_h : NULL, out,
					&desc, &why);
		if (rc == 0 && (!ck_hash128_eq(desc.raw_hash, h) || desc.raw_len != l->raw_len)) {
			snprintf(why.msg, sizeof(why.msg), "the record at %" PRIu64 " holds another chunk", l->offset);
			rc = -EIO;
		}
	}
	if (rc == 0)
		return 0;
	if (rc == -ENOMEM)
		return ck_fail(err, ENOMEM, "out of memory");
	ck_hash128_hex(h, hex);
	if (strstr(why.msg, "record at"))   /* pack.h's errors name the offset */
		return ck_fail(err, EIO, "chunk %s: %s/%s/pack-%08u.ckpack: %s", hex, st->path, CK_PACKS_DIR,
			       l->pack_id, why.msg);
	return ck_fail(err, EIO, "chunk %s: %s/%s/pack-%08u.ckpack record at %" PRIu64 ": %s", hex, st->path,
		       CK_PACKS_DIR, l->pack_id, l->offset, why.msg);
}

/* A packed chunk below the one asked for, just rebuilt in p, into the
 * cache.  An exact chunk there is the same chunk of a newer checkpoint
 * (exact deltas run backwards from the newest), which a reader going
 * through a series from old to new asks for next, and which would
 * otherwise be decoded from the anchor again.  A lossy one is not kept:
 * lossy chains run forward (pack_lossy.c), so it is an older version,
 * which such a reader has read already, and a single load would pay a
 * hash, a copy and fresh memory for it (docs/bench.md).  Only if it
 * hashes right (the cache holds checked chunks). */
static void keep_step(struct ck_chunk_cache *cache, const struct ck_chunk_loc *l, struct ck_hash128 h,
		      const uint8_t *p)
{
	if (cache && l->where == CK_CHUNK_PACKED && !ck_codec_lossy(l->codec) && !ck_chunk_cache_has(cache, h) &&
	    ck_hash128_eq(ck_chunk_hash(p, l->raw_len), h))
		ck_chunk_cache_insert(cache, h, p, l->raw_len);
}

/* The chain chain[0..n) (hashes hs) rebuilt into out in one pass, and
 * only the result hashed: the bottom (a raw file's bytes or a
 * self-contained record, decoded into out; or ref, a cached chunk of
 * ref_len bytes below chain[n - 1], read where it is), then each delta
 * applied on top into out, without the records' CRCs
 * or the steps' hashes.  Every served chunk is hashed, so a damaged step
 * cannot pass; it is named by the step-by-step decode the caller falls
 * back to on any failure here.  With keep (a cache, or NULL), each packed
 * step below the top goes into it (keep_step).  0, or -errno. */
static int one_pass(struct ck_store *st, struct ck_pack_fds *fds, struct ck_decoder *d,
		    struct ck_chunk_cache *keep, const struct ck_chunk_loc *chain, const struct ck_hash128 *hs,
		    size_t n, const uint8_t *ref, uint32_t ref_len, uint8_t *out, uint32_t *len)
{
	struct ck_error why = { { 0 } };
	const uint8_t *below = out;   /* what the next delta applies to */
	size_t i = n;
	uint32_t have;
	int rc = 0;

	if (ref) {
		below = ref;   /* the first delta reads it where it is */
		have = ref_len;
	} else {
		const struct ck_chunk_loc *l = &chain[--i];
		struct ck_chunk_desc desc;
		int fd;

		have = l->raw_len;
		if (l->where == CK_CHUNK_RAW) {
			rc = read_raw(fds, l, hs[i], 1, out, NULL);
		} else if ((fd = ck_pack_fds_get(fds, st->path, l->pack_id)) < 0) {
			rc = fd;
		} else {
			rc = ck_pack_read_record_unchecked(fd, l->offset, &desc, d->payload, &why);
			if (rc == 0 && (desc.raw_len != have || ck_codec_needs_ref(desc.codec)))
				rc = -EIO;
			if (rc == 0)
				rc = ck_chunk_decode_unchecked(d->ctx, &desc, d->payload, NULL, out, &why);
		}
		if (rc == 0 && i > 0)
			keep_step(keep, l, hs[i], out);
	}
	while (rc == 0 && i-- > 0) {
		const struct ck_chunk_loc *l = &chain[i];
		struct ck_chunk_desc desc;
		int fd = ck_pack_fds_get(fds, st->path, l->pack_id);

		if (fd < 0)
			return fd;
		rc = ck_pack_read_record_unchecked(fd, l->offset, &desc, d->payload, &why);
		/* The record must be the delta the chunk table says, onto the
		 * chunk below it: a mix-up is caught before any decoding. */
		if (rc == 0 && (!ck_codec_needs_ref(desc.codec) || desc.raw_len != have ||
				!ck_hash128_eq(desc.raw_hash, hs[i]) || !ck_hash128_eq(desc.ref_hash, chain[i].ref)))
			rc = -EIO;
		if (rc == 0)
			rc = ck_chunk_decode_unchecked(d->ctx, &desc, d->payload, below, out, &why);
		if (rc == 0 && i > 0)
			keep_step(keep, l, hs[i], out);
		below = out;
	}
	if (rc == 0 && !ck_hash128_eq(ck_chunk_hash(out, have), hs[0]))
		rc = -EIO;
	if (rc == 0)
		*len = have;
	return rc;
}

int ck_chunk_resolve(MDB_txn *txn, struct ck_store *st, struct ck_pack_fds *fds, struct ck_decoder *d,
		     struct ck_chunk_cache *cache, int keep_steps, struct ck_hash128 h, uint8_t *out,
		     uint32_t *len, unsigned *depth, struct ck_error *err)
{
	struct ck_chunk_loc chain[CK_PACK_MAX_CHAIN + 1];
	struct ck_hash128 hs[CK_PACK_MAX_CHAIN + 1];
	struct ck_hash128 x = h, ref_h = { 0, 0 };
	const uint8_t *ref = NULL;
	uint32_t ref_len = 0;
	unsigned deltas = 0;
	size_t n = 0;
	char hex[33];
	int rc = 0;

	/* Down the chain until something self-contained, or a cached reference. */
	for (;;) {
		uint8_t *base = d->buf[n & 1];   /* not where entry n - 1 decodes */

		if (n > 0 && cache && ck_chunk_cache_copy(cache, x, base, &ref_len)) {
			ref = base;
			ref_h = x;   /* the cache holds checked chunks under their hash */
			break;
		}
		if (n > CK_PACK_MAX_CHAIN) {
			ck_hash128_hex(h, hex);
			rc = ck_fail(err, EIO, "chunk %s: chain longer than %d deltas", hex, CK_PACK_MAX_CHAIN);
			goto out;
		}
		rc = ck_chunk_lookup(txn, st, x, &chain[n]);
		if (rc < 0) {
			char hx[33];

			ck_hash128_hex(h, hex);
			ck_hash128_hex(x, hx);
			if (n == 0)
				rc = ck_fail(err, EIO, "chunk %s: not in the chunk table (%s)", hex, strerror(-rc));
			else
				rc = ck_fail(err, EIO, "chunk %s: step %zu of its chain, reference %s: not in the chunk table (%s)",
					     hex, n, hx, strerror(-rc));
			goto out;
		}
		hs[n] = x;
		n++;
		if (chain[n - 1].where != CK_CHUNK_PACKED || !ck_codec_needs_ref(chain[n - 1].codec))
			break;
		x = chain[n - 1].ref;
	}
	/* Everything in one pass; step by step, checking each, only when that
	 * fails (damage, or a chunk changed under us), to say where. */
	rc = one_pass(st, fds, d, keep_steps ? cache : NULL, chain, hs, n, ref, ref_len, out, len);
	if (rc == 0) {
		for (size_t i = 0; depth && i < n; i++)
			deltas += chain[i].where == CK_CHUNK_PACKED && ck_codec_needs_ref(chain[i].codec);
		if (depth)
			*depth = deltas;
		goto out;
	}
	if (rc == -ENOMEM) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = 0;
	/* Up again: entry i decodes into out (i == 0) or a scratch buffer
	 * other than the one holding its reference. */
	for (size_t i = n; i-- > 0;) {
		const struct ck_chunk_loc *l = &chain[i];
		uint8_t *dst = i == 0 ? out : d->buf[i & 1];

		if (l->where == CK_CHUNK_RAW)
			rc = read_raw(fds, l, hs[i], 0, dst, err);
		else
			rc = read_packed(st, fds, d, l, hs[i], ref, ref_len, ref_h, dst, err);
		if (rc < 0) {
			if (i > 0) {
				char hx[33];
				char msg[sizeof(err->msg)];

				ck_hash128_hex(h, hx);
				snprintf(msg, sizeof(msg), "%s", err ? err->msg : "");
				rc = ck_fail(err, -rc, "%s (step %zu of %zu of chunk %s's chain)", msg, n - i, n, hx);
			}
			goto out;
		}
		if (l->where == CK_CHUNK_PACKED && ck_codec_needs_ref(l->codec))
			deltas++;
		ref = dst;
		ref_len = l->raw_len;
		ref_h = hs[i];   /* its bytes were just checked against it */
	}
	*len = ref_len;
	if (depth)
		*depth = deltas;
out:
	for (size_t i = 0; i < n; i++)
		ck_chunk_loc_clear(&chain[i]);
	return rc;
}
