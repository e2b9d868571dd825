/* Reading packed file versions: a file's map, chunks found by binary
 * search, decoded through the resolver (or copied from the shared cache),
 * and two prefetch threads per open file decoding ahead of a sequential
 * reader.  Every public call may come from any thread at once. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packstore_int.h"

/* Threads decoding ahead of a sequential reader of one file: the reader's
 * own worker decodes too, so two keep a chain of deltas ahead of it on a
 * two-core machine. */
#define PREFETCH_WORKERS 2
/* Chunks decoded ahead, and chunks a reader wants only part of, wait in
 * slots until all their bytes have been read; their buffers come from the
 * store's pool and go back to it then, so a stream reuses the same few
 * MiB instead of faulting in fresh memory for every chunk (docs/bench.md).
 * When every slot is taken, the one filled
 * longest ago moves to the cache: torch.load reads an optimizer's storages
 * in pickle order, which is not their order in the zip, so chunks decoded
 * ahead of one jump are often read after the next. */
#define PREFETCH_SLOTS 32
/* Chunks smaller than this (the zip headers between storages, biases,
 * scalars) never take a slot: a slot holds a chunk until every byte has
 * been read from it, and the kernel often reads a small chunk's bytes in
 * requests that also hold neighbours' bytes from other sources, so slots
 * of small chunks filled up with bytes never read from them.  Readers
 * decode them on demand (cheap) into the cache. */
#define SLOT_MIN (64u << 10)
/* Chunks a hint may queue: a few MiB of tensors, or many small records
 * (an optimizer's step counters are 4 bytes each). */
#define PREFETCH_QUEUE 64
/* Chain steps are kept for a file up to this share of the cache: with the
 * default anchor interval a chain group holds four newer versions' steps,
 * and steps that cannot stay until the next version is read only cost a
 * hash, a copy and fresh memory each (docs/design.md, "Integrity"). */
#define KEEP_STEPS_SHARE 8

enum slot_state { SLOT_FREE, SLOT_BUSY, SLOT_READY };

struct slot {
	uint32_t chunk;
	uint32_t len;
	uint32_t served;              /* bytes copied out so far */
	int state;
	int users;                    /* readers copying out of buf */
	uint64_t age;                 /* when it was claimed */
	uint8_t *buf;                 /* CK_CHUNK_MAX bytes, from the pool; NULL when free */
};

struct ck_packed_file {
	struct ck_store *st;
	uint64_t file_id;
	struct ck_chunk_cache *cache;
	int keep_steps;               /* small against the cache: chain steps go into it */
	struct ck_fmap map;
	uint64_t *start;              /* nchunks + 1 offsets */
	/* Per chunk: a reader has read it or a slot holds it, so prefetch
	 * skips it (the page cache has its bytes, or will have). */
	_Atomic uint8_t *taken;
	struct ck_pack_fds fds;

	/* Prefetch: PREFETCH_WORKERS threads take the queued chunks in turn
	 * into slots; a reader that needs a chunk being decoded waits for it
	 * (done) instead of decoding it a second time. */
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	pthread_t workers[PREFETCH_WORKERS];
	int nworkers, stop;
	uint32_t queue[PREFETCH_QUEUE];
	unsigned qhead, qlen;
	uint64_t claims;
	struct slot slot[PREFETCH_SLOTS];
};

int ck_packed_open(struct ck_store *st, uint64_t file_id, struct ck_chunk_cache *cache,
		   struct ck_packed_file **out, struct ck_error *err)
{
	struct ck_packed_file *pf;
	MDB_txn *txn;
	int rc;

	if (!ck_pack_ready(st))
		return -ENOENT;
	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc) {
		free(pf);
		return ck_fail(err, -ck_mdb_errno(rc), "%s: index: %s", st->path, mdb_strerror(rc));
	}
	rc = ck_fmap_lookup(txn, st, file_id, &pf->map);
	mdb_txn_abort(txn);
	if (rc == 0 && !(pf->map.flags & CK_FMAP_PACKED)) {
		ck_fmap_clear(&pf->map);
		rc = -ENOENT;
	}
	if (rc < 0) {
		free(pf);
		return rc == -ENOENT ? rc : ck_fail(err, -rc, "file %" PRIu64 ": its file map: %s", file_id,
							strerror(-rc));
	}
	pf->start = malloc(((size_t)pf->map.nchunks + 1) * sizeof(*pf->start));
	pf->taken = calloc((size_t)pf->map.nchunks + 1, sizeof(*pf->taken));
	if (!pf->start || !pf->taken) {
		free(pf->start);
		free(pf->taken);
		ck_fmap_clear(&pf->map);
		free(pf);
		return ck_fail(err, ENOMEM, "out of memory");
	}
	pf->start[0] = 0;
	for (uint32_t i = 0; i < pf->map.nchunks; i++)
		pf->start[i + 1] = pf->start[i] + pf->map.chunks[i].len;
	pf->st = st;
	pf->file_id = file_id;
	pf->cache = cache;
	pf->keep_steps = cache && pf->map.size <= ck_chunk_cache_bound(cache) / KEEP_STEPS_SHARE;
	ck_pack_fds_init(&pf->fds);
	pf->fds.random = 1;
	pthread_mutex_init(&pf->lock, NULL);
	pthread_cond_init(&pf->wake, NULL);
	pthread_cond_init(&pf->done, NULL);
	*out = pf;
	return 0;
}

