/* Reading packed file versions: a file's map, chunks found by binary
 * search, decoded through the resolver (or copied from the shared cache),
 * and two prefetch threads per open file decoding ahead into the cache.
 * Every public call may come from any thread at once. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack_store.h"

/* Threads decoding ahead of a sequential reader of one file: the reader's
 * own worker decodes too, so two keep a chain of deltas ahead of it on a
 * two-core machine. */
#define PREFETCH_WORKERS 2

struct ck_packed_file {
	struct ck_store *st;
	uint64_t file_id;
	struct ck_chunk_cache *cache;
	struct ck_fmap map;
	uint64_t *start;              /* nchunks + 1 offsets */
	struct ck_pack_fds fds;

	pthread_mutex_t lock;         /* the decoder pool and the prefetch state */
	struct ck_decoder **pool;
	size_t npool, cap;

	/* Prefetch: PREFETCH_WORKERS threads take the chunks [next, end) in
	 * turn; a chunk being decoded is marked busy, and a reader that needs
	 * it waits for it (done) instead of decoding it a second time. */
	pthread_cond_t wake, done;
	pthread_t workers[PREFETCH_WORKERS];
	int nworkers, stop;
	uint32_t next, end;
	uint8_t *busy;                /* per chunk, allocated with the first prefetch */
};

static struct ck_decoder *decoder_take(struct ck_packed_file *pf)
{
	struct ck_decoder *d = NULL;

	pthread_mutex_lock(&pf->lock);
	if (pf->npool)
		d = pf->pool[--pf->npool];
	pthread_mutex_unlock(&pf->lock);
	if (d)
		return d;
	d = malloc(sizeof(*d));
	if (d && ck_decoder_init(d) < 0) {
		free(d);
		d = NULL;
	}
	return d;
}

