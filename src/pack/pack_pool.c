/* Decoders and chunk-sized buffers shared by every packed file read
 * through one open store.  Both are costly the first time they are used,
 * and not only to allocate: every 4 KiB page faults on first touch, which
 * on a virtual machine can cost as much as decoding the MiB of an anchor
 * that fills it (docs/bench.md).  Handed from file to file, they are
 * faulted in once per mount instead of once per file (a decoder touches
 * several MiB: its record, planes and output buffers).  Beyond the pool's
 * bounds what is given back is freed. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/chunk.h"
#include "ckptfs/pack_pool.h"

#define POOL_DECODERS 16
#define POOL_BUFFERS 32

/* A bounded stack of idle objects of one kind, under the pool's lock. */
struct idle {
	void *item[POOL_BUFFERS > POOL_DECODERS ? POOL_BUFFERS : POOL_DECODERS];
	size_t n, max;
};

struct ck_pack_pool {
	pthread_mutex_t lock;
	struct idle decs, bufs;
};

int ck_decoder_init(struct ck_decoder *d)
{
	memset(d, 0, sizeof(*d));
	if (ck_chunk_ctx_new(NULL, &d->ctx) < 0)
		return -ENOMEM;
	d->payload = malloc(CK_CHUNK_MAX);
	d->buf[0] = malloc(CK_CHUNK_MAX);
	d->buf[1] = malloc(CK_CHUNK_MAX);
	d->out = malloc(CK_CHUNK_MAX);
	if (!d->payload || !d->buf[0] || !d->buf[1] || !d->out) {
		ck_decoder_clear(d);
		return -ENOMEM;
	}
	return 0;
}

void ck_decoder_clear(struct ck_decoder *d)
{
	ck_chunk_ctx_free(d->ctx);
	free(d->payload);
	free(d->buf[0]);
	free(d->buf[1]);
	free(d->out);
	memset(d, 0, sizeof(*d));
}

int ck_pack_pool_new(struct ck_pack_pool **out)
{
	struct ck_pack_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	p->decs.max = POOL_DECODERS;
	p->bufs.max = POOL_BUFFERS;
	*out = p;
	return 0;
}

void ck_pack_pool_free(struct ck_pack_pool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->decs.n; i++) {
		ck_decoder_clear(p->decs.item[i]);
		free(p->decs.item[i]);
	}
	for (size_t i = 0; i < p->bufs.n; i++)
		free(p->bufs.item[i]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* An idle object, or NULL when there is none. */
static void *idle_take(struct ck_pack_pool *p, struct idle *s)
{
	void *x = NULL;

	pthread_mutex_lock(&p->lock);
	if (s->n)
		x = s->item[--s->n];
	pthread_mutex_unlock(&p->lock);
	return x;
}

/* Keeps x for the next taker: 1, or 0 when the stack is full (the caller
 * frees x). */
static int idle_give(struct ck_pack_pool *p, struct idle *s, void *x)
{
	int kept = 0;

	pthread_mutex_lock(&p->lock);
	if (s->n < s->max) {
		s->item[s->n++] = x;
		kept = 1;
	}
	pthread_mutex_unlock(&p->lock);
	return kept;
}

struct ck_decoder *ck_pool_decoder_take(struct ck_pack_pool *p)
{
	struct ck_decoder *d = idle_take(p, &p->decs);

	if (d)
		return d;
	d = malloc(sizeof(*d));
	if (d && ck_decoder_init(d) < 0) {
		free(d);
		d = NULL;
	}
	return d;
}

void ck_pool_decoder_give(struct ck_pack_pool *p, struct ck_decoder *d)
{
	if (!d || idle_give(p, &p->decs, d))
		return;
	ck_decoder_clear(d);
	free(d);
}

uint8_t *ck_pool_buffer_take(struct ck_pack_pool *p)
{
	uint8_t *b = idle_take(p, &p->bufs);

	return b ? b : malloc(CK_CHUNK_MAX);
}

void ck_pool_buffer_give(struct ck_pack_pool *p, uint8_t *b)
{
	if (b && !idle_give(p, &p->bufs, b))
		free(b);
}
