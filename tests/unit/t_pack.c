/* Pack files: records of every codec written and read back by offset and by
 * a scan, torn tails cut away on reopen (but never damage before the
 * durable end), bit flips anywhere caught as -EIO / -EINVAL, concurrent
 * appends, appends gathered into large blocks. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/pack.h"
#include "testutil.h"

#define NREC 12

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct rec {
	uint8_t *raw;
	size_t len;
	unsigned es;
	int ref;               /* index of the reference record, or -1 */
	uint64_t off;
	size_t hl;             /* header bytes */
	enum ck_codec codec;
};

static struct rec recs[NREC];
static struct ck_chunk_ctx *ctx;
static uint8_t *buf, *out;
static char dir[] = "/tmp/t_pack.XXXXXX";
static char path[64];

/* Records: an anchor of fp32-ish values, deltas against the previous one,
 * every element size, short and empty chunks, noise. */
static void make_records(void)
{
	static const unsigned sizes[] = { 4, 4, 4, 2, 8, 1, 4, 2, 4, 4, 1, 8 };
	static const size_t lens[] = { 300000, 300000, 300000, 4096, 8000, 5000, 0, 3, 17, 200000, 1, 64000 };

	for (int i = 0; i < NREC; i++) {
		struct rec *r = &recs[i];

		r->len = lens[i];
		r->es = sizes[i];
		r->ref = -1;
		r->raw = malloc(r->len + 1);
		SETUP(r->raw);
		for (size_t j = 0; j < r->len; j++)
			r->raw[j] = (uint8_t)(j % 4 == 3 ? 0x3c : j % 4 == 2 ? 0x80 + next() % 8 : next() % 32);
		if (i == 1 || i == 2) {      /* a small update of the previous version */
			r->ref = i - 1;
			memcpy(r->raw, recs[i - 1].raw, r->len);
			for (size_t j = 0; j < r->len; j += 4)
				r->raw[j] ^= (uint8_t)(next() % 4);
		}
		if (i == 9)
			for (size_t j = 0; j < r->len; j++)
				r->raw[j] = (uint8_t)next();
	}
}

static void write_all(struct ck_pack_writer *w)
{
	for (int i = 0; i < NREC; i++) {
		struct rec *r = &recs[i];
		const uint8_t *ref = r->ref >= 0 ? recs[r->ref].raw : NULL;
		struct ck_chunk_desc d;
		const uint8_t *p;

		SETUP(ck_chunk_encode(ctx, r->raw, r->len, r->es, ref, ref ? r->len : 0, &d, &p) == 0);
		r->codec = d.codec;
		r->hl = ck_pack_rec_header_len(&d);
		SETUP(ck_pack_append(w, &d, p, &r->off) == 0);
	}
}

/* Every record read by offset decodes to its bytes; 0, or how many failed. */
static int read_all(int fd, int expect_ok)
{
	int bad = 0;

	for (int i = 0; i < NREC; i++) {
		struct rec *r = &recs[i];
		const uint8_t *ref = r->ref >= 0 ? recs[r->ref].raw : NULL;
		struct ck_chunk_desc d;
		struct ck_error err = { "" };
		int rc = ck_pack_read_chunk(fd, r->off, ctx, buf, ref, ref ? r->len : 0, NULL, out, &d, &err);

		if (rc == 0) {
			CHECK(d.raw_len == r->len && memcmp(out, r->raw, r->len) == 0,
			      "record %d read back wrong bytes", i);
		} else {
			CHECK(rc == -EIO || rc == -EINVAL, "record %d: %d", i, rc);
			CHECK(strncmp(err.msg, "pack record at ", 15) == 0, "record %d: reason '%s'", i, err.msg);
			CHECK(!expect_ok, "record %d: %s", i, err.msg);
			bad++;
		}
	}
	return bad;
}

struct scan_state {
	int n;
	int order_ok;
};

