/* torch.save container: every zip fixture written by real torch 2.x is read,
 * its CRCs verified, and rebuilt by tz_write byte for byte; legacy and broken
 * files are told apart; malformed archives fail with a precise reason;
 * 10,000 records are read with a handful of preads. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"
#include "testutil.h"

/* A file in memory behind the pread callback, counting the reads and the
 * bytes read. */
struct memfile {
	const uint8_t *data;
	size_t len;
	int reads;
	uint64_t bytes;
};

static int mem_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct memfile *m = ctx;

	m->reads++;
	m->bytes += len;
	if (off > m->len || len > m->len - off)
		return -EIO;
	memcpy(buf, m->data + off, len);
	return 0;
}

/* tz_write into memory; record data comes from src (an archive) at the
 * entries' offsets, or is a repeating pattern when src is NULL. */
struct membuild {
	struct ck_buf out;
	const uint8_t *src;
	const struct tz_archive *ar;
	int misplaced;           /* a record's data did not land at the reader's data_offset */
};

static int mem_emit(void *ctx, long record, const void *bytes, uint64_t len)
{
	struct membuild *b = ctx;

	if (record < 0)
		return ck_buf_put(&b->out, bytes, len);
	if (b->ar && b->ar->entries[record].data_offset != b->out.len)
		b->misplaced = 1;
	if (b->src)
		return ck_buf_put(&b->out, b->src + b->ar->entries[record].data_offset, len);
	for (uint64_t i = 0; i < len; i++)
		if (ck_buf_putc(&b->out, (uint8_t)(record * 7 + i)))
			return -ENOMEM;
	return 0;
}

static void pattern_crcs(struct tz_record *recs, size_t n)
{
	for (size_t r = 0; r < n; r++) {
		uint32_t crc = 0;

		for (uint64_t i = 0; i < recs[r].size; i++) {
			uint8_t c = (uint8_t)(r * 7 + i);

			crc = ck_crc32(crc, &c, 1);
		}
		recs[r].crc32 = crc;
	}
}

static int read_mem_counted(const uint8_t *data, size_t len, struct tz_archive *ar, struct ck_error *err,
			    int *reads, uint64_t *bytes)
{
	struct memfile m = { data, len, 0, 0 };
	int rc = tz_read(mem_pread, &m, len, ar, err);

	if (reads)
		*reads = m.reads;
	if (bytes)
		*bytes = m.bytes;
	return rc;
}

static int read_mem(const uint8_t *data, size_t len, struct tz_archive *ar, struct ck_error *err, int *reads)
{
	return read_mem_counted(data, len, ar, err, reads, NULL);
}

/* Reads one fixture, checks it, rebuilds it and compares. */
static void fixture_roundtrip(const char *path, const char *name, const uint8_t *file, size_t size)
{
	struct tz_archive ar;
	struct ck_error err = { "" };
	struct membuild b = { CK_BUF_INIT, file, &ar, 0 };
	struct tz_record *recs;
	int reads = 0;

	if (read_mem(file, size, &ar, &err, &reads)) {
		CHECK(0, "%s: %s", name, err.msg);
		return;
	}
	/* tail, central directory, local headers: one batch, and one more
	 * after each record too large to read past (BATCH_GAP_MAX, 32 KiB) */
	{
		int big = 0;

		for (size_t i = 0; i < ar.n; i++)
			big += ar.entries[i].csize > (32u << 10);
		CHECK(reads <= 4 + big, "%s: %d reads, %d large records", name, reads, big);
	}
	CHECK(ar.root && *ar.root && ar.n >= 2 && ar.file_size == size, "%s: root/entries", name);
	CHECK(tz_find(&ar, "data.pkl") != NULL && tz_find(&ar, "version") != NULL, "%s: data.pkl/version missing", name);
	CHECK(tz_find(&ar, "no/such") == NULL, "%s: found a record that is not there", name);
	recs = calloc(ar.n, sizeof(*recs));
	if (!recs)
		goto out;
	for (size_t i = 0; i < ar.n; i++) {
		const struct tz_entry *e = &ar.entries[i];

		CHECK(tz_find(&ar, e->name) == e, "%s: tz_find(%s)", name, e->name);
		CHECK(e->method == 0 && e->csize == e->size && e->data_offset % 64 == 0,
		      "%s: %s: method %u, offset %llu", name, e->name, e->method, (unsigned long long)e->data_offset);
		CHECK(ck_crc32(0, file + e->data_offset, e->size) == e->crc32, "%s: %s: CRC mismatch", name, e->name);
		recs[i].name = e->name;
		recs[i].size = e->size;
		recs[i].crc32 = e->crc32;
	}
	CHECK(!tz_write(ar.root, recs, ar.n, 64, mem_emit, &b), "%s: tz_write failed", name);
	CHECK(!b.misplaced, "%s: data placed at other offsets than the original", name);
	CHECK(b.out.len == size && !memcmp(b.out.data, file, size), "%s: rebuilt file differs (%zu vs %zu bytes)",
	      path, b.out.len, size);
	free(recs);
out:
	ck_buf_free(&b.out);
	tz_archive_free(&ar);
}

