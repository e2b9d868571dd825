/* ck_crc32: published check values, agreement of the table and carry-less
 * multiply paths at every length and alignment, incremental use, and
 * agreement with Python's zlib.crc32 on a random buffer. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/torchzip.h"
#include "../../src/format/crc32_impl.h"
#include "testutil.h"

static uint64_t rng = 0x243f6a8885a308d3ULL;

static uint8_t rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)(rng >> 24);
}

static void known_vectors(void)
{
	static const struct { const char *s; uint32_t crc; } v[] = {
		{ "", 0x00000000 },
		{ "a", 0xe8b7be43 },
		{ "abc", 0x352441c2 },
		{ "123456789", 0xcbf43926 },       /* the CRC catalogue's check value */
		{ "message digest", 0x20159d7f },
		{ "The quick brown fox jumps over the lazy dog", 0x414fa339 },
		{ "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 0x2dc86ef1 },
	};
	uint8_t zeros[4096] = { 0 };

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint32_t got = ck_crc32(0, v[i].s, strlen(v[i].s));

		CHECK(got == v[i].crc, "crc32(\"%s\") = %08x, want %08x", v[i].s, got, v[i].crc);
	}
	/* 4096 zero bytes: long enough for the folding path. */
	CHECK(ck_crc32(0, zeros, sizeof(zeros)) == 0xc71c0011, "crc32(4096 zeros) = %08x",
	      ck_crc32(0, zeros, sizeof(zeros)));
}

static void paths_agree(const uint8_t *buf)
{
	for (size_t align = 0; align < 16; align++) {
		for (size_t len = 0; len <= 1100; len++) {
			uint32_t a = ck_crc32(0x12345678, buf + align, len);
			uint32_t b = ck_crc32_tables(0x12345678, buf + align, len);

			if (a != b) {
				CHECK(a == b, "len %zu align %zu: ck_crc32 %08x, tables %08x", len, align, a, b);
				return;
			}
		}
	}
}

static void incremental(const uint8_t *buf, size_t n)
{
	uint32_t whole = ck_crc32(0, buf, n);

	for (size_t cut = 0; cut <= n; cut += 97) {
		uint32_t parts = ck_crc32(ck_crc32(0, buf, cut), buf + cut, n - cut);

		CHECK(parts == whole, "split at %zu: %08x != %08x", cut, parts, whole);
	}
}

/* Python's zlib.crc32 over the same bytes, or -1 when Python cannot run
 * (python_on skipped the part or counted the failure). */
static long python_crc32(const uint8_t *buf, size_t n)
{
	char *printed = python_on("import sys, zlib; print(zlib.crc32(open(sys.argv[1], \"rb\").read()))", buf, n);
	unsigned long v;
	long out = -1;

	if (printed && sscanf(printed, "%lu", &v) == 1)
		out = (long)v;
	free(printed);
	return out;
}

int main(void)
{
	size_t n = 3 << 20;
	uint8_t *buf = malloc(n);
	long py;

	if (!buf)
		return 99;
	for (size_t i = 0; i < n; i++)
		buf[i] = rnd8();
	known_vectors();
	paths_agree(buf);
	incremental(buf, 5000);

	py = python_crc32(buf + 3, n - 3);
	if (py >= 0)
		CHECK((uint32_t)py == ck_crc32(0, buf + 3, n - 3), "zlib.crc32 %08lx, ck_crc32 %08x",
		      (unsigned long)py, ck_crc32(0, buf + 3, n - 3));
	free(buf);
	return test_result();
}