static int on_record(void *cb, uint64_t off, const struct ck_chunk_desc *d, const uint8_t *payload)
{
	struct scan_state *s = cb;

	if (s->n >= NREC || recs[s->n].off != off || recs[s->n].len != d->raw_len ||
	    !ck_hash128_eq(d->raw_hash, ck_chunk_hash(recs[s->n].raw, recs[s->n].len)))
		s->order_ok = 0;
	s->n++;
	return 0;
}

static int open_ro(void)
{
	int fd = open(path, O_RDONLY);

	SETUP(fd >= 0);
	return fd;
}

static uint64_t file_size(void)
{
	struct stat st;

	SETUP(stat(path, &st) == 0);
	return (uint64_t)st.st_size;
}

static void test_write_read(void)
{
	struct ck_pack_writer *w;
	struct ck_pack_open_info info;
	struct ck_error err;
	struct scan_state s = { 0, 1 };
	uint64_t end;
	int fd, seen[CK_CODEC__COUNT] = { 0 };

	SETUP(ck_pack_writer_open(path, 0, &w, &info, &err) == 0);
	CHECK(info.created && info.end == CK_PACK_HEADER && info.records == 0, "new pack");
	write_all(w);
	CHECK(ck_pack_sync(w) == 0, "sync");
	CHECK(ck_pack_writer_end(w) == file_size(), "end %llu, size %llu",
	      (unsigned long long)ck_pack_writer_end(w), (unsigned long long)file_size());
	CHECK(ck_pack_writer_close(w) == 0, "close");
	for (int i = 0; i < NREC; i++)
		seen[recs[i].codec]++;
	for (int c = 0; c < CK_CODEC__LOSSLESS; c++)
		CHECK(!(CK_CODECS_DEFAULT & CK_CODEC_BIT(c)) || seen[c], "no %s record written", ck_codec_name(c));

	fd = open_ro();
	CHECK(ck_pack_check_header(fd, NULL, &err) == 0, "header: %s", err.msg);
	CHECK(read_all(fd, 1) == 0, "read back");
	CHECK(ck_pack_scan(fd, on_record, &s, &end, &err) == 0 && s.n == NREC && s.order_ok &&
	      end == file_size(), "scan: %d records, order %d", s.n, s.order_ok);
	/* Headers only: the same records, and from a record in the middle up to another. */
	s.n = 0;
	s.order_ok = 1;
	CHECK(ck_pack_scan_headers(fd, 0, UINT64_MAX, on_record, &s, &end, &err) == 0 && s.n == NREC &&
	      s.order_ok && end == file_size(), "header scan: %d records, order %d", s.n, s.order_ok);
	s.n = NREC / 3;
	s.order_ok = 1;
	CHECK(ck_pack_scan_headers(fd, recs[NREC / 3].off, recs[2 * NREC / 3].off, on_record, &s, &end, &err) == 0 &&
	      s.n == 2 * NREC / 3 && s.order_ok && end == recs[2 * NREC / 3].off,
	      "header scan of a range: up to record %d, order %d", s.n, s.order_ok);
	close(fd);

	SETUP(ck_pack_writer_open(path, file_size(), &w, &info, &err) == 0);
	CHECK(!info.created && info.records == NREC && info.dropped == 0 && info.end == file_size(),
	      "reopen: %llu records", (unsigned long long)info.records);
	ck_pack_writer_close(w);
}