static void fixtures(void)
{
	const char *fixtures = test_fixtures();
	char dir[4096], path[4352];
	int zips = 0, legacy = 0, other = 0;
	struct dirent *de;
	DIR *d;

	if (!fixtures) {
		test_skip("CKPT_FIXTURES unset: no fixtures");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/torch2x", fixtures);
	d = opendir(dir);
	CHECK(d != NULL, "cannot open %s", dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t size = 0;
		uint8_t *file;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		file = read_file(path, &size);
		if (!file)
			continue;
		CHECK(!(tz_is_zip(file, size) && tz_is_legacy_torch(file, size)), "%s: both zip and legacy", de->d_name);
		if (tz_is_zip(file, size)) {
			zips++;
			fixture_roundtrip(path, de->d_name, file, size);
		} else if (tz_is_legacy_torch(file, size)) {
			legacy++;
			CHECK(strstr(de->d_name, "legacy") != NULL, "%s taken for legacy", de->d_name);
		} else {
			struct tz_archive ar;
			struct ck_error err = { "" };

			other++;
			CHECK(!strcmp(de->d_name, "burn_reader_broken.pt"), "%s: neither zip nor legacy", de->d_name);
			CHECK(read_mem(file, size, &ar, &err, NULL) == -EINVAL && err.msg[0], "%s: read as a zip", de->d_name);
		}
		free(file);
	}
	closedir(d);
	printf("fixtures: %d zip archives rebuilt, %d legacy, %d other\n", zips, legacy, other);
	CHECK(zips >= 50 && legacy == 4 && other == 1, "fixture census: %d zip, %d legacy, %d other", zips, legacy, other);
}

static void legacy_magic(void)
{
	uint8_t p2[] = { 0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e };
	uint8_t p4[] = { 0x80, 0x04, 0x95, 0x0f, 0, 0, 0, 0, 0, 0, 0,
			 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e };
	uint8_t tar[512] = { 0 };

	CHECK(tz_is_legacy_torch(p2, sizeof(p2)), "protocol 2 magic");
	CHECK(tz_is_legacy_torch(p4, sizeof(p4)), "protocol 4 magic behind a FRAME");
	CHECK(!tz_is_legacy_torch(p2, 10), "truncated magic");
	p2[13] ^= 1;
	CHECK(!tz_is_legacy_torch(p2, sizeof(p2)), "wrong magic");
	memcpy(tar + 257, "ustar\0" "00", 8);
	CHECK(tz_is_legacy_torch(tar, sizeof(tar)), "tar");
	CHECK(!tz_is_legacy_torch(tar, 261), "short tar header");
	CHECK(tz_is_zip((const uint8_t *)"PK\3\4", 4) && !tz_is_zip((const uint8_t *)"PK\5\6", 4) &&
	      !tz_is_zip((const uint8_t *)"PK", 2), "tz_is_zip");
}

/* A small archive made by tz_write, to corrupt. */
static const struct tz_record small_recs[] = {
	{ "data.pkl", 10, 0 }, { "data/0", 100, 0 }, { "data/1", 5, 0 }, { "empty", 0, 0 }, { "version", 2, 0 },
};
#define SMALL_N (sizeof(small_recs) / sizeof(small_recs[0]))

static struct ck_buf make_small(void)
{
	struct tz_record recs[SMALL_N];
	struct membuild b = { CK_BUF_INIT, NULL, NULL, 0 };

	memcpy(recs, small_recs, sizeof(recs));
	pattern_crcs(recs, SMALL_N);
	CHECK(!tz_write("archive", recs, SMALL_N, 64, mem_emit, &b), "tz_write(small)");
	return b.out;
}

static size_t find_sig(const struct ck_buf *b, const char *sig, int nth)
{
	for (size_t i = 0; i + 4 <= b->len; i++)
		if (!memcmp(b->data + i, sig, 4) && nth-- == 0)
			return i;
	return SIZE_MAX;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

enum mutation {
	M_NONE, M_TRUNCATE_TAIL, M_NO_EOCD, M_FIRST_NOT_IN_FOLDER, M_OTHER_ROOT, M_ENCRYPTED,
	M_STORED_SIZES, M_LOCAL_SIG, M_LHO_PAST_CD, M_DUPLICATE, M_DATA_INTO_CD, M_CD_OFFSET,
	M_TOO_MANY, M_DISKS, M_LOCAL_NAME, M_OVERLAP, M_EXTRA_OVERRUN, M_Z64_SHORT, M_CD_SIG,
	M_COMMENT_WITH_SIG, M_TRAILING_BYTES,
};

static const struct { enum mutation m; const char *why; } mutations[] = {
	{ M_NONE, NULL },
	{ M_TRUNCATE_TAIL, "no end of central directory" },
	{ M_NO_EOCD, "no end of central directory" },
	{ M_FIRST_NOT_IN_FOLDER, "not inside a folder" },
	{ M_OTHER_ROOT, "is not under 'archive/'" },
	{ M_ENCRYPTED, "encrypted" },
	{ M_STORED_SIZES, "stored entry with compressed size" },
	{ M_LOCAL_SIG, "bad signature for 'archive/data/0'" },
	{ M_LHO_PAST_CD, "not before the central directory" },
	{ M_DUPLICATE, "duplicate name 'archive/data/0'" },
	{ M_DATA_INTO_CD, "runs into the central directory" },
	{ M_CD_OFFSET, "central directory" },
	{ M_TOO_MANY, "cannot fit" },
	{ M_DISKS, "multi-disk" },
	{ M_LOCAL_NAME, "differs from the central directory" },
	{ M_OVERLAP, "overlaps" },
	{ M_EXTRA_OVERRUN, "extra field overruns" },
	{ M_Z64_SHORT, "zip64 extra field lacks" },
	{ M_CD_SIG, "bad signature (entry 2)" },
	/* still valid: */
	{ M_COMMENT_WITH_SIG, NULL },
	{ M_TRAILING_BYTES, NULL },
};

static void mutate(struct ck_buf *b, enum mutation m)
{
	size_t cd0 = find_sig(b, "PK\1\2", 0), cd1 = find_sig(b, "PK\1\2", 1), cd2 = find_sig(b, "PK\1\2", 2);
	size_t z64 = find_sig(b, "PK\6\6", 0), loc = find_sig(b, "PK\6\7", 0), eocd = find_sig(b, "PK\5\6", 0);
	size_t lh1 = find_sig(b, "PK\3\4", 1);

	switch (m) {
	case M_NONE:
		break;
	case M_TRUNCATE_TAIL:
		b->len -= 1;
		break;
	case M_NO_EOCD:
		b->data[eocd + 1] = 'X';
		break;
	case M_FIRST_NOT_IN_FOLDER:
		b->data[cd0 + 46 + 7] = '_';            /* "archive/data.pkl" -> "archive_data.pkl" */
		break;
	case M_OTHER_ROOT:
		b->data[cd1 + 46] = 'A';                /* "Archive/data/0" */
		break;
	case M_ENCRYPTED:
		b->data[cd1 + 8] |= 1;
		break;
	case M_STORED_SIZES:
		put32(b->data + cd1 + 20, 99);
		break;
	case M_LOCAL_SIG:
		b->data[lh1 + 2] = 9;
		break;
	case M_LHO_PAST_CD:
		put32(b->data + cd1 + 42, (uint32_t)cd0);
		break;
	case M_DUPLICATE:
		b->data[cd2 + 46 + 13] = '0';           /* "archive/data/1" -> ".../0" */
		b->data[find_sig(b, "PK\3\4", 2) + 30 + 13] = '0';
		break;
	case M_DATA_INTO_CD:
		put32(b->data + cd2 + 20, 500);         /* data/1: 5 -> 500 bytes */
		put32(b->data + cd2 + 24, 500);
		break;
	case M_CD_OFFSET:
		put64(b->data + z64 + 48, cd0 + 1);
		put32(b->data + eocd + 16, (uint32_t)cd0 + 1);
		break;
	case M_TOO_MANY:
		put64(b->data + z64 + 24, 1000);
		put64(b->data + z64 + 32, 1000);
		b->data[eocd + 8] = b->data[eocd + 10] = 0xe8;
		b->data[eocd + 9] = b->data[eocd + 11] = 0x03;
		break;
	case M_DISKS:
		put32(b->data + loc + 16, 2);
		break;
	case M_LOCAL_NAME:
		b->data[lh1 + 30 + 9] = 'D';            /* local "archive/Data/0" */
		break;
	case M_OVERLAP:
		put32(b->data + cd2 + 42, (uint32_t)lh1 + 64);  /* data/1's header inside data/0's data */
		memcpy(b->data + lh1 + 64, b->data + find_sig(b, "PK\3\4", 2), 30 + 14);
		b->data[lh1 + 64 + 28] = 0;             /* no extra: data right after the name */
		b->data[lh1 + 64 + 29] = 0;
		break;
	case M_EXTRA_OVERRUN:
		/* claim a 4-byte extra field in the CD entry: it would overlap the next header */
		b->data[cd1 + 30] = 4;
		b->data[cd1 + 46 + 14] = 0x99;
		b->data[cd1 + 46 + 15] = 0x99;
		b->data[cd1 + 46 + 16] = 0x10;          /* field length 16 > 0 bytes left */
		break;
	case M_Z64_SHORT:
		/* saturated size without a zip64 field carrying it: an empty zip64 field */
		put32(b->data + cd1 + 24, 0xffffffffu);
		b->data[cd1 + 30] = 4;
		b->data[cd1 + 46 + 14] = 1;
		b->data[cd1 + 46 + 15] = 0;
		b->data[cd1 + 46 + 16] = 0;
		b->data[cd1 + 46 + 17] = 0;
		break;
	case M_CD_SIG:
		b->data[cd2] = 'Q';
		break;
	case M_COMMENT_WITH_SIG: {
		/* A comment holding a whole (empty) EOCD record whose own comment
		 * length fits in the file too: only the real one ends the file. */
		static const char comment[] = "PK\5\6\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1\0tail!";

		b->data[eocd + 20] = sizeof(comment) - 1;
		ck_buf_put(b, comment, sizeof(comment) - 1);
		break;
	}
	case M_TRAILING_BYTES:
		ck_buf_puts(b, "garbage after the end");
		break;
	}
	(void)cd2;
}

static void malformed(void)
{
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
		struct ck_buf b = make_small();
		struct tz_archive ar;
		struct ck_error err = { "" };
		int rc;

		if (!b.data)
			continue;
		mutate(&b, mutations[i].m);
		rc = read_mem(b.data, b.len, &ar, &err, NULL);
		if (!mutations[i].why) {
			CHECK(rc == 0 && ar.n == SMALL_N, "mutation %zu should still read: %s", i, err.msg);
			for (size_t k = 0; !rc && k < SMALL_N; k++)
				CHECK(!strcmp(ar.entries[k].name, small_recs[k].name) && ar.entries[k].size == small_recs[k].size,
				      "entry %zu", k);
		} else {
			CHECK(rc == -EINVAL, "mutation %zu: rc %d (%s)", i, rc, err.msg);
			CHECK(strstr(err.msg, mutations[i].why) != NULL, "mutation %zu: '%s' lacks '%s'", i, err.msg,
			      mutations[i].why);
			CHECK(strstr(err.msg, "offset") || strstr(err.msg, "last"), "mutation %zu: no offset in '%s'", i, err.msg);
			CHECK(ar.n == 0 && !ar.entries && !ar.root, "mutation %zu: output not cleared", i);
		}
		tz_archive_free(&ar);
		ck_buf_free(&b);
	}
}

/* Every prefix of a valid archive is refused cleanly (and reads stay in bounds). */
static void truncations(void)
{
	struct ck_buf b = make_small();

	for (size_t len = 0; b.data && len < b.len; len++) {
		struct tz_archive ar;
		struct ck_error err = { "" };
		int rc = read_mem(b.data, len, &ar, &err, NULL);

		CHECK(rc == -EINVAL, "prefix of %zu bytes: rc %d", len, rc);
		tz_archive_free(&ar);
	}
	ck_buf_free(&b);
}

/* A failing pread is reported with its own errno. */
static int failing_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	(void)ctx, (void)buf, (void)len, (void)off;
	return -EIO;
}

