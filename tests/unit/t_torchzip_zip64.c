/* Zip64 branches of the writer and the reader, on multi-GiB archives that
 * are never materialized: the emit callback only keeps the container bytes
 * and where each record's data goes, and the reader's pread callback serves
 * those bytes with zeros for the data.  The zip64 fields are checked
 * against the layout rules of docs/formats.md §1.3 byte by byte, tz_read
 * must see every record where the writer put it, and Python's zipfile (an
 * independent reader) must list the same entries from a sparse copy of the
 * archive. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"
#include "testutil.h"

#define GiB (1ULL << 30)
#define MAX32 0xffffffffULL

/* A virtual archive: container pieces at their offsets; everything else zero. */
struct piece {
	uint64_t off;
	uint8_t *bytes;
	size_t len;
};

struct vfile {
	struct piece *pieces;
	size_t n, cap;
	uint64_t size;
	uint64_t data_off[16];    /* where emit put each record's data */
	int emits[16];
};

static int v_emit(void *ctx, long record, const void *bytes, uint64_t len)
{
	struct vfile *v = ctx;

	if (record >= 0) {
		if (record >= 16)
			return -EINVAL;
		v->data_off[record] = v->size;
		v->emits[record]++;
		v->size += len;
		return 0;
	}
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		struct piece *p = realloc(v->pieces, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		v->pieces = p;
		v->cap = cap;
	}
	v->pieces[v->n].bytes = malloc(len);
	if (!v->pieces[v->n].bytes)
		return -ENOMEM;
	memcpy(v->pieces[v->n].bytes, bytes, len);
	v->pieces[v->n].off = v->size;
	v->pieces[v->n].len = len;
	v->n++;
	v->size += len;
	return 0;
}

static int v_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct vfile *v = ctx;

	if (off > v->size || len > v->size - off)
		return -EIO;
	memset(buf, 0, len);
	for (size_t i = 0; i < v->n; i++) {
		const struct piece *p = &v->pieces[i];
		uint64_t lo = off > p->off ? off : p->off;
		uint64_t hi = off + len < p->off + p->len ? off + len : p->off + p->len;

		if (lo < hi)
			memcpy((uint8_t *)buf + (lo - off), p->bytes + (lo - p->off), hi - lo);
	}
	return 0;
}

static void v_free(struct vfile *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->pieces[i].bytes);
	free(v->pieces);
}

static uint64_t get(const struct vfile *v, uint64_t off, int width)
{
	uint8_t b[8] = { 0 };
	uint64_t x = 0;

	v_pread((void *)v, b, (size_t)width, off);
	for (int i = width - 1; i >= 0; i--)
		x = x << 8 | b[i];
	return x;
}

/* Checks one record's local header, descriptor and central entry against the
 * rules (independently of how the writer computes them). */