static int pwrite_all(const uint8_t *bytes, size_t len)
{
	int fd = open(path, O_WRONLY);
	int ok = fd >= 0 && pwrite(fd, bytes, len, 0) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* Cuts at several points inside the last record, and garbage after it. */
static void test_torn_tail(void)
{
	uint64_t size = file_size(), last = recs[NREC - 1].off, hl = recs[NREC - 1].hl;
	uint8_t *copy;
	size_t len;
	uint64_t cuts[] = { last + 1, last + hl - 1, last + hl, last + hl + 1, size - 1 };
	struct ck_error err;

	copy = read_file(path, &len);
	SETUP(copy && len == size);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		struct ck_pack_writer *w;
		struct ck_pack_open_info info;
		struct ck_chunk_desc d;
		const uint8_t *p;
		uint64_t off;
		int fd;

		SETUP(truncate(path, (off_t)cuts[i]) == 0);
		/* a cut before what the index knows is durable is damage */
		CHECK(ck_pack_writer_open(path, size, &w, &info, &err) == -EIO && file_size() == cuts[i],
		      "cut at %llu with durable end %llu: opened", (unsigned long long)cuts[i],
		      (unsigned long long)size);
		CHECK(ck_pack_writer_open(path, last, &w, &info, &err) == 0, "cut at %llu: %s",
		      (unsigned long long)cuts[i], err.msg);
		CHECK(info.end == last && info.records == NREC - 1 && info.dropped == cuts[i] - last &&
		      file_size() == last, "cut at %llu: end %llu", (unsigned long long)cuts[i],
		      (unsigned long long)info.end);
		/* append the record again where it was */
		SETUP(ck_chunk_encode(ctx, recs[NREC - 1].raw, recs[NREC - 1].len, recs[NREC - 1].es,
				      NULL, 0, &d, &p) == 0);
		CHECK(ck_pack_append(w, &d, p, &off) == 0 && off == last, "append after a torn tail");
		ck_pack_writer_close(w);
		fd = open_ro();
		CHECK(read_all(fd, 1) == 0, "after a torn tail");
		close(fd);
	}

	/* a pack that ends cleanly, but before what the index knows is durable */
	{
		struct ck_pack_writer *w;

		SETUP(truncate(path, (off_t)last) == 0);
		CHECK(ck_pack_writer_open(path, size, &w, NULL, &err) == -EIO && strstr(err.msg, "durable end"),
		      "lost records at a record boundary: %s", err.msg);
		SETUP(truncate(path, (off_t)size) == 0);
		SETUP(pwrite_all(copy, len));
	}

	/* zeros after the last record (a crash after the size grew) */
	{
		struct ck_pack_writer *w;
		struct ck_pack_open_info info;

		SETUP(truncate(path, (off_t)(size + 4096)) == 0);
		CHECK(ck_pack_writer_open(path, size, &w, &info, &err) == 0 && info.dropped == 4096 &&
		      info.end == size && file_size() == size, "zeros after the end: %s", err.msg);
		ck_pack_writer_close(w);
	}
	free(copy);
}

/* Every bit of a sample flipped in turn: reads fail or give the right bytes. */
static void test_bit_flips(void)
{
	size_t len;
	uint8_t *orig = read_file(path, &len);
	int caught = 0;

	SETUP(orig);
	for (int t = 0; t < 400; t++) {
		/* half in record headers, half anywhere */
		struct rec *r = &recs[next() % NREC];
		size_t pos = t % 2 ? (size_t)(r->off + next() % r->hl) : (size_t)(next() % len);
		uint8_t bit = (uint8_t)(1u << (next() % 8));
		int fd = open(path, O_RDWR);

		SETUP(fd >= 0 && pos < len);
		orig[pos] ^= bit;
		SETUP(pwrite(fd, orig + pos, 1, (off_t)pos) == 1);
		caught += read_all(fd, 0) > 0 || (pos < CK_PACK_HEADER && ck_pack_check_header(fd, NULL, NULL) != 0);
		orig[pos] ^= bit;
		SETUP(pwrite(fd, orig + pos, 1, (off_t)pos) == 1);
		close(fd);
	}
	CHECK(caught == 400, "%d of 400 flips caught", caught);
	free(orig);
}