void ck_packed_close(struct ck_packed_file *pf)
{
	if (!pf)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->stop = 1;
	pthread_cond_broadcast(&pf->wake);
	pthread_mutex_unlock(&pf->lock);
	for (int i = 0; i < pf->nworkers; i++)
		pthread_join(pf->workers[i], NULL);
	for (int i = 0; i < PREFETCH_SLOTS; i++)
		ck_pool_buffer_give(pf->st->pool, pf->slot[i].buf);
	pthread_cond_destroy(&pf->wake);
	pthread_cond_destroy(&pf->done);
	pthread_mutex_destroy(&pf->lock);
	ck_pack_fds_close(&pf->fds);
	free(pf->start);
	free(pf->taken);
	ck_fmap_clear(&pf->map);
	free(pf);
}

uint64_t ck_packed_size(const struct ck_packed_file *pf)
{
	return pf->map.size;
}

/* The chunk holding byte off (off < size). */
static uint32_t chunk_at(const struct ck_packed_file *pf, uint64_t off)
{
	uint32_t lo = 0, hi = pf->map.nchunks;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (pf->start[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Chunk i decoded into dst (room for CK_CHUNK_MAX), and into the cache
 * when keep is set.  Every caller has looked in the cache already. */
static int load_chunk(struct ck_packed_file *pf, MDB_txn **txn, struct ck_decoder *d, uint32_t i, uint8_t *dst,
		      int keep, struct ck_error *err)
{
	const struct ck_fmap_chunk *c = &pf->map.chunks[i];
	uint32_t len = 0;
	int rc;

	if (!*txn && (rc = mdb_txn_begin(pf->st->env, NULL, MDB_RDONLY, txn)) != 0) {
		*txn = NULL;
		return ck_fail(err, -ck_mdb_errno(rc), "%s: index: %s", pf->st->path, mdb_strerror(rc));
	}
	rc = ck_chunk_resolve(*txn, pf->st, &pf->fds, d, pf->cache, pf->keep_steps, c->hash, dst, &len, NULL, err);
	if (rc == 0 && len != c->len) {
		char hex[33];

		ck_hash128_hex(c->hash, hex);
		rc = ck_fail(err, EIO, "chunk %s: %u bytes, the file map says %u", hex, len, c->len);
	}
	if (rc == 0 && keep && pf->cache)
		ck_chunk_cache_insert(pf->cache, c->hash, dst, len);
	return rc;
}

/* Whether chunk i waits in the prefetch queue (pf->lock held). */
static int queued(const struct ck_packed_file *pf, uint32_t i)
{
	for (unsigned k = 0; k < pf->qlen; k++)
		if (pf->queue[pf->qhead + k] == i)
			return 1;
	return 0;
}

/* The slot holding or decoding chunk i, or NULL (pf->lock held). */
static struct slot *slot_of(struct ck_packed_file *pf, uint32_t i)
{
	for (int k = 0; k < PREFETCH_SLOTS; k++)
		if (pf->slot[k].state != SLOT_FREE && pf->slot[k].chunk == i)
			return &pf->slot[k];
	return NULL;
}

static void slot_free(struct ck_packed_file *pf, struct slot *sl)
{
	ck_pool_buffer_give(pf->st->pool, sl->buf);
	sl->buf = NULL;
	sl->state = SLOT_FREE;
}

/* A free slot for chunk i with a buffer, marked busy; when all are taken,
 * the ready one claimed longest ago goes to the cache first.  NULL when
 * none can be had (pf->lock held). */
static struct slot *slot_claim(struct ck_packed_file *pf, uint32_t i)
{
	struct slot *sl = NULL;

	for (int k = 0; k < PREFETCH_SLOTS && !sl; k++)
		if (pf->slot[k].state == SLOT_FREE)
			sl = &pf->slot[k];
	for (int k = 0; k < PREFETCH_SLOTS && !sl; k++) {
		struct slot *o = &pf->slot[k];

		if (o->state == SLOT_READY && !o->users && (!sl || o->age < sl->age))
			sl = o;
	}
	if (!sl)
		return NULL;
	if (sl->state == SLOT_READY) {
		if (pf->cache)
			ck_chunk_cache_insert(pf->cache, pf->map.chunks[sl->chunk].hash, sl->buf, sl->len);
	} else if (!(sl->buf = ck_pool_buffer_take(pf->st->pool))) {
		return NULL;
	}
	atomic_store_explicit(&pf->taken[i], 1, memory_order_relaxed);
	sl->chunk = i;
	sl->served = 0;
	sl->age = pf->claims++;
	sl->state = SLOT_BUSY;
	return sl;
}

/* Marks a decoded slot ready, or frees it after a failure, and wakes
 * whoever waits for it (pf->lock held). */
static void slot_done(struct ck_packed_file *pf, struct slot *sl, int rc)
{
	if (rc == 0) {
		sl->len = pf->map.chunks[sl->chunk].len;
		sl->state = SLOT_READY;
	} else {
		slot_free(pf, sl);
	}
	pthread_cond_broadcast(&pf->done);
}

/* Bytes [in, in + n) of chunk i from a slot, waiting while it is decoded.
 * A chunk no slot holds is decoded into one here when only part of it is
 * wanted (readahead requests rarely end on a chunk boundary: the rest is
 * read next), or when a prefetch worker would otherwise decode it too.
 * 1 when copied, 0 when the caller is to read the chunk itself, or -errno
 * with err when decoding it failed. */
static int slot_part(struct ck_packed_file *pf, struct ck_decoder **d, MDB_txn **txn, uint32_t i, uint32_t in,
		     uint32_t n, uint8_t *dst, struct ck_error *err)
{
	uint32_t len = pf->map.chunks[i].len;
	struct slot *sl;
	int rc = 0;

	pthread_mutex_lock(&pf->lock);
	while ((sl = slot_of(pf, i)) != NULL && sl->state == SLOT_BUSY)
		pthread_cond_wait(&pf->done, &pf->lock);
	if (!sl && len >= SLOT_MIN && (n < len || queued(pf, i)) &&
	    !(pf->cache && ck_chunk_cache_has(pf->cache, pf->map.chunks[i].hash)) &&
	    (*d || (*d = ck_pool_decoder_take(pf->st->pool))) && (sl = slot_claim(pf, i)) != NULL) {
		pthread_mutex_unlock(&pf->lock);
		rc = load_chunk(pf, txn, *d, i, sl->buf, 0, err);
		pthread_mutex_lock(&pf->lock);
		slot_done(pf, sl, rc);
		if (rc)
			sl = NULL;
	}
	if (sl)
		sl->users++;
	pthread_mutex_unlock(&pf->lock);
	if (!sl)
		return rc;
	memcpy(dst, sl->buf + in, n);
	pthread_mutex_lock(&pf->lock);
	sl->users--;
	sl->served += n;
	if (sl->served >= sl->len && !sl->users)
		slot_free(pf, sl);   /* every byte read: the page cache has them now */
	pthread_mutex_unlock(&pf->lock);
	return 1;
}

/* Bytes [in, in + n) of chunk i from the cache: 1 when there. */
static int cached_part(struct ck_packed_file *pf, uint32_t i, uint32_t in, uint32_t n, uint8_t *dst)
{
	uint32_t len;

	return pf->cache && ck_chunk_cache_read(pf->cache, pf->map.chunks[i].hash, in, n, dst, &len) &&
	       len == pf->map.chunks[i].len;
}

ssize_t ck_packed_pread(struct ck_packed_file *pf, void *buf, size_t len, uint64_t off, struct ck_error *err)
{
	struct ck_decoder *d = NULL;
	MDB_txn *txn = NULL;
	uint8_t *p = buf;
	size_t done = 0;
	int again, rc = 0;

	if (off >= pf->map.size || len == 0)
		return 0;
	if (len > pf->map.size - off)
		len = (size_t)(pf->map.size - off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	for (uint32_t i = chunk_at(pf, off); done < len && rc == 0; i++) {
		uint64_t at = off + done, in = at - pf->start[i];
		size_t n = (size_t)(pf->start[i + 1] - at);

		if (n > len - done)
			n = len - done;
		/* Decoded ahead, or cached: copied.  Else a chunk wanted whole is
		 * decoded straight into the caller's buffer, part of one into the
		 * decoder's. */
		rc = slot_part(pf, &d, &txn, i, (uint32_t)in, (uint32_t)n, p + done, err);
		if (rc < 0)
			break;
		if (rc > 0 || cached_part(pf, i, (uint32_t)in, (uint32_t)n, p + done)) {
			rc = 0;
			done += n;
			continue;
		}
		if (!d && !(d = ck_pool_decoder_take(pf->st->pool))) {
			rc = ck_fail(err, ENOMEM, "out of memory");
			break;
		}
		/* Read through to the page cache, so prefetch need not decode
		 * it again.  The cache keeps a chunk read whole only from its
		 * second read on (another file drawing on it, a reader beside
		 * the page cache): a single pass over a file would otherwise
		 * copy every chunk into fresh memory for nothing. */
		again = atomic_exchange_explicit(&pf->taken[i], 1, memory_order_relaxed);
		if (in == 0 && n == pf->map.chunks[i].len) {
			rc = load_chunk(pf, &txn, d, i, p + done, again, err);
		} else {
			rc = load_chunk(pf, &txn, d, i, d->out, 1, err);
			if (rc == 0)
				memcpy(p + done, d->out + in, n);
		}
		done += n;
	}
	if (txn)
		mdb_txn_abort(txn);
	ck_pool_decoder_give(pf->st->pool, d);
	if (rc < 0) {
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "%s", err ? err->msg : "");
		return ck_fail(err, -rc, "%s: packed file %" PRIu64 ": %s", pf->st->path, pf->file_id, msg);
	}
	return (ssize_t)len;
}

static void *prefetch_main(void *arg)
{
	struct ck_packed_file *pf = arg;
	struct ck_decoder *d = ck_pool_decoder_take(pf->st->pool);

	pthread_mutex_lock(&pf->lock);
	while (d && !pf->stop) {
		struct slot *sl;
		MDB_txn *txn = NULL;
		uint32_t i;
		int rc;

		if (!pf->qlen) {
			pthread_cond_wait(&pf->wake, &pf->lock);
			continue;
		}
		i = pf->queue[pf->qhead];
		if (atomic_load_explicit(&pf->taken[i], memory_order_relaxed) || slot_of(pf, i) ||
		    (pf->cache && ck_chunk_cache_has(pf->cache, pf->map.chunks[i].hash))) {
			pf->qhead++;
			pf->qlen--;
			continue;
		}
		sl = slot_claim(pf, i);
		if (!sl) {
			/* Every slot is being read from, or no memory: later. */
			pthread_cond_wait(&pf->wake, &pf->lock);
			continue;
		}
		pf->qhead++;
		pf->qlen--;
		pthread_mutex_unlock(&pf->lock);
		/* A failure shows again, with its reason, when the chunk is read. */
		rc = load_chunk(pf, &txn, d, i, sl->buf, 0, NULL);
		if (txn)
			mdb_txn_abort(txn);
		pthread_mutex_lock(&pf->lock);
		slot_done(pf, sl, rc);
	}
	pthread_mutex_unlock(&pf->lock);
	ck_pool_decoder_give(pf->st->pool, d);
	return NULL;
}

void ck_packed_prefetch_ranges(struct ck_packed_file *pf, const struct ck_byte_range *r, size_t n)
{
	pthread_mutex_lock(&pf->lock);
	while (!pf->stop && pf->nworkers < PREFETCH_WORKERS &&
	       pthread_create(&pf->workers[pf->nworkers], NULL, prefetch_main, pf) == 0)
		pf->nworkers++;
	if (pf->nworkers) {
		/* The newest hint replaces what is left of the last.  It runs
		 * under the lock for every piece of every read, so a chunk is
		 * only checked against the one queued before it (ranges that
		 * share a chunk are neighbours); a duplicate further back
		 * costs a queue entry, never a decode (workers skip taken
		 * chunks). */
		pf->qhead = pf->qlen = 0;
		for (size_t k = 0; k < n && pf->qlen < PREFETCH_QUEUE; k++) {
			uint64_t off = r[k].off, len = r[k].len;

			if (off >= pf->map.size || len == 0)
				continue;
			if (len > pf->map.size - off)
				len = pf->map.size - off;
			for (uint32_t i = chunk_at(pf, off), last = chunk_at(pf, off + len - 1);
			     i <= last && pf->qlen < PREFETCH_QUEUE; i++)
				if (pf->map.chunks[i].len >= SLOT_MIN &&
				    !atomic_load_explicit(&pf->taken[i], memory_order_relaxed) &&
				    !(pf->qlen && pf->queue[pf->qlen - 1] == i))
					pf->queue[pf->qlen++] = i;
		}
		pthread_cond_broadcast(&pf->wake);
	}
	pthread_mutex_unlock(&pf->lock);
}

void ck_packed_prefetch(struct ck_packed_file *pf, uint64_t off, uint64_t len)
{
	struct ck_byte_range r = { off, len };

	ck_packed_prefetch_ranges(pf, &r, 1);
}
