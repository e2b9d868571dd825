/* FUSE over io_uring.
 *
 * The kernel side (fs/fuse/dev_uring.c, protocol 7.42): a daemon that sets
 * FUSE_OVER_IO_URING in its INIT answer may register ring entries, each a
 * header buffer (struct uring_header) and a payload buffer of the
 * connection's largest request, with IORING_OP_URING_CMD commands on
 * /dev/fuse, one queue per possible CPU.  Once every queue has an entry,
 * the kernel puts each request into an idle entry of the queue of the CPU
 * it was made on and completes that entry's command; the daemon answers in
 * the same buffers and commits the answer with a command that also fetches
 * the next request.
 *
 * Here each entry has a thread of its own (uring_threads of them per CPU,
 * pinned to it) with a small io_uring of its own: a thread blocked in a
 * slow request (an open waiting for its composite) then holds no other
 * request up.  The thread rebuilds the request as /dev/fuse would have
 * delivered it and hands it to libfuse (fuse_session_process_buf); the
 * custom I/O below recognises the answer to that request by its unique id
 * and writes it into the entry instead of /dev/fuse.  The answer goes to
 * the kernel with the command that fetches the next request, when the
 * handler has returned (one system call per request, and an entry is
 * never handed back while its thread is busy); a notification the
 * handler sends after answering, which may wait for what the answer
 * releases, goes through a notifier thread.
 */
#include "config.h"

#include <errno.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ckptfs/log.h"
#include "daemon.h"
#include "mount.h"
#include "uring.h"

/* Protocol 7.42 pieces that Debian 12's <linux/fuse.h> (7.38) lacks. */
#define URING_INIT_FLAG2 (1u << (41 - 32))     /* FUSE_OVER_IO_URING, in flags2 */
#define URING_CMD_REGISTER 1
#define URING_CMD_COMMIT_AND_FETCH 2

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;     /* the request's, to commit its answer with */
	uint32_t payload_sz;    /* bytes in the payload buffer, both ways */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_header {
	char in_out[128];       /* struct fuse_in_header, then the fuse_out_header */
	char op_in[128];        /* the request's first argument */
	struct uring_ent_in_out ent_in_out;
};

struct uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

/* Room before a payload for the header and first argument of a WRITE,
 * whose data is handed to libfuse where the kernel put it. */
#define URING_GAP 4096u
#define URING_SQE_SIZE 128u     /* IORING_SETUP_SQE128: the command needs 24 bytes */
#define URING_RING_ENTRIES 4u   /* one command of the entry, one poll of the stop eventfd */

struct uring_thread {
	struct ckfs_uring *u;
	int qid;
	int rfd;                        /* its io_uring */
	unsigned *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	char *sqes;
	void *sq_map, *cq_map;
	size_t sq_map_len, cq_map_len, sqes_len;
	unsigned to_submit;
	struct uring_header *hdr;       /* a page of its own */
	uint8_t *area;                  /* URING_GAP bytes, then the payload */
	uint8_t *payload;
	uint8_t *scratch;               /* a request other than WRITE, rebuilt */
	size_t scratch_cap;
	struct iovec iov[2];
	uint64_t unique;                /* of the request being answered */
	uint64_t commit_id;             /* the kernel's name for it */
	int replied;
	pthread_t tid;
	int started;
};

/* A notification a ring thread sent after answering its request. */
struct notice {
	struct notice *next;
	size_t len;
	uint8_t msg[];
};

struct ckfs_uring {
	struct ckfs *fs;
	struct fuse_session *se;
	int negotiated;
	size_t payload_cap;
	int stop_fd;                    /* an eventfd: readable once the threads must end */
	size_t nthreads;
	struct uring_thread *threads;
	atomic_ulong served;
	atomic_int refused;             /* registrations the kernel refused */
	pthread_mutex_t lock;           /* guards the notices and stopping */
	pthread_cond_t wake;
	struct notice *notices, **notices_tail;
	int stopping;
	pthread_t notifier;
	int notifier_started;
};

/* The ring entry the calling thread is answering a request of. */
static __thread struct uring_thread *serving;

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

static ssize_t io_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
				 unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

/* Copies an answer (header in iov[0], the rest its data) into t's entry,
 * sent when the handler returns (serve_entry). */