static void io_errors(void)
{
	struct tz_archive ar;
	struct ck_error err = { "" };

	CHECK(tz_read(failing_pread, NULL, 4096, &ar, &err) == -EIO && strstr(err.msg, "reading"),
	      "I/O error: '%s'", err.msg);
	tz_archive_free(&ar);
}

/* Headers far apart are read on their own: parsing an archive of 256 KiB
 * tensors reads its headers, not its tensors. */
static void large_records(void)
{
	enum { N = 129, SIZE = 256 << 10 };
	struct tz_record recs[N];
	char names[N][32];
	struct membuild b = { CK_BUF_INIT, NULL, NULL, 0 };
	struct tz_archive ar;
	struct ck_error err = { "" };
	uint64_t bytes = 0;
	int reads = 0;

	memset(recs, 0, sizeof(recs));
	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), i ? "data/%zu" : "data.pkl", i - 1);
		recs[i].name = names[i];
		recs[i].size = i ? SIZE : 100;
	}
	pattern_crcs(recs, N);
	CHECK(!tz_write("large", recs, N, 64, mem_emit, &b), "tz_write(large)");
	if (read_mem_counted(b.out.data, b.out.len, &ar, &err, &reads, &bytes)) {
		CHECK(0, "large records: %s", err.msg);
		goto out;
	}
	printf("%d records of 256 KiB, %zu bytes: %d reads, %llu bytes read\n", N - 1, b.out.len, reads,
	       (unsigned long long)bytes);
	CHECK(bytes < b.out.len / 32, "large records: %llu of %zu bytes read to parse the headers",
	      (unsigned long long)bytes, b.out.len);
	CHECK(ar.n == N && tz_find(&ar, "data/127") && tz_find(&ar, "data/127")->size == SIZE,
	      "large records: %zu entries", ar.n);
	tz_archive_free(&ar);