static void check_record_bytes(const struct vfile *v, const struct tz_entry *e, const char *full_name,
			       uint64_t cd_entry)
{
	int big_size = e->size >= MAX32, big_ofs = e->lho >= MAX32, z64 = big_size || big_ofs;
	size_t nlen = strlen(full_name);
	uint64_t x = e->lho + 30 + nlen, desc;
	unsigned zlen = 8 * (2 * big_size + big_ofs);

	CHECK(get(v, e->lho + 6, 2) == (e->size ? 0x0808u : 0x0800u), "%s: local flags", full_name);
	CHECK(get(v, e->lho + 14, 4) == 0 && get(v, e->lho + 18, 4) == 0 && get(v, e->lho + 22, 4) == 0,
	      "%s: local CRC/sizes not zero", full_name);
	if (z64) {
		CHECK(get(v, x, 2) == 1 && get(v, x + 2, 2) == zlen, "%s: local zip64 field header", full_name);
		if (big_size)
			CHECK(get(v, x + 4, 8) == e->size && get(v, x + 12, 8) == 0,
			      "%s: local zip64 sizes (usize, csize 0)", full_name);
		if (big_ofs)
			CHECK(get(v, x + 4 + (big_size ? 16 : 0), 8) == e->lho, "%s: local zip64 offset", full_name);
		x += 4 + zlen;
	}
	CHECK(get(v, x, 2) == ('F' | 'B' << 8) && x + 4 + get(v, x + 2, 2) == e->data_offset,
	      "%s: FB padding does not end at the data", full_name);
	CHECK(e->data_offset % 64 == 0, "%s: data at %llu", full_name, (unsigned long long)e->data_offset);

	desc = e->data_offset + e->size;
	if (e->size) {
		CHECK(get(v, desc, 4) == 0x08074b50 && get(v, desc + 4, 4) == e->crc32, "%s: descriptor", full_name);
		if (z64)
			CHECK(get(v, desc + 8, 8) == e->size && get(v, desc + 16, 8) == e->size,
			      "%s: 64-bit descriptor sizes", full_name);
		else
			CHECK(get(v, desc + 8, 4) == e->size && get(v, desc + 12, 4) == e->size,
			      "%s: 32-bit descriptor sizes", full_name);
	}

	CHECK(get(v, cd_entry, 4) == 0x02014b50, "%s: central signature", full_name);
	CHECK(get(v, cd_entry + 20, 4) == (big_size ? MAX32 : e->size) &&
	      get(v, cd_entry + 24, 4) == (big_size ? MAX32 : e->size), "%s: central sizes", full_name);
	CHECK(get(v, cd_entry + 42, 4) == (big_ofs ? MAX32 : e->lho), "%s: central offset", full_name);
	CHECK(get(v, cd_entry + 30, 2) == (z64 ? 4 + zlen : 0), "%s: central extra length", full_name);
	if (z64) {
		uint64_t cx = cd_entry + 46 + nlen;

		CHECK(get(v, cx, 2) == 1 && get(v, cx + 2, 2) == zlen, "%s: central zip64 field header", full_name);
		if (big_size)
			CHECK(get(v, cx + 4, 8) == e->size && get(v, cx + 12, 8) == e->size,
			      "%s: central zip64 sizes", full_name);
		if (big_ofs)
			CHECK(get(v, cx + 4 + (big_size ? 16 : 0), 8) == e->lho, "%s: central zip64 offset", full_name);
	}
}

/* Python's zipfile listing of a sparse copy: "name offset size csize crc" lines. */
static char *python_listing(const struct vfile *v)
{
	const char *py = test_python();
	char path[] = "/tmp/t_torchzip_zip64.XXXXXX", cmd[1024], *out = NULL;
	int fd, ok = 1;

	if (access(py, X_OK) || (fd = mkstemp(path)) < 0)
		return NULL;
	for (size_t i = 0; i < v->n && ok; i++)
		ok = pwrite(fd, v->pieces[i].bytes, v->pieces[i].len, (off_t)v->pieces[i].off) == (ssize_t)v->pieces[i].len;
	ok = ok && ftruncate(fd, (off_t)v->size) == 0;
	close(fd);
	if (ok) {
		snprintf(cmd, sizeof(cmd), "'%s' -c 'import sys, zipfile\n"
			 "for i in zipfile.ZipFile(sys.argv[1]).infolist():\n"
			 "    print(i.filename, i.header_offset, i.file_size, i.compress_size, i.CRC)' '%s'", py, path);
		out = run_output(cmd);
	}
	unlink(path);
	return out;
}

