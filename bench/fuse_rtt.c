/* What one FUSE request costs, over /dev/fuse and over io_uring:
 *   bench/fuse_rtt [--rounds N] [--calls N] [--size BYTES] [--mnt DIR]
 * Mounts a one-file FUSE file system of its own (root only: it mounts with
 * mount(2) and no fusermount), whose file is opened with FOPEN_DIRECT_IO so
 * that every pread is one READ request, and times preads of SIZE bytes
 * served two ways in turn, each round the other way first:
 *   dev    a thread reading /dev/fuse and writing replies to it, the way
 *          libfuse 3.14 serves ckptfs;
 *   uring  FUSE over io_uring (kernel 6.14+, fuse module parameter
 *          enable_uring=Y): one queue per CPU, served by a thread pinned
 *          to that CPU, each reply committed with the next fetch.
 * and the same with the ring threads left unpinned.
 * Prints the median microseconds per call of each and their ratios
 * (docs/bench.md, "fuse_rtt").  Exits 77 when it cannot run here. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The FUSE-over-io_uring ABI (include/uapi/linux/fuse.h, protocol 7.42),
 * newer than the system's headers. */
#define RTT_FUSE_OVER_IO_URING2 (1u << (41 - 32)) /* in init flags2 */
#define RTT_CMD_REGISTER 1
#define RTT_CMD_COMMIT_AND_FETCH 2

struct rtt_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct rtt_req_header {
	char in_out[128];      /* fuse_in_header, then fuse_out_header */
	char op_in[128];       /* the request's first argument */
	struct rtt_ent_in_out ring_ent_in_out;
};

struct rtt_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define FILE_INO 2
#define FILE_SIZE (1ull << 30)
#define MAX_WRITE (128u * 1024u)
#define MAX_PAGES 32u
#define DEPTH 4

static char zeros[MAX_WRITE];

struct queue {
	struct srv *srv;
	int qid;
	int rfd;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	char *sqes; /* 128-byte entries (IORING_SETUP_SQE128) */
	unsigned to_submit;
	struct ent {
		struct rtt_req_header *h;
		void *payload;
		struct iovec iov[2];
	} ent[DEPTH];
	pthread_t thr;
	int failed;
};

struct srv {
	int fd;
	int uring;
	int pin;                /* ring threads pinned to their queue's CPU */
	int nq;
	struct queue *q;
	pthread_t dev;
};

static void attr_of(uint64_t ino, struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = ino == FUSE_ROOT_ID ? 2 : 1;
	a->mode = ino == FUSE_ROOT_ID ? (S_IFDIR | 0755) : (S_IFREG | 0444);
	a->size = ino == FUSE_ROOT_ID ? 0 : FILE_SIZE;
	a->blksize = 4096;
}

/* Answers one request: fills out (up to MAX_WRITE bytes) and returns its
 * length, or -errno; 1 << 30 for requests that take no reply.  op_in is
 * the request's first argument, payload the rest (on /dev/fuse both are
 * the bytes after the header). */
static long handle(const struct fuse_in_header *in, const void *op_in, const void *payload, void *out,
		   const void **data)
{
	*data = NULL;
	switch (in->opcode) {
	case FUSE_LOOKUP: {
		struct fuse_entry_out *e = out;

		if (in->nodeid != FUSE_ROOT_ID || strcmp(payload, "f") != 0)
			return -ENOENT;
		memset(e, 0, sizeof(*e));
		e->nodeid = FILE_INO;
		e->generation = 1;
		e->entry_valid = e->attr_valid = 3600;
		attr_of(FILE_INO, &e->attr);
		return sizeof(*e);
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out *a = out;

		memset(a, 0, sizeof(*a));
		a->attr_valid = 3600;
		attr_of(in->nodeid, &a->attr);
		return sizeof(*a);
	}
	case FUSE_OPEN: {
		struct fuse_open_out *o = out;

		memset(o, 0, sizeof(*o));
		o->open_flags = FOPEN_DIRECT_IO;
		return sizeof(*o);
	}
	case FUSE_READ: {
		const struct fuse_read_in *r = op_in;
		uint32_t n = r->size < MAX_WRITE ? r->size : MAX_WRITE;

		*data = zeros;
		return n;
	}
	case FUSE_FLUSH:
	case FUSE_RELEASE:
		return 0;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return 1l << 30;
	default:
		return -ENOSYS;
	}
}