out:
	ck_buf_free(&b.out);
}

static void many_records(void)
{
	enum { N = 10000 };
	struct tz_record *recs = calloc(N, sizeof(*recs));
	char (*names)[32] = calloc(N, sizeof(*names));
	struct membuild b = { CK_BUF_INIT, NULL, NULL, 0 };
	struct tz_archive ar;
	struct ck_error err = { "" };
	int reads = 0;

	if (!recs || !names)
		goto out;
	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), i ? "data/%zu" : "data.pkl", i - 1);
		recs[i].name = names[i];
		recs[i].size = (i * 37) % 101;       /* some records empty */
	}
	pattern_crcs(recs, N);
	CHECK(!tz_write("big", recs, N, 64, mem_emit, &b), "tz_write(10000)");
	if (read_mem(b.out.data, b.out.len, &ar, &err, &reads)) {
		CHECK(0, "10000 records: %s", err.msg);
		goto out;
	}
	/* tail + zip64 EOCD + CD + one read per MiB of local headers */
	CHECK(reads <= 3 + (int)(b.out.len >> 20) + 1, "10000 records took %d reads for %zu bytes", reads, b.out.len);
	printf("10000 records, %zu bytes: %d reads\n", b.out.len, reads);
	CHECK(ar.n == N && !strcmp(ar.root, "big"), "10000 records: %zu entries", ar.n);
	for (size_t i = 0; i < ar.n; i++) {
		const struct tz_entry *e = tz_find(&ar, names[i]);

		if (!e || e != &ar.entries[i] || e->size != recs[i].size || e->crc32 != recs[i].crc32 ||
		    ck_crc32(0, b.out.data + e->data_offset, e->size) != e->crc32) {
			CHECK(0, "record %zu (%s) wrong", i, names[i]);
			break;
		}
	}
	tz_archive_free(&ar);