static ssize_t answer_into_entry(struct uring_thread *t, const struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct fuse_out_header *dst = (struct fuse_out_header *)t->hdr->in_out;
	size_t pos = 0;

	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > t->u->payload_cap - pos) {
			errno = EINVAL;
			return -1;
		}
		if (iov[i].iov_base != t->payload + pos)	/* built in place: no copy */
			memmove(t->payload + pos, iov[i].iov_base, iov[i].iov_len);
		pos += iov[i].iov_len;
	}
	dst->unique = oh->unique;
	dst->error = oh->error;
	dst->len = (uint32_t)(sizeof(*dst) + pos);
	t->hdr->ent_in_out.payload_sz = (uint32_t)pos;
	t->replied = 1;
	return (ssize_t)(sizeof(*oh) + pos);
}

/* Queues a notification for the notifier thread; its length, or -1. */
static ssize_t defer_notice(struct ckfs_uring *u, const struct iovec *iov, int count)
{
	size_t len = 0;
	struct notice *n;

	for (int i = 0; i < count; i++)
		len += iov[i].iov_len;
	n = malloc(sizeof(*n) + len);
	if (!n) {
		errno = ENOMEM;
		return -1;
	}
	n->next = NULL;
	n->len = 0;
	for (int i = 0; i < count; i++) {
		memcpy(n->msg + n->len, iov[i].iov_base, iov[i].iov_len);
		n->len += iov[i].iov_len;
	}
	pthread_mutex_lock(&u->lock);
	*u->notices_tail = n;
	u->notices_tail = &n->next;
	pthread_cond_signal(&u->wake);
	pthread_mutex_unlock(&u->lock);
	return (ssize_t)len;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	struct uring_thread *t = serving;

	(void)userdata;
	if (t && !t->replied && oh->unique == t->unique)
		return answer_into_entry(t, iov, count);
	/* A notification from a handler that has answered: the answer goes
	 * to the kernel only when the handler returns, and a notification
	 * may wait for what the answer releases (a commit's rename handler
	 * invalidates names after answering, which waits for the directory
	 * lock the rename holds until it has its answer).  Sent by another
	 * thread. */
	if (t && t->replied && oh->unique == 0 && t->u->notifier_started)
		return defer_notice(t->u, iov, count);
	return writev(fd, iov, count);	/* a notification, or a request from /dev/fuse */
}

/* libfuse splices large answers through a pipe: an answer to the entry's
 * request is read out of the pipe into the entry; anything else goes on
 * to /dev/fuse as it would have. */
static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
			      unsigned int flags, void *userdata)
{
	struct uring_thread *t = serving;
	struct fuse_out_header oh;
	struct iovec iov[2];
	uint8_t *rest;
	size_t got = 0;
	ssize_t n;

	(void)userdata;
	if (!t || t->replied)
		return splice(fdin, offin, fdout, offout, len, flags);
	if (len < sizeof(oh) || read(fdin, &oh, sizeof(oh)) != (ssize_t)sizeof(oh)) {
		errno = EIO;
		return -1;
	}
	len -= sizeof(oh);
	rest = oh.unique == t->unique && len <= t->u->payload_cap ? t->payload : malloc(len ? len : 1);
	if (!rest) {
		errno = ENOMEM;
		return -1;
	}
	while (got < len) {
		n = read(fdin, rest + got, len - got);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (rest != t->payload)
				free(rest);
			errno = EIO;
			return -1;
		}
		got += (size_t)n;
	}
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ rest, len };
	if (rest == t->payload)
		return answer_into_entry(t, iov, 2);
	n = writev(fdout, iov, 2);
	free(rest);
	return n;
}

int ckfs_uring_install(struct ckfs *fs, struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
		.splice_receive = io_splice_receive,
		.splice_send = io_splice_send,
	};
	struct ckfs_uring *u = calloc(1, sizeof(*u));
	int rc;

	if (!u)
		return -ENOMEM;
	rc = fuse_session_custom_io(se, &io, fuse_session_fd(se));
	if (rc) {
		free(u);
		return rc < 0 ? rc : -EINVAL;
	}
	u->fs = fs;
	u->se = se;
	u->stop_fd = -1;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->wake, NULL);
	u->notices_tail = &u->notices;
	fs->uring = u;
	return 0;
}

void ckfs_uring_negotiate(struct ckfs *fs, const struct fuse_init_in *in, struct fuse_init_out *out)
{
	struct ckfs_uring *u = fs->uring;
	size_t pages;

	if (!u)
		return;
	if (!(in->flags & FUSE_INIT_EXT) || !(in->flags2 & URING_INIT_FLAG2)) {
		ck_debug("FUSE handshake: io_uring not offered by the kernel "
			 "(Linux 6.14+ with the fuse module's enable_uring=Y)");
		return;
	}
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= URING_INIT_FLAG2;
	/* The kernel refuses entries smaller than its largest request:
	 * max(FUSE_MIN_READ_BUFFER, max_write, max_pages pages), max_pages
	 * as answered (the kernel may lower it, never raise it). */
	pages = (out->flags & FUSE_MAX_PAGES) ? out->max_pages : 32;
	u->payload_cap = 8192;
	if (out->max_write > u->payload_cap)
		u->payload_cap = out->max_write;
	if (pages * 4096u > u->payload_cap)
		u->payload_cap = pages * 4096u;
	u->negotiated = 1;
	ck_debug("FUSE handshake: io_uring on, %zu-byte payloads", u->payload_cap);
}