/* A crash right after creating a pack leaves it shorter than its header. */
static void test_empty_file(void)
{
	char p2[80];
	struct ck_pack_writer *w;
	struct ck_pack_open_info info;
	struct ck_error err;
	int fd;

	snprintf(p2, sizeof(p2), "%s/empty.pack", dir);
	fd = open(p2, O_RDWR | O_CREAT | O_TRUNC, 0644);
	SETUP(fd >= 0 && write(fd, "ckpt", 4) == 4);
	close(fd);
	CHECK(ck_pack_writer_open(p2, 100, &w, &info, &err) == -EIO, "short pack with a durable end opened");
	CHECK(ck_pack_writer_open(p2, 0, &w, &info, &err) == 0 && info.created && info.end == CK_PACK_HEADER,
	      "short pack not started again: %s", err.msg);
	ck_pack_writer_close(w);
	fd = open(p2, O_RDONLY);
	SETUP(fd >= 0);
	CHECK(ck_pack_check_header(fd, NULL, &err) == 0, "restarted header: %s", err.msg);
	close(fd);
	unlink(p2);
}

static void test_not_a_pack(void)
{
	char other[80];
	struct ck_pack_writer *w = NULL;
	struct ck_error err;
	int fd;

	snprintf(other, sizeof(other), "%s/other", dir);
	fd = open(other, O_RDWR | O_CREAT | O_TRUNC, 0644);
	SETUP(fd >= 0 && write(fd, "PK\3\4 not a pack at all", 23) == 23);
	CHECK(ck_pack_check_header(fd, NULL, &err) == -EINVAL && strstr(err.msg, "magic"), "magic: %s", err.msg);
	CHECK(ck_pack_writer_open(other, 0, &w, NULL, &err) == -EINVAL && !w, "opened a non-pack");
	SETUP(ftruncate(fd, 5) == 0);
	CHECK(ck_pack_check_header(fd, NULL, &err) == -EIO, "short header");
	close(fd);
	unlink(other);
}

struct appender {
	struct ck_pack_writer *w;
	uint64_t offs[50];
	int rc;
};

static void *append_many(void *arg)
{
	struct appender *a = arg;
	struct ck_chunk_ctx *c;
	uint8_t data[1000];

	a->rc = ck_chunk_ctx_new(NULL, &c);
	for (int i = 0; i < 50 && !a->rc; i++) {
		struct ck_chunk_desc d;
		const uint8_t *p;

		memset(data, i, sizeof(data));
		a->rc = ck_chunk_encode(c, data, sizeof(data), 4, NULL, 0, &d, &p);
		if (!a->rc)
			a->rc = ck_pack_append(a->w, &d, p, &a->offs[i]);
	}
	ck_chunk_ctx_free(c);
	return NULL;
}

static int count_only(void *cb, uint64_t off, const struct ck_chunk_desc *d, const uint8_t *payload)
{
	(*(int *)cb)++;
	return 0;
}

