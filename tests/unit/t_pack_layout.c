/* How compaction cuts a file version into chunks (src/packstore/pack_layout.c):
 * storages on their own, at most CK_CHUNK_MAX each, and the bytes between
 * them named after the storage that follows, so that a newer version's
 * zip header can be found as a delta reference. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "packstore/pack_layout.h"
#include "ckptfs/chunk.h"
#include "testutil.h"

int main(void)
{
	/* Two storages out of file order, each behind a 64-byte header, a
	 * central directory after them; the second holds two tensors. */
	struct ck_storage_info s[2] = {
		{ .key = (char *)"1", .offset = 64 + 4096 + 64, .length = CK_CHUNK_MAX + 100 },
		{ .key = (char *)"0", .offset = 64, .length = 4096 },
	};
	struct ck_tensor_info t[3] = {
		{ .name = (char *)"w", .dtype = CK_DT_F32, .storage_key = (char *)"0" },
		{ .name = (char *)"m.a", .dtype = CK_DT_BF16, .storage_key = (char *)"1" },
		{ .name = (char *)"m.b", .dtype = CK_DT_BF16, .storage_key = (char *)"1" },
	};
	uint64_t size = s[0].offset + s[0].length + 300;
	struct ck_layout l;
	static const struct {
		uint64_t off;
		uint32_t len;
		unsigned elem;
		const char *key, *ident;
		uint32_t index;
	} want[] = {
		{ 0, 64, 1, NULL, "w", CK_LAYOUT_GAP },
		{ 64, 4096, 4, "0", "w", 0 },
		{ 4160, 64, 1, NULL, "m.a", CK_LAYOUT_GAP },
		{ 4224, CK_CHUNK_MAX, 2, "1", "m.a", 0 },
		{ 4224 + CK_CHUNK_MAX, 100, 2, "1", "m.a", 1 },
		{ 4324 + CK_CHUNK_MAX, 300, 1, NULL, CK_LAYOUT_END, CK_LAYOUT_GAP },
	};

	SETUP(ck_layout_build(&l, size, s, 2, t, 3) == 0 && ck_layout_index(&l) == 0);
	CHECK(l.n == sizeof(want) / sizeof(want[0]), "%zu chunks", l.n);
	for (size_t i = 0; i < l.n && i < sizeof(want) / sizeof(want[0]); i++) {
		const struct ck_layout_chunk *c = &l.c[i];

		CHECK(c->off == want[i].off && c->len == want[i].len && c->elem == want[i].elem &&
			      c->index == want[i].index,
		      "chunk %zu: %llu+%u elem %u index %#x", i, (unsigned long long)c->off, c->len, c->elem,
		      c->index);
		CHECK(want[i].key ? c->key && strcmp(c->key, want[i].key) == 0 : c->key == NULL, "chunk %zu: key %s",
		      i, c->key ? c->key : "(none)");
		CHECK(c->ident && strcmp(c->ident, want[i].ident) == 0, "chunk %zu: ident %s", i,
		      c->ident ? c->ident : "(none)");
		/* Every chunk, a header as much as a tensor's, is found by
		 * what it holds: the newer version's is its delta reference. */
		CHECK(ck_layout_find(&l, want[i].ident, want[i].index) == (long)i, "chunk %zu not found", i);
	}
	CHECK(ck_layout_find(&l, "m.a", 2) == -1 && ck_layout_find(&l, "nothing", 0) == -1 &&
		      ck_layout_find(&l, "w", CK_LAYOUT_GAP + 1) == -1,
	      "found what is not there");
	ck_layout_clear(&l);
	return test_result();
}