static void decoder_give(struct ck_packed_file *pf, struct ck_decoder *d)
{
	pthread_mutex_lock(&pf->lock);
	if (pf->npool == pf->cap) {
		size_t cap = pf->cap ? pf->cap * 2 : 4;
		struct ck_decoder **v = realloc(pf->pool, cap * sizeof(*v));

		if (v) {
			pf->pool = v;
			pf->cap = cap;
		}
	}
	if (pf->npool < pf->cap) {
		pf->pool[pf->npool++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&pf->lock);
	if (d) {
		ck_decoder_clear(d);
		free(d);
	}
}

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
	if (!pf->start) {
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
	ck_pack_fds_init(&pf->fds);
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
	free(pf->busy);
	for (size_t i = 0; i < pf->npool; i++) {
		ck_decoder_clear(pf->pool[i]);
		free(pf->pool[i]);
	}
	free(pf->pool);
	pthread_cond_destroy(&pf->wake);
	pthread_cond_destroy(&pf->done);
	pthread_mutex_destroy(&pf->lock);
	ck_pack_fds_close(&pf->fds);
	free(pf->start);
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

/* Chunk i into dst (room for CK_CHUNK_MAX), from the cache or decoded. */
static int load_chunk(struct ck_packed_file *pf, MDB_txn **txn, struct ck_decoder *d, uint32_t i, uint8_t *dst,
		      struct ck_error *err)
{
	const struct ck_fmap_chunk *c = &pf->map.chunks[i];
	uint32_t len = 0;
	int rc;

	if (pf->cache && ck_chunk_cache_copy(pf->cache, c->hash, dst, &len) && len == c->len)
		return 0;
	if (!*txn && (rc = mdb_txn_begin(pf->st->env, NULL, MDB_RDONLY, txn)) != 0) {
		*txn = NULL;
		return ck_fail(err, -ck_mdb_errno(rc), "%s: index: %s", pf->st->path, mdb_strerror(rc));
	}
	rc = ck_chunk_resolve(*txn, pf->st, &pf->fds, d, pf->cache, c->hash, dst, &len, NULL, err);
	if (rc == 0 && len != c->len) {
		char hex[33];

		ck_hash128_hex(c->hash, hex);
		rc = ck_fail(err, EIO, "chunk %s: %u bytes, the file map says %u", hex, len, c->len);
	}
	if (rc == 0 && pf->cache)
		ck_chunk_cache_insert(pf->cache, c->hash, dst, len);
	return rc;
}

/* Waits while a prefetch worker decodes chunk i (it lands in the cache). */
static void wait_prefetched(struct ck_packed_file *pf, uint32_t i)
{
	pthread_mutex_lock(&pf->lock);
	while (pf->busy && pf->busy[i])
		pthread_cond_wait(&pf->done, &pf->lock);
	pthread_mutex_unlock(&pf->lock);
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
	struct ck_decoder *d;
	MDB_txn *txn = NULL;
	uint8_t *p = buf;
	size_t done = 0;
	int rc = 0;

	if (off >= pf->map.size || len == 0)
		return 0;
	if (len > pf->map.size - off)
		len = (size_t)(pf->map.size - off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	d = decoder_take(pf);
	if (!d)
		return ck_fail(err, ENOMEM, "out of memory");
	for (uint32_t i = chunk_at(pf, off); done < len && rc == 0; i++) {
		uint64_t at = off + done, in = at - pf->start[i];
		size_t n = (size_t)(pf->start[i + 1] - at);
		int whole = in == 0 && n <= len - done;

		if (n > len - done)
			n = len - done;
		wait_prefetched(pf, i);
		/* Part of a cached chunk is copied alone; a chunk wanted whole is
		 * decoded straight into the caller's buffer. */
		if (whole) {
			rc = load_chunk(pf, &txn, d, i, p + done, err);
		} else if (!cached_part(pf, i, (uint32_t)in, (uint32_t)n, p + done)) {
			rc = load_chunk(pf, &txn, d, i, d->out, err);
			if (rc == 0)
				memcpy(p + done, d->out + in, n);
		}
		done += n;
	}
	if (txn)
		mdb_txn_abort(txn);
	decoder_give(pf, d);
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
	struct ck_decoder *d = decoder_take(pf);

	pthread_mutex_lock(&pf->lock);
	while (d && !pf->stop) {
		uint32_t i;
		MDB_txn *txn = NULL;

		if (pf->next >= pf->end) {
			pthread_cond_wait(&pf->wake, &pf->lock);
			continue;
		}
		i = pf->next++;
		if (pf->busy[i] || ck_chunk_cache_has(pf->cache, pf->map.chunks[i].hash))
			continue;
		pf->busy[i] = 1;
		pthread_mutex_unlock(&pf->lock);
		/* A failure shows again, with its reason, when the chunk is read. */
		load_chunk(pf, &txn, d, i, d->out, NULL);
		if (txn)
			mdb_txn_abort(txn);
		pthread_mutex_lock(&pf->lock);
		pf->busy[i] = 0;
		pthread_cond_broadcast(&pf->done);
	}
	pthread_mutex_unlock(&pf->lock);
	if (d)
		decoder_give(pf, d);
	return NULL;
}

void ck_packed_prefetch(struct ck_packed_file *pf, uint64_t off, uint64_t len)
{
	if (!pf->cache || off >= pf->map.size || len == 0)
		return;
	if (len > pf->map.size - off)
		len = pf->map.size - off;
	pthread_mutex_lock(&pf->lock);
	if (!pf->busy && !pf->stop)
		pf->busy = calloc(pf->map.nchunks ? pf->map.nchunks : 1, 1);
	while (pf->busy && !pf->stop && pf->nworkers < PREFETCH_WORKERS &&
	       pthread_create(&pf->workers[pf->nworkers], NULL, prefetch_main, pf) == 0)
		pf->nworkers++;
	if (pf->nworkers) {
		/* The newest range asked for replaces what is left of the last. */
		pf->next = chunk_at(pf, off);
		pf->end = chunk_at(pf, off + len - 1) + 1;
		pthread_cond_broadcast(&pf->wake);
	}
	pthread_mutex_unlock(&pf->lock);
}