/* want_lho1: where record 1's local header must be (0: anywhere). */
static void run_case(const char *label, const struct tz_record *recs, size_t n, uint64_t want_lho1)
{
	struct vfile v = { 0 };
	struct tz_archive ar;
	struct ck_error err = { "" };
	char full[256], *listing, line[512];
	uint64_t cd_entry = 0, cd_off;

	if (tz_write("archive", recs, n, 64, v_emit, &v)) {
		CHECK(0, "%s: tz_write failed", label);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		CHECK(v.emits[i] == 1, "%s: record %zu emitted %d times", label, i, v.emits[i]);
	if (tz_read(v_pread, &v, v.size, &ar, &err)) {
		CHECK(0, "%s: tz_read: %s", label, err.msg);
		goto out;
	}
	CHECK(ar.n == n && !strcmp(ar.root, "archive") && ar.file_size == v.size, "%s: archive", label);
	/* The central directory: the second-to-last piece starts with it. */
	cd_off = get(&v, v.size - 22 + 16, 4);
	if (cd_off == MAX32)
		cd_off = get(&v, v.size - 22 - 20 - 56 + 48, 8);
	CHECK(cd_off < MAX32 || get(&v, v.size - 22 + 16, 4) == MAX32, "%s: EOCD offset not saturated", label);
	CHECK(!want_lho1 || (ar.n > 1 && ar.entries[1].lho == want_lho1), "%s: record 1 at %llu", label,
	      ar.n > 1 ? (unsigned long long)ar.entries[1].lho : 0ULL);
	CHECK(get(&v, v.size - 22 - 20, 4) == 0x07064b50 && get(&v, v.size - 22 - 20 - 56, 4) == 0x06064b50,
	      "%s: zip64 end records missing", label);
	cd_entry = cd_off;
	for (size_t i = 0; i < ar.n && i < n; i++) {
		const struct tz_entry *e = &ar.entries[i];

		snprintf(full, sizeof(full), "archive/%s", recs[i].name);
		CHECK(!strcmp(e->name, recs[i].name) && e->size == recs[i].size && e->csize == recs[i].size &&
		      e->crc32 == recs[i].crc32 && e->method == 0, "%s: entry %zu", label, i);
		CHECK(e->data_offset == v.data_off[i], "%s: %s read at %llu, written at %llu", label, e->name,
		      (unsigned long long)e->data_offset, (unsigned long long)v.data_off[i]);
		check_record_bytes(&v, e, full, cd_entry);
		cd_entry += 46 + get(&v, cd_entry + 28, 2) + get(&v, cd_entry + 30, 2);
	}

	listing = python_listing(&v);
	if (!listing) {
		fprintf(stderr, "note: %s: no Python zipfile listing (Python or sparse file unavailable)\n", label);
	} else {
		char *at = listing;

		for (size_t i = 0; i < ar.n; i++) {
			const struct tz_entry *e = &ar.entries[i];
			size_t l = (size_t)snprintf(line, sizeof(line), "archive/%s %llu %llu %llu %u\n", e->name,
						   (unsigned long long)e->lho, (unsigned long long)e->size,
						   (unsigned long long)e->size, e->crc32);

			CHECK(!strncmp(at, line, l), "%s: zipfile sees '%.*s', want '%s'", label,
			      (int)(strchr(at, '\n') ? strchr(at, '\n') - at : (long)strlen(at)), at, line);
			at = strchr(at, '\n');
			if (!at)
				break;
			at++;
		}
		free(listing);
	}
	tz_archive_free(&ar);
out:
	v_free(&v);
}

int main(void)
{
	/* Sizes and offsets across every zip64 branch:
	 *  data/0   5 GiB: size >= 0xFFFFFFFF, offset small
	 *  data/1   after 4 GiB: offset only
	 *  data/2   exactly 0xFFFFFFFF bytes, after 4 GiB: both
	 *  data/3   empty, after 4 GiB: offset only, no descriptor */
	static const struct tz_record big[] = {
		{ "data.pkl", 1000, 0x11111111 },
		{ "data/0", 5 * GiB, 0x22222222 },
		{ "data/1", 100, 0x33333333 },
		{ "data/2", MAX32, 0x44444444 },
		{ "data/3", 0, 0 },
		{ "version", 2, 0x55555555 },
	};
	/* data.pkl is at 64; its data and 16-byte descriptor end where data/0's
	 * header starts: exactly at 0xFFFFFFFF (zip64) or one byte before (not). */
	static const struct tz_record at_limit[] = {
		{ "data.pkl", MAX32 - 64 - 16, 0x66666666 },
		{ "data/0", 10, 0x77777777 },
		{ "version", 2, 0x55555555 },
	};
	static const struct tz_record below_limit[] = {
		{ "data.pkl", MAX32 - 64 - 16 - 1, 0x66666666 },
		{ "data/0", 10, 0x77777777 },
		{ "version", 2, 0x55555555 },
	};

	run_case("multi-GiB", big, sizeof(big) / sizeof(big[0]), 0);
	run_case("offset == 0xFFFFFFFF", at_limit, 3, MAX32);
	run_case("offset == 0xFFFFFFFE", below_limit, 3, MAX32 - 1);
	return test_result();
}