void ckfs_uring_forget(struct ckfs *fs)
{
	if (fs->uring)
		fs->uring->negotiated = 0;
}

void *ckfs_uring_reply_buffer(size_t *cap)
{
	struct uring_thread *t = serving;

	if (!t || t->replied)
		return NULL;
	*cap = t->u->payload_cap;
	return t->payload;
}

static int ring_setup(struct uring_thread *t)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128;
	t->rfd = (int)syscall(__NR_io_uring_setup, URING_RING_ENTRIES, &p);
	if (t->rfd < 0)
		return -errno;
	t->sq_map_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	t->cq_map_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		if (t->cq_map_len > t->sq_map_len)
			t->sq_map_len = t->cq_map_len;
		t->cq_map_len = 0;
	}
	sq = mmap(NULL, t->sq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, t->rfd,
		  IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		return -errno;
	t->sq_map = sq;
	cq = sq;
	if (t->cq_map_len) {
		cq = mmap(NULL, t->cq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, t->rfd,
			  IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			return -errno;
		t->cq_map = cq;
	}
	t->sqes_len = p.sq_entries * URING_SQE_SIZE;
	t->sqes = mmap(NULL, t->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, t->rfd,
		       IORING_OFF_SQES);
	if (t->sqes == MAP_FAILED) {
		t->sqes = NULL;
		return -errno;
	}
	t->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	t->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	t->sq_array = (unsigned *)(sq + p.sq_off.array);
	t->cq_head = (unsigned *)(cq + p.cq_off.head);
	t->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	t->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	t->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* A zeroed submission queue entry, queued for the next io_uring_enter
 * (only this thread submits on its ring). */
static struct io_uring_sqe *sqe_next(struct uring_thread *t)
{
	unsigned tail = *t->sq_tail, idx = tail & *t->sq_mask;
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)(t->sqes + (size_t)idx * URING_SQE_SIZE);

	memset(sqe, 0, URING_SQE_SIZE);
	t->sq_array[idx] = idx;
	atomic_store_explicit((_Atomic unsigned *)t->sq_tail, tail + 1, memory_order_release);
	t->to_submit++;
	return sqe;
}

/* Queues the entry's REGISTER, or the COMMIT_AND_FETCH of its answer. */
static void entry_cmd(struct uring_thread *t, uint32_t op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = sqe_next(t);
	struct uring_cmd_req *cmd = (struct uring_cmd_req *)sqe->cmd;

	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fuse_session_fd(t->u->se);
	sqe->cmd_op = op;
	sqe->user_data = 1;
	if (op == URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)t->iov;
		sqe->len = 2;
	}
	cmd->qid = (uint16_t)t->qid;
	cmd->commit_id = commit_id;
}

static void stop_poll(struct uring_thread *t)
{
	struct io_uring_sqe *sqe = sqe_next(t);

	sqe->opcode = IORING_OP_POLL_ADD;
	sqe->fd = t->u->stop_fd;
	sqe->poll32_events = POLLIN;
	sqe->user_data = 2;
}

/* The request in t's entry as /dev/fuse would have delivered it, in *fb.
 * 0, -EPROTO when the kernel's header does not add up, or -ENOMEM. */
static int rebuild_request(struct uring_thread *t, struct fuse_buf *fb)
{
	const struct fuse_in_header *in = (const void *)t->hdr->in_out;
	size_t payload = t->hdr->ent_in_out.payload_sz, arg0;
	uint8_t *req;

	if (in->len < sizeof(*in) + payload || payload > t->u->payload_cap)
		return -EPROTO;
	arg0 = in->len - sizeof(*in) - payload;
	if (arg0 > sizeof(t->hdr->op_in))
		return -EPROTO;
	if (in->opcode == FUSE_WRITE) {
		/* The data stays where the kernel put it. */
		req = t->payload - arg0 - sizeof(*in);
	} else {
		if (t->scratch_cap < in->len) {
			uint8_t *p = realloc(t->scratch, in->len);

			if (!p)
				return -ENOMEM;
			t->scratch = p;
			t->scratch_cap = in->len;
		}
		req = t->scratch;
		memcpy(req + sizeof(*in) + arg0, t->payload, payload);
	}
	memcpy(req, in, sizeof(*in));
	memcpy(req + sizeof(*in), t->hdr->op_in, arg0);
	memset(fb, 0, sizeof(*fb));
	fb->mem = req;
	fb->size = in->len;
	return 0;
}