out:
	ck_buf_free(&b.out);
	free(recs);
	free(names);
}

static void writer_arguments(void)
{
	struct membuild b = { CK_BUF_INIT, NULL, NULL, 0 };
	struct tz_record r = { "x", 1, 0 };

	CHECK(tz_write("", &r, 1, 64, mem_emit, &b) == -EINVAL, "empty root accepted");
	CHECK(tz_write("a", &r, 1, 65536, mem_emit, &b) == -EINVAL, "alignment 65536 accepted");
	b.out.len = 0;
	/* align 0 means PyTorch's 64 */
	CHECK(!tz_write("a", &r, 1, 0, mem_emit, &b), "align 0");
	{
		struct tz_archive ar;
		struct ck_error err = { "" };

		CHECK(!read_mem(b.out.data, b.out.len, &ar, &err, NULL) && ar.entries[0].data_offset == 64,
		      "align 0: %s", err.msg);
		tz_archive_free(&ar);
	}
	/* align 4096 */
	b.out.len = 0;
	CHECK(!tz_write("a", &r, 1, 4096, mem_emit, &b), "align 4096");
	{
		struct tz_archive ar;
		struct ck_error err = { "" };

		CHECK(!read_mem(b.out.data, b.out.len, &ar, &err, NULL) && ar.entries[0].data_offset == 4096,
		      "align 4096: %s", err.msg);
		tz_archive_free(&ar);
	}
	ck_buf_free(&b.out);
}

int main(void)
{
	fixtures();
	legacy_magic();
	malformed();
	truncations();
	io_errors();
	large_records();
	many_records();
	writer_arguments();
	return test_result();
}
