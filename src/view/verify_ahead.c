/* Verification ahead of a sequential reader (-o verify=first).
 *
 * A hashed range is checked whole on its first read, so a reader that
 * reaches a range not checked yet waits until all of it has been read and
 * hashed: on a cold page cache that is a disk read of the whole tensor per
 * tensor, one after the other, with the reader idle meanwhile.  Here one
 * thread per view hashes the ranges of the next VERIFY_AHEAD bytes of a file
 * while the reader consumes the current ones, so the disk reads overlap
 * the reader's work and later reads find their ranges checked (and their
 * pages cached).  Ranges are claimed through phys_verify_range, so a
 * reader and the thread never hash the same range twice: whichever comes
 * second waits for the first's verdict.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "ckptfs/log.h"
#include "view_internal.h"

/* How far ahead of a reader ranges are checked. */
#define VERIFY_AHEAD ((uint64_t)64 << 20)
/* Ranges waiting for the thread; when full, readers check their own. */
#define QUEUE_SLOTS 256

struct ahead_item {
	struct phys_file *pf;
	struct phys_range *r;
};

struct verify_ahead {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	int started, stop;
	struct ahead_item q[QUEUE_SLOTS];
	size_t head, n;
};

static void *ahead_main(void *arg)
{
	struct ck_view *v = arg;
	struct verify_ahead *a = v->ahead;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct ahead_item it;

		while (!a->n && !a->stop)
			pthread_cond_wait(&a->wake, &a->lock);
		if (a->stop)
			break;
		it = a->q[a->head];
		a->head = (a->head + 1) % QUEUE_SLOTS;
		a->n--;
		pthread_mutex_unlock(&a->lock);
		/* A mismatch is logged by phys_verify_range and remembered in
		 * the range: the reader gets EIO when it gets there. */
		if (atomic_load(&it.r->state) == RANGE_UNCHECKED)
			phys_verify_range(v, it.pf, it.r);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int verify_ahead_init(struct ck_view *v)
{
	struct verify_ahead *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->wake, NULL);
	v->ahead = a;
	return 0;
}

void verify_ahead_free(struct ck_view *v)
{
	struct verify_ahead *a = v->ahead;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	if (a->started)
		pthread_join(a->thread, NULL);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->lock);
	free(a);
	v->ahead = NULL;
}

/* Queues r unless the queue is full (under a->lock).  0, or -ENOSPC. */
static int enqueue(struct verify_ahead *a, struct phys_file *pf, struct phys_range *r)
{
	if (a->n == QUEUE_SLOTS)
		return -ENOSPC;
	a->q[(a->head + a->n) % QUEUE_SLOTS] = (struct ahead_item){ pf, r };
	a->n++;
	return 0;
}

void verify_ahead_post(struct ck_vfile *f, size_t i)
{
	struct verify_ahead *a = f->view->ahead;
	uint64_t end, upto = atomic_load(&f->ahead_upto);
	int queued = 0;

	if (!a)
		return;
	/* Refilled once the reader is half way through the window; another
	 * reader of the file may have queued it already. */
	if (upto >= f->ext[i].off + VERIFY_AHEAD / 2)
		return;
	end = f->ext[i].off + VERIFY_AHEAD;
	if (!atomic_compare_exchange_strong(&f->ahead_upto, &upto, end))
		return;
	/* The kernel starts reading the window's bytes now (it returns once
	 * the reads are under way), for the checks and for the reads alike. */
	for (size_t j = i + 1; j < f->next && f->ext[j].off < end; j++) {
		const struct vext *e = &f->ext[j];

		if (e->pf && e->pf->fd >= 0 && e->off + e->len > upto && !atomic_load(&e->pf->packed))
			posix_fadvise(e->pf->fd, (off_t)e->pf_off, (off_t)e->len, POSIX_FADV_WILLNEED);
	}
	if (f->view->opts.verify == CK_VERIFY_NONE)
		return;
	pthread_mutex_lock(&a->lock);
	for (size_t j = i + 1; j < f->next && f->ext[j].off < end; j++) {
		const struct vext *e = &f->ext[j];

		if (e->off + e->len <= upto || !e->range || atomic_load(&e->pf->packed) ||
		    atomic_load(&e->range->state) != RANGE_UNCHECKED)
			continue;
		if (enqueue(a, e->pf, e->range))
			break;
		queued++;
	}
	if (queued && !a->started && !a->stop) {
		/* Started by the first reader that needs it: views opened by
		 * ckptctl to list or show never start a thread. */
		a->started = pthread_create(&a->thread, NULL, ahead_main, f->view) == 0;
		if (!a->started) {
			ck_debug("no verification ahead: cannot start its thread");
			a->n = 0;
		}
	}
	if (queued)
		pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
}