/* Answers the request in t's entry (through libfuse) and queues the commit. */
static void serve_entry(struct uring_thread *t)
{
	const struct fuse_in_header *in = (const void *)t->hdr->in_out;
	uint32_t opcode = in->opcode;
	struct fuse_buf fb;
	int rc;

	t->unique = in->unique;
	t->commit_id = t->hdr->ent_in_out.commit_id;
	t->replied = 0;
	rc = rebuild_request(t, &fb);
	if (rc == 0) {
		serving = t;
		fuse_session_process_buf(t->u->se, &fb);
		serving = NULL;
	}
	if (!t->replied) {
		/* Every request through a ring takes an answer, or the entry
		 * would never come back: libfuse answers them all, so this is
		 * a request it could not read. */
		struct fuse_out_header *oh = (struct fuse_out_header *)t->hdr->in_out;
		uint64_t unique = t->unique;

		ck_warn("io_uring: request %llu (opcode %u) not answered: %s", (unsigned long long)unique,
			opcode, strerror(rc ? -rc : EIO));
		oh->unique = unique;
		oh->error = rc ? rc : -EIO;
		oh->len = sizeof(*oh);
		t->hdr->ent_in_out.payload_sz = 0;
	}
	atomic_fetch_add_explicit(&t->u->served, 1, memory_order_relaxed);
	/* Sent by the thread's next io_uring_enter, which also waits for the
	 * next request: the entry is never handed back while its thread is
	 * busy, so the kernel gives requests only to threads ready for them. */
	entry_cmd(t, URING_CMD_COMMIT_AND_FETCH, t->commit_id);
}

static void *ring_thread(void *arg)
{
	struct uring_thread *t = arg;
	cpu_set_t set;
	int rc, registered = 0;

	/* The queue's requests come from its CPU: answering them there turns
	 * the reader's wait into a switch to this thread, not a wake-up of
	 * another CPU.  Not fatal: the kernel serves the queue either way. */
	CPU_ZERO(&set);
	CPU_SET(t->qid, &set);
	sched_setaffinity(0, sizeof(set), &set);
	rc = ring_setup(t);
	if (rc) {
		ck_warn("io_uring: cannot set up a ring for CPU %d: %s", t->qid, strerror(-rc));
		atomic_fetch_add(&t->u->refused, 1);
		return NULL;
	}
	entry_cmd(t, URING_CMD_REGISTER, 0);
	stop_poll(t);
	for (;;) {
		unsigned head, tail;

		rc = (int)syscall(__NR_io_uring_enter, t->rfd, t->to_submit, 1, IORING_ENTER_GETEVENTS, NULL, 0);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			ck_err("io_uring: waiting for requests on CPU %d: %s", t->qid, strerror(errno));
			break;
		}
		t->to_submit -= (unsigned)rc < t->to_submit ? (unsigned)rc : t->to_submit;
		head = *t->cq_head;
		tail = atomic_load_explicit((_Atomic unsigned *)t->cq_tail, memory_order_acquire);
		for (; head != tail; head++) {
			const struct io_uring_cqe *c = &t->cqes[head & *t->cq_mask];

			if (c->user_data == 2)
				goto out;	/* ckfs_uring_stop */
			if (c->res == -EINTR || c->res == -EAGAIN) {
				entry_cmd(t, registered ? URING_CMD_COMMIT_AND_FETCH : URING_CMD_REGISTER,
					  t->commit_id);
				continue;
			}
			if (c->res < 0) {
				/* ENOTCONN, ENODEV, ECANCELED: the connection ended. */
				if (!registered && c->res != -ENOTCONN && c->res != -ENODEV) {
					ck_warn("io_uring: the kernel refused a ring entry on CPU %d: %s",
						t->qid, strerror(-c->res));
					atomic_fetch_add(&t->u->refused, 1);
				} else if (c->res != -ENOTCONN && c->res != -ENODEV && c->res != -ECANCELED) {
					ck_err("io_uring: ring entry on CPU %d: %s", t->qid, strerror(-c->res));
				}
				atomic_store_explicit((_Atomic unsigned *)t->cq_head, head + 1,
						      memory_order_release);
				goto out;
			}
			registered = 1;
			serve_entry(t);
		}
		atomic_store_explicit((_Atomic unsigned *)t->cq_head, head, memory_order_release);
	}