static void test_threads(void)
{
	char p2[80];
	struct appender a[2];
	pthread_t t[2];
	struct ck_error err;
	uint64_t end;
	int n = 0, fd;

	snprintf(p2, sizeof(p2), "%s/threads.pack", dir);
	SETUP(ck_pack_writer_open(p2, 0, &a[0].w, NULL, &err) == 0);
	a[1].w = a[0].w;
	for (int i = 0; i < 2; i++)
		SETUP(pthread_create(&t[i], NULL, append_many, &a[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(a[0].rc == 0 && a[1].rc == 0, "appends: %d %d", a[0].rc, a[1].rc);
	ck_pack_writer_close(a[0].w);
	fd = open(p2, O_RDONLY);
	SETUP(fd >= 0);
	CHECK(ck_pack_scan(fd, count_only, &n, &end, &err) == 0 && n == 100, "scan after threads: %d", n);
	close(fd);
	unlink(p2);
}

/* Raw records of incompressible bytes: a record's size is what it takes
 * on disk, so that the writer's 8 MiB block buffer fills. */
static void append_noise(struct ck_pack_writer *w, size_t len, uint8_t seed, uint64_t *off)
{
	struct ck_chunk_desc d;
	const uint8_t *p;
	uint8_t *raw = malloc(len);

	SETUP(raw);
	for (size_t j = 0; j < len; j++)
		raw[j] = (uint8_t)(next() ^ seed);
	SETUP(ck_chunk_encode(ctx, raw, len, 1, NULL, 0, &d, &p) == 0 && d.codec == CK_CODEC_RAW);
	SETUP(ck_pack_append(w, &d, p, off) == 0);
	free(raw);
}

/* Each record at offs[0..n) scans back as the chunk of the seed it was
 * made from: its hash is checked by the read, its first byte here. */
static int readable(const char *p, const uint64_t *offs, int n)
{
	int fd = open(p, O_RDONLY), good = 0;

	SETUP(fd >= 0);
	for (int i = 0; i < n; i++) {
		struct ck_chunk_desc d;
		struct ck_error err;

		good += ck_pack_read_chunk(fd, offs[i], ctx, buf, NULL, 0, NULL, out, &d, &err) == 0;
	}
	close(fd);
	return good;
}

/* Appends wait in the writer's memory and reach the file in large blocks
 * (O_DIRECT where the filesystem allows): a flush makes them readable
 * mid-way, a record straddling blocks survives, and a pack reopened with a
 * partial last block goes on appending after it. */
static void test_blocks(void)
{
	enum { N = 24 };
	char p2[80];
	struct ck_pack_writer *w;
	struct ck_pack_open_info info;
	struct ck_error err;
	uint64_t offs[N], end;
	int n = 0, fd;

	snprintf(p2, sizeof(p2), "%s/blocks.pack", dir);
	SETUP(ck_pack_writer_open(p2, 0, &w, NULL, &err) == 0);
	for (int i = 0; i < 10; i++)   /* 10 x 999,983 bytes: past one 8 MiB block */
		append_noise(w, 999983, (uint8_t)i, &offs[i]);
	CHECK(ck_pack_flush(w) == 0, "flush");
	CHECK(readable(p2, offs, 10) == 10, "records readable after a flush");
	append_noise(w, 77, 10, &offs[10]);
	append_noise(w, 4093, 11, &offs[11]);
	CHECK(ck_pack_sync(w) == 0, "sync");
	end = ck_pack_writer_end(w);
	CHECK(end % 4096 != 0, "the test wants a partial last block (end %llu)", (unsigned long long)end);
	CHECK(ck_pack_writer_close(w) == 0, "close");
	CHECK(readable(p2, offs, 12) == 12, "records readable after sync and close");

	SETUP(ck_pack_writer_open(p2, end, &w, &info, &err) == 0);
	CHECK(info.end == end && info.records == 12, "reopen: end %llu, %llu records",
	      (unsigned long long)info.end, (unsigned long long)info.records);
	for (int i = 12; i < N; i++)
		append_noise(w, i % 2 ? 1000003 : 513, (uint8_t)i, &offs[i]);
	CHECK(offs[12] == end, "the first append after a reopen goes at the end");
	CHECK(ck_pack_writer_close(w) == 0, "close after appending");
	CHECK(readable(p2, offs, N) == N, "every record readable after the reopen's appends");
	fd = open(p2, O_RDONLY);
	SETUP(fd >= 0);
	CHECK(ck_pack_scan(fd, count_only, &n, &end, &err) == 0 && n == N && end == (uint64_t)lseek(fd, 0, SEEK_END),
	      "scan: %d records", n);
	close(fd);
	unlink(p2);
}

/* A pack written by version 2 of the format (tests/unit/data/pack-v2.ckpack,
 * written with the encoder of 2026-11 before version 3: every codec, every
 * element size, a tail byte, stored, zstd and sparse planes): every
 * record reads and decodes (hashes checked), and copied into a new pack as
 * gc copies records, each keeps its payload and reads back the same. */
struct v2_state {
	int fd, n, bad, codecs;
	struct ck_pack_writer *w;
	uint8_t *raw[16];
	struct ck_hash128 hash[16];
	uint32_t len[16];
	uint64_t off[16], new_off[16];
	struct ck_chunk_desc desc[16];
};

static const uint8_t *v2_ref(struct v2_state *v, struct ck_hash128 h)
{
	for (int i = 0; i < v->n; i++)
		if (ck_hash128_eq(v->hash[i], h))
			return v->raw[i];
	return NULL;
}

static int on_v2_record(void *cb, uint64_t off, const struct ck_chunk_desc *d, const uint8_t *payload)
{
	struct v2_state *v = cb;
	const uint8_t *ref = ck_codec_needs_ref(d->codec) ? v2_ref(v, d->ref_hash) : NULL;
	struct ck_error err = { "" };
	int i = v->n;

	if (i >= 16 || d->compact || (ck_codec_needs_ref(d->codec) && !ref)) {
		v->bad++;
		return 0;
	}
	v->raw[i] = malloc(d->raw_len + 1);
	SETUP(v->raw[i]);
	if (ck_chunk_decode(ctx, d, payload, ref, ref ? d->raw_len : 0, v->raw[i], &err) != 0) {
		fprintf(stderr, "v2 record %d: %s\n", i, err.msg);
		v->bad++;
	}
	v->hash[i] = d->raw_hash;
	v->len[i] = d->raw_len;
	v->desc[i] = *d;
	v->off[i] = off;
	v->codecs |= 1 << d->codec;
	if (ck_pack_append(v->w, d, payload, &v->new_off[i]) != 0)
		v->bad++;
	v->n++;
	return 0;
}

static void test_version2_pack(void)
{
	const char *src = getenv("CKPT_SRCDIR");
	char v2[1024], copy[96];
	struct v2_state v = { .fd = -1 };
	struct ck_error err = { "" };
	uint32_t version = 0;
	uint64_t end, v2_size, v3_size;
	struct stat sb;
	int fd, sparse = 0;

	snprintf(v2, sizeof(v2), "%s/tests/unit/data/pack-v2.ckpack", src ? src : ".");
	snprintf(copy, sizeof(copy), "%s/v3.pack", dir);
	fd = open(v2, O_RDONLY);
	SETUP(fd >= 0 && fstat(fd, &sb) == 0);
	v2_size = (uint64_t)sb.st_size;
	CHECK(ck_pack_check_header(fd, &version, &err) == 0 && version == 2, "v2 header: %s", err.msg);
	SETUP(ck_pack_writer_open(copy, 0, &v.w, NULL, &err) == 0);
	CHECK(ck_pack_scan(fd, on_v2_record, &v, &end, &err) == 0 && end == v2_size, "v2 scan: %s", err.msg);
	CHECK(v.n == 11 && v.bad == 0, "v2 pack: %d records, %d bad", v.n, v.bad);
	CHECK(v.codecs == CK_CODECS_ALL, "v2 pack: codecs 0x%x", v.codecs);
	/* the sparse record: every plane sparse (mode 2) in its framed directory */
	for (int i = 0; i < v.n; i++) {
		uint8_t ent[5];

		if (v.desc[i].raw_len != 80000)
			continue;
		SETUP(pread(fd, ent, 5, (off_t)(v.off[i] + CK_PACK_REC_HEADER_V2)) == 5);
		sparse = ent[0] == 2;
	}
	CHECK(sparse, "v2 pack: no sparse record");
	CHECK(ck_pack_writer_close(v.w) == 0, "close the copy");
	close(fd);

	fd = open(copy, O_RDONLY);
	SETUP(fd >= 0 && fstat(fd, &sb) == 0);
	v3_size = (uint64_t)sb.st_size;
	CHECK(ck_pack_check_header(fd, &version, &err) == 0 && version == CK_PACK_VERSION, "copy's header");
	for (int i = 0; i < v.n; i++) {
		struct ck_chunk_desc d;
		const uint8_t *ref = ck_codec_needs_ref(v.desc[i].codec) ? v2_ref(&v, v.desc[i].ref_hash) : NULL;
		int rc = ck_pack_read_chunk(fd, v.new_off[i], ctx, buf, ref, ref ? v.len[i] : 0, NULL, out, &d, &err);

		CHECK(rc == 0 && !d.compact && d.codec == v.desc[i].codec && d.enc_len == v.desc[i].enc_len &&
		      memcmp(out, v.raw[i], v.len[i]) == 0, "copied v2 record %d: %s", i, err.msg);
	}
	/* same payloads, headers of 52 bytes now 22 to 46 */
	CHECK(v3_size < v2_size - (uint64_t)v.n * 6, "copy %llu bytes, v2 %llu", (unsigned long long)v3_size,
	      (unsigned long long)v2_size);
	close(fd);
	unlink(copy);
	for (int i = 0; i < v.n; i++)
		free(v.raw[i]);
}

/* Compact headers are as long as docs/format.md says. */
static void test_header_lengths(void)
{
	struct ck_chunk_desc d = { .codec = CK_CODEC_ROT, .elem_size = 4, .raw_len = CK_CHUNK_MAX, .enc_len = 900000 };
	uint8_t hdr[CK_PACK_REC_HEADER_MAX], payload[1] = { 0 };
	struct ck_chunk_desc back;
	struct ck_error err = { "" };

	CHECK(ck_pack_rec_header_len(&d) == 2 + 3 + 16 + 4, "full anchor: %zu", ck_pack_rec_header_len(&d));
	d.codec = CK_CODEC_SUB;
	d.ref_hash.lo = 7;
	CHECK(ck_pack_rec_header_len(&d) == 2 + 3 + 32 + 4, "full delta: %zu", ck_pack_rec_header_len(&d));
	d = (struct ck_chunk_desc){ .codec = CK_CODEC_RAW, .elem_size = 1, .raw_len = 100, .enc_len = 100 };
	CHECK(ck_pack_rec_header_len(&d) == 2 + 1 + 16 + 4, "small raw: %zu", ck_pack_rec_header_len(&d));
	d = (struct ck_chunk_desc){ .codec = CK_CODEC_PLANES, .elem_size = 8, .raw_len = 200, .enc_len = 1,
				    .compact = 1 };
	d.raw_hash.hi = 0x0123456789abcdefull;
	CHECK(ck_pack_rec_header(&d, payload, hdr) == 2 + 2 + 1 + 16 + 4, "written length");
	CHECK(ck_pack_rec_parse(hdr, sizeof(hdr), &back, &err) == 25 && back.codec == d.codec &&
	      back.elem_size == 8 && back.raw_len == 200 && back.enc_len == 1 && back.compact &&
	      ck_hash128_eq(back.raw_hash, d.raw_hash), "parsed back: %s", err.msg);
	CHECK(ck_pack_rec_parse(hdr, 24, &back, &err) == -EIO, "cut short");
	hdr[3] = 0x81;   /* raw length 200 as an overlong varint: 0xc8 0x81 0x00 */
	hdr[4] = 0x00;
	CHECK(ck_pack_rec_parse(hdr, sizeof(hdr), &back, &err) == -EINVAL, "varint: %s", err.msg);
}

int main(void)
{
	SETUP(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a.pack", dir);
	buf = malloc(CK_CHUNK_MAX);
	out = malloc(CK_CHUNK_MAX);
	SETUP(buf && out && ck_chunk_ctx_new(NULL, &ctx) == 0);
	make_records();
	test_write_read();
	test_torn_tail();
	test_bit_flips();
	test_not_a_pack();
	test_empty_file();
	test_threads();
	test_blocks();
	test_version2_pack();
	test_header_lengths();
	unlink(path);
	rmdir(dir);
	for (int i = 0; i < NREC; i++)
		free(recs[i].raw);
	ck_chunk_ctx_free(ctx);
	free(buf);
	free(out);
	return test_result();
}
