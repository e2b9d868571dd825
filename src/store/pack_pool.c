/* Decoders and chunk-sized buffers shared by every packed file read
 * through one open store.  Both are costly the first time they are used,
 * and not only to allocate: every 4 KiB page faults on first touch, about
 * 0.4 ms per MiB on the 2-vCPU development VM, which is most of what
 * decoding a MiB of an anchor costs.  Handed from file to file, they are
 * faulted in once per mount instead of once per file (a decoder touches
 * several MiB: its record, planes and output buffers).  Beyond the pool's
 * bounds what is given back is freed. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "pack_store.h"

#define POOL_DECODERS 16
#define POOL_BUFFERS 32

struct ck_pack_pool {
	pthread_mutex_t lock;
	struct ck_decoder *dec[POOL_DECODERS];
	size_t ndec;
	uint8_t *buf[POOL_BUFFERS];
	size_t nbuf;
};

int ck_pack_pool_new(struct ck_pack_pool **out)
{
	struct ck_pack_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void ck_pack_pool_free(struct ck_pack_pool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->ndec; i++) {
		ck_decoder_clear(p->dec[i]);
		free(p->dec[i]);
	}
	for (size_t i = 0; i < p->nbuf; i++)
		free(p->buf[i]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

struct ck_decoder *ck_pool_decoder_take(struct ck_store *st)
{
	struct ck_pack_pool *p = st->pool;
	struct ck_decoder *d = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->ndec)
		d = p->dec[--p->ndec];
	pthread_mutex_unlock(&p->lock);
	if (d)
		return d;
	d = malloc(sizeof(*d));
	if (d && ck_decoder_init(d) < 0) {
		free(d);
		d = NULL;
	}
	return d;
}

void ck_pool_decoder_give(struct ck_store *st, struct ck_decoder *d)
{
	struct ck_pack_pool *p = st->pool;

	if (!d)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->ndec < POOL_DECODERS) {
		p->dec[p->ndec++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (d) {
		ck_decoder_clear(d);
		free(d);
	}
}

uint8_t *ck_pool_buffer_take(struct ck_store *st)
{
	struct ck_pack_pool *p = st->pool;
	uint8_t *b = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->nbuf)
		b = p->buf[--p->nbuf];
	pthread_mutex_unlock(&p->lock);
	return b ? b : malloc(CK_CHUNK_MAX);
}

void ck_pool_buffer_give(struct ck_store *st, uint8_t *b)
{
	struct ck_pack_pool *p = st->pool;

	if (!b)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->nbuf < POOL_BUFFERS) {
		p->buf[p->nbuf++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	free(b);
}