out:
	return NULL;
}

static void *notifier_thread(void *arg)
{
	struct ckfs_uring *u = arg;

	pthread_mutex_lock(&u->lock);
	for (;;) {
		struct notice *n = u->notices;

		if (!n) {
			if (u->stopping)
				break;
			pthread_cond_wait(&u->wake, &u->lock);
			continue;
		}
		u->notices = n->next;
		if (!u->notices)
			u->notices_tail = &u->notices;
		pthread_mutex_unlock(&u->lock);
		/* ENOENT: the kernel had nothing cached under that name. */
		if (write(fuse_session_fd(u->se), n->msg, n->len) < 0 && errno != ENOENT)
			ck_debug("io_uring: a deferred notification: %s", strerror(errno));
		free(n);
		pthread_mutex_lock(&u->lock);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

static void thread_free(struct uring_thread *t)
{
	if (t->sqes)
		munmap(t->sqes, t->sqes_len);
	if (t->cq_map)
		munmap(t->cq_map, t->cq_map_len);
	if (t->sq_map)
		munmap(t->sq_map, t->sq_map_len);
	if (t->rfd >= 0)
		close(t->rfd);
	free(t->hdr);
	free(t->area);
	free(t->scratch);
}

int ckfs_uring_start(struct ckfs *fs)
{
	struct ckfs_uring *u = fs->uring;
	size_t cpus, per_cpu;

	if (!u || !u->negotiated)
		return 0;
	cpus = (size_t)get_nprocs_conf();	/* the kernel has a queue per possible CPU */
	per_cpu = fs->cfg->uring_threads;
	u->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (u->stop_fd < 0)
		return -errno;
	u->threads = calloc(cpus * per_cpu, sizeof(*u->threads));
	if (!u->threads)
		return -ENOMEM;
	if (ckfs_start_thread(&u->notifier, notifier_thread, u) == 0)
		u->notifier_started = 1;
	for (size_t i = 0; i < cpus * per_cpu; i++) {
		struct uring_thread *t = &u->threads[i];
		int rc;

		t->u = u;
		t->qid = (int)(i / per_cpu);
		t->rfd = -1;
		u->nthreads = i + 1;	/* freed by ckfs_uring_stop, started or not */
		t->hdr = aligned_alloc(4096, 4096);
		t->area = aligned_alloc(4096, URING_GAP + ((u->payload_cap + 4095) & ~(size_t)4095));
		if (!t->hdr || !t->area) {
			ck_err("io_uring: out of memory");
			break;
		}
		memset(t->hdr, 0, 4096);
		t->payload = t->area + URING_GAP;
		t->iov[0] = (struct iovec){ t->hdr, sizeof(*t->hdr) };
		t->iov[1] = (struct iovec){ t->payload, u->payload_cap };
		rc = ckfs_start_thread(&t->tid, ring_thread, t);
		if (rc) {
			ck_err("io_uring: cannot start a ring thread: %s", strerror(-rc));
			break;
		}
		t->started = 1;
	}
	ck_info("FUSE over io_uring: %zu queue%s x %zu thread%s", cpus, cpus == 1 ? "" : "s", per_cpu,
		per_cpu == 1 ? "" : "s");
	return 0;
}

void ckfs_uring_stop(struct ckfs *fs)
{
	struct ckfs_uring *u = fs->uring;

	if (!u)
		return;
	if (u->stop_fd >= 0) {
		uint64_t one = 1;

		if (write(u->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			ck_warn("io_uring: cannot stop the ring threads: %s", strerror(errno));
	}
	for (size_t i = 0; i < u->nthreads; i++) {
		if (u->threads[i].started)
			pthread_join(u->threads[i].tid, NULL);
		thread_free(&u->threads[i]);
	}
	if (u->notifier_started) {
		pthread_mutex_lock(&u->lock);
		u->stopping = 1;
		pthread_cond_signal(&u->wake);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->notifier, NULL);	/* sends what is left: the connection is gone */
	}
	pthread_mutex_destroy(&u->lock);
	pthread_cond_destroy(&u->wake);
	if (u->negotiated)
		ck_info("FUSE over io_uring: %lu requests served through the rings%s",
			(unsigned long)atomic_load(&u->served),
			atomic_load(&u->refused) ? " (some ring entries refused: the rest went through /dev/fuse)"
						 : "");
	if (u->stop_fd >= 0)
		close(u->stop_fd);
	free(u->threads);
	free(u);
	fs->uring = NULL;
}