static void *dev_loop(void *arg)
{
	struct srv *s = arg;
	size_t cap = MAX_WRITE + 4096;
	char *buf = malloc(cap), out[256];

	for (;;) {
		ssize_t n = read(s->fd, buf, cap);
		const struct fuse_in_header *in = (const void *)buf;
		const void *data;
		struct fuse_out_header oh;
		struct iovec iov[2];
		long len;

		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOENT))
			continue;
		if (n < (ssize_t)sizeof(*in))
			break; /* ENODEV: unmounted */
		len = handle(in, buf + sizeof(*in), buf + sizeof(*in), out, &data);
		if (len == 1l << 30)
			continue;
		oh.unique = in->unique;
		oh.error = len < 0 ? (int32_t)len : 0;
		iov[0] = (struct iovec){ &oh, sizeof(oh) };
		iov[1] = (struct iovec){ data ? (void *)data : out, len > 0 ? (size_t)len : 0 };
		oh.len = (uint32_t)(sizeof(oh) + iov[1].iov_len);
		if (writev(s->fd, iov, 2) < 0 && errno == ENODEV)
			break;
	}
	free(buf);
	return NULL;
}

static int ring_setup(struct queue *q, unsigned entries)
{
	struct io_uring_params p;
	size_t sq_sz, cq_sz;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
	p.cq_entries = entries * 2;
	q->rfd = (int)syscall(__NR_io_uring_setup, entries, &p);
	if (q->rfd < 0)
		return -errno;
	sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		sq_sz = cq_sz = sq_sz > cq_sz ? sq_sz : cq_sz;
	sq = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, q->rfd, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		return -errno;
	cq = (p.features & IORING_FEAT_SINGLE_MMAP)
		     ? sq
		     : mmap(NULL, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, q->rfd,
			    IORING_OFF_CQ_RING);
	if (cq == MAP_FAILED)
		return -errno;
	q->sqes = mmap(NULL, p.sq_entries * 128u, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, q->rfd,
		       IORING_OFF_SQES);
	if (q->sqes == MAP_FAILED)
		return -errno;
	q->sq_head = (unsigned *)(sq + p.sq_off.head);
	q->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	q->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	q->sq_array = (unsigned *)(sq + p.sq_off.array);
	q->cq_head = (unsigned *)(cq + p.cq_off.head);
	q->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	q->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	q->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
}

/* Queues a REGISTER or COMMIT_AND_FETCH of entry e (submitted by the next
 * io_uring_enter). */
static void ring_cmd(struct queue *q, struct ent *e, uint32_t op, uint64_t commit_id)
{
	unsigned tail = *q->sq_tail, idx = tail & *q->sq_mask;
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)(q->sqes + (size_t)idx * 128u);
	struct rtt_cmd_req *cmd = (struct rtt_cmd_req *)sqe->cmd;

	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->srv->fd;
	sqe->cmd_op = op;
	sqe->user_data = (uint64_t)(uintptr_t)e;
	if (op == RTT_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	}
	cmd->qid = (uint16_t)q->qid;
	cmd->commit_id = commit_id;
	q->sq_array[idx] = idx;
	atomic_store_explicit((_Atomic unsigned *)q->sq_tail, tail + 1, memory_order_release);
	q->to_submit++;
}

static void *queue_loop(void *arg)
{
	struct queue *q = arg;
	cpu_set_t set;
	int rc;

	CPU_ZERO(&set);
	CPU_SET(q->qid, &set);
	if (q->srv->pin)
		sched_setaffinity(0, sizeof(set), &set);
	rc = ring_setup(q, DEPTH);
	if (rc < 0) {
		fprintf(stderr, "fuse_rtt: io_uring_setup: %s\n", strerror(-rc));
		q->failed = 1;
		return NULL;
	}
	for (int i = 0; i < DEPTH; i++) {
		struct ent *e = &q->ent[i];

		e->h = aligned_alloc(4096, 4096);
		e->payload = aligned_alloc(4096, MAX_WRITE);
		memset(e->h, 0, 4096);
		memset(e->payload, 0, MAX_WRITE);
		e->iov[0] = (struct iovec){ e->h, sizeof(*e->h) };
		e->iov[1] = (struct iovec){ e->payload, MAX_WRITE };
		ring_cmd(q, e, RTT_CMD_REGISTER, 0);
	}
	for (;;) {
		unsigned head, tail;

		rc = (int)syscall(__NR_io_uring_enter, q->rfd, q->to_submit, 1, IORING_ENTER_GETEVENTS, NULL, 0);
		if (rc < 0 && errno != EINTR) {
			fprintf(stderr, "fuse_rtt: io_uring_enter: %s\n", strerror(errno));
			break;
		}
		if (rc >= 0)
			q->to_submit -= (unsigned)rc < q->to_submit ? (unsigned)rc : q->to_submit;
		head = *q->cq_head;
		tail = atomic_load_explicit((_Atomic unsigned *)q->cq_tail, memory_order_acquire);
		for (; head != tail; head++) {
			struct io_uring_cqe *c = &q->cqes[head & *q->cq_mask];
			struct ent *e = (struct ent *)(uintptr_t)c->user_data;
			const struct fuse_in_header *in = (const void *)e->h->in_out;
			struct fuse_out_header *oh = (void *)e->h->in_out;
			uint64_t commit_id = e->h->ring_ent_in_out.commit_id;
			char out[256];
			const void *data;
			long len;

			if (c->res < 0) {
				if (c->res != -ENOTCONN && c->res != -ENODEV)
					fprintf(stderr, "fuse_rtt: ring entry: %s\n", strerror(-c->res));
				q->failed = c->res != -ENOTCONN && c->res != -ENODEV;
				atomic_store_explicit((_Atomic unsigned *)q->cq_head, head + 1,
						      memory_order_release);
				goto out;
			}
			len = handle(in, e->h->op_in, e->payload, out, &data);
			if (len > 0 && !data)
				memcpy(e->payload, out, (size_t)len);
			oh->unique = in->unique;
			oh->error = len < 0 ? (int32_t)len : 0;
			oh->len = 0;
			e->h->ring_ent_in_out.payload_sz = len > 0 ? (uint32_t)len : 0;
			ring_cmd(q, e, RTT_CMD_COMMIT_AND_FETCH, commit_id);
		}
		atomic_store_explicit((_Atomic unsigned *)q->cq_head, head, memory_order_release);
	}
out:
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Mounts at mnt, answers INIT, starts the server threads. */
static int srv_start(struct srv *s, const char *mnt, int uring, int pin)
{
	char opts[128], buf[MAX_WRITE + 4096];
	struct fuse_in_header *in = (void *)buf;
	struct fuse_init_in *ii = (void *)(in + 1);
	struct {
		struct fuse_out_header h;
		struct fuse_init_out o;
	} rep;
	ssize_t n;

	memset(s, 0, sizeof(*s));
	s->uring = uring;
	s->pin = pin;
	s->fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", s->fd);
	if (mount("fuse_rtt", mnt, "fuse.fuse_rtt", MS_NOSUID | MS_NODEV, opts) < 0)
		return -errno;
	n = read(s->fd, buf, sizeof(buf));
	if (n < (ssize_t)sizeof(*in) || in->opcode != FUSE_INIT)
		return -EPROTO;
	memset(&rep, 0, sizeof(rep));
	rep.h.len = sizeof(rep);
	rep.h.unique = in->unique;
	rep.o.major = FUSE_KERNEL_VERSION;
	rep.o.minor = ii->minor;
	rep.o.max_readahead = ii->max_readahead;
	rep.o.flags = ii->flags & (FUSE_ASYNC_READ | FUSE_MAX_PAGES | FUSE_INIT_EXT);
	if (uring) {
		if (!(ii->flags & FUSE_INIT_EXT) || !(ii->flags2 & RTT_FUSE_OVER_IO_URING2))
			return -EOPNOTSUPP;
		rep.o.flags |= FUSE_INIT_EXT;
		rep.o.flags2 = RTT_FUSE_OVER_IO_URING2;
	}
	rep.o.max_background = 16;
	rep.o.congestion_threshold = 12;
	rep.o.max_write = MAX_WRITE;
	rep.o.time_gran = 1;
	rep.o.max_pages = MAX_PAGES;
	if (write(s->fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		return -errno;
	/* /dev/fuse serves what comes before the ring is ready, and what
	 * never goes through it (forgets, interrupts). */
	pthread_create(&s->dev, NULL, dev_loop, s);
	if (uring) {
		s->nq = (int)sysconf(_SC_NPROCESSORS_CONF);
		s->q = calloc((size_t)s->nq, sizeof(*s->q));
		for (int i = 0; i < s->nq; i++) {
			s->q[i].srv = s;
			s->q[i].qid = i;
			pthread_create(&s->q[i].thr, NULL, queue_loop, &s->q[i]);
		}
	}
	return 0;
}

static int srv_stop(struct srv *s, const char *mnt)
{
	int failed = 0;

	umount2(mnt, MNT_DETACH);
	pthread_join(s->dev, NULL);
	for (int i = 0; i < s->nq; i++) {
		pthread_join(s->q[i].thr, NULL);
		failed |= s->q[i].failed;
		if (s->q[i].rfd > 0)
			close(s->q[i].rfd);
		for (int j = 0; j < DEPTH; j++) {
			free(s->q[i].ent[j].h);
			free(s->q[i].ent[j].payload);
		}
	}
	free(s->q);
	close(s->fd);
	return failed;
}

/* Microseconds per pread of size bytes through a fresh mount served one
 * way, or -1. */
static double time_calls(const char *mnt, int uring, int pin, long calls, size_t size)
{
	char path[512], *buf = malloc(size);
	struct srv s;
	double t0, t1 = 0;
	int fd, rc;

	rc = srv_start(&s, mnt, uring, pin);
	if (rc < 0) {
		fprintf(stderr, "fuse_rtt: %s mount: %s\n", uring ? "uring" : "dev", strerror(-rc));
		exit(77);
	}
	snprintf(path, sizeof(path), "%s/f", mnt);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		for (long i = 0; i < calls / 10 + 100; i++) /* the ring registers meanwhile */
			if (pread(fd, buf, size, 0) != (ssize_t)size)
				break;
		t0 = now();
		for (long i = 0; i < calls; i++)
			if (pread(fd, buf, size, (off_t)(i % 1024) * (off_t)size) != (ssize_t)size) {
				perror("fuse_rtt: pread");
				exit(1);
			}
		t1 = now() - t0;
		close(fd);
	} else {
		perror("fuse_rtt: open");
	}
	if (srv_stop(&s, mnt) || fd < 0)
		exit(1);
	free(buf);
	return t1 / (double)calls * 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long rounds = 7, calls = 20000;
	size_t size = 8;
	const char *mnt = NULL;
	char tmpl[] = "/tmp/fuse_rtt.XXXXXX";
	double *dev, *ur, *unp;
	FILE *f;
	int c = 'N';

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rounds"))
			rounds = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--calls"))
			calls = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--mnt"))
			mnt = argv[i + 1];
		else {
			fprintf(stderr, "usage: fuse_rtt [--rounds N] [--calls N] [--size BYTES] [--mnt DIR]\n");
			return 2;
		}
	}
	if (rounds < 1 || calls < 1 || size < 1 || size > MAX_WRITE) {
		fprintf(stderr, "fuse_rtt: --rounds, --calls >= 1, 1 <= --size <= %u\n", MAX_WRITE);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "fuse_rtt: needs root (mounts with mount(2))\n");
		return 77;
	}
	f = fopen("/sys/module/fuse/parameters/enable_uring", "r");
	if (f) {
		c = fgetc(f);
		fclose(f);
	}
	if (c != 'Y') {
		fprintf(stderr, "fuse_rtt: FUSE over io_uring is off here "
				"(/sys/module/fuse/parameters/enable_uring is not Y)\n");
		return 77;
	}
	if (!mnt && !(mnt = mkdtemp(tmpl))) {
		perror("fuse_rtt: mkdtemp");
		return 1;
	}
	dev = calloc((size_t)rounds, sizeof(double));
	ur = calloc((size_t)rounds, sizeof(double));
	unp = calloc((size_t)rounds, sizeof(double));
	for (long r = 0; r < rounds; r++) {
		/* Each way first in turn. */
		for (int k = 0; k < 3; k++) {
			int way = (int)((k + r) % 3);

			if (way == 0)
				dev[r] = time_calls(mnt, 0, 0, calls, size);
			else if (way == 1)
				ur[r] = time_calls(mnt, 1, 1, calls, size);
			else
				unp[r] = time_calls(mnt, 1, 0, calls, size);
		}
		printf("round %ld: /dev/fuse %.2f us, io_uring %.2f us (threads not pinned: %.2f us) "
		       "per %zu-byte READ\n", r + 1, dev[r], ur[r], unp[r], size);
	}
	qsort(dev, (size_t)rounds, sizeof(double), cmp_double);
	qsort(ur, (size_t)rounds, sizeof(double), cmp_double);
	qsort(unp, (size_t)rounds, sizeof(double), cmp_double);
	printf("median of %ld rounds of %ld calls: /dev/fuse %.2f us, io_uring %.2f us (ratio %.2fx), "
	       "not pinned %.2f us (ratio %.2fx)\n", rounds, calls, dev[rounds / 2], ur[rounds / 2],
	       dev[rounds / 2] / ur[rounds / 2], unp[rounds / 2], dev[rounds / 2] / unp[rounds / 2]);
	if (mnt == tmpl)
		rmdir(tmpl);
	free(dev);
	free(ur);
	free(unp);
	return 0;
}
