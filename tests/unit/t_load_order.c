/* The order a loader reads a torch.save file's storages in, and the ranges
 * a packed file prefetches for a read (src/view/load_order.c). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/load_order.h"
#include "view/view_internal.h"
#include "testutil.h"

/* Storages as torch.save lays them out: keys sorted as strings, each
 * behind a 64-byte zip header, `size` bytes each. */
#define NKEYS 12
#define HEADER 64

static void zip_layout(struct phys_range *r, char keys[][8], uint64_t size)
{
	/* "0" "1" "10" "11" "2" ... "9" */
	static const int order[NKEYS] = { 0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9 };
	uint64_t off = 1000;

	memset(r, 0, NKEYS * sizeof(*r));
	for (int i = 0; i < NKEYS; i++) {
		snprintf(keys[i], 8, "%d", order[i]);
		r[i].key = keys[i];
		r[i].offset = off + HEADER;
		r[i].length = size;
		off += HEADER + size;
	}
}

static int index_of(const struct phys_range *r, const char *key)
{
	for (int i = 0; i < NKEYS; i++)
		if (!strcmp(r[i].key, key))
			return i;
	return -1;
}

static void test_succ(void)
{
	struct phys_range r[NKEYS];
	char keys[NKEYS][8];
	uint32_t *succ;
	int at, seen = 0;

	zip_layout(r, keys, 100);
	succ = load_order_succ(r, NKEYS);
	SETUP(succ);
	/* From "0" through "11" in numeric order, then the end. */
	for (at = index_of(r, "0"); at >= 0 && (uint32_t)at != LOAD_ORDER_END; at = (int)succ[at], seen++) {
		char want[8];

		snprintf(want, sizeof(want), "%d", seen);
		CHECK(!strcmp(r[at].key, want), "load order step %d: storage %s, want %s", seen, r[at].key, want);
		if (seen > NKEYS)
			break;
	}
	CHECK(seen == NKEYS, "load order visits %d storages, want %d", seen, NKEYS);
	free(succ);

	/* Tensor names (safetensors, DCP) compare as strings. */
	{
		struct phys_range t[3] = { { .key = "b.weight" }, { .key = "a.weight" }, { .key = "c.bias" } };

		succ = load_order_succ(t, 3);
		SETUP(succ);
		CHECK(succ[1] == 0 && succ[0] == 2 && succ[2] == LOAD_ORDER_END,
		      "names: succ %u %u %u", succ[0], succ[1], succ[2]);
		free(succ);
	}
	CHECK(!load_order_succ(r, 1), "one range: no order");
}

static void test_ahead(void)
{
	struct phys_range r[NKEYS];
	char keys[NKEYS][8];
	struct ck_byte_range out[NKEYS + 1];
	const struct phys_range *one, *two, *ten;
	uint32_t *succ;
	size_t n;

	zip_layout(r, keys, 100);
	succ = load_order_succ(r, NKEYS);
	SETUP(succ);
	one = &r[index_of(r, "1")];
	two = &r[index_of(r, "2")];
	ten = &r[index_of(r, "10")];

	/* Inside "1": its rest, then "2", "3", ... */
	n = load_order_ahead(r, NKEYS, succ, one->offset + 40, UINT64_MAX, out, NKEYS + 1);
	CHECK(n == 11, "inside 1: %zu ranges, want 11", n);
	CHECK(n > 1 && out[0].off == one->offset + 40 && out[0].len == 60, "inside 1: first %llu+%llu",
	      (unsigned long long)out[0].off, (unsigned long long)out[0].len);
	CHECK(n > 1 && out[1].off == two->offset && out[1].len == 100, "inside 1: then %llu, want storage 2 at %llu",
	      (unsigned long long)out[1].off, (unsigned long long)two->offset);

	/* Right at the end of "1": "2" next, not "10", its neighbour in the
	 * file (a read split at a storage's end). */
	n = load_order_ahead(r, NKEYS, succ, one->offset + one->length, UINT64_MAX, out, NKEYS + 1);
	CHECK(n == 10, "end of 1: %zu ranges, want 10", n);
	CHECK(n && out[0].off == two->offset && out[0].len == 100,
	      "end of 1: first %llu, want storage 2 at %llu (storage 10 is at %llu)", (unsigned long long)out[0].off,
	      (unsigned long long)two->offset, (unsigned long long)ten->offset);

	/* In the zip header before "10": all of "10", then "11", the last. */
	n = load_order_ahead(r, NKEYS, succ, ten->offset - 10, UINT64_MAX, out, NKEYS + 1);
	CHECK(n == 2 && out[0].off == ten->offset && out[0].len == 100 &&
	      out[1].off == r[index_of(r, "11")].offset,
	      "header of 10: %zu ranges from %llu", n, (unsigned long long)out[0].off);

	/* At the end of "9", the file's last storage: "10" and "11". */
	n = load_order_ahead(r, NKEYS, succ, r[NKEYS - 1].offset + 100, UINT64_MAX, out, NKEYS + 1);
	CHECK(n == 2 && out[0].off == ten->offset, "end of 9: %zu ranges from %llu", n,
	      (unsigned long long)out[0].off);

	/* The budget stops it after the range that reaches it; so does max. */
	n = load_order_ahead(r, NKEYS, succ, one->offset, 250, out, NKEYS + 1);
	CHECK(n == 3, "budget 250 from 1: %zu ranges, want 3", n);
	n = load_order_ahead(r, NKEYS, succ, one->offset, UINT64_MAX, out, 4);
	CHECK(n == 4, "max 4: %zu ranges", n);

	/* Past the last storage, at 0, or without an order. */
	n = load_order_ahead(r, NKEYS, succ, r[NKEYS - 1].offset + 101, UINT64_MAX, out, NKEYS + 1);
	CHECK(n == 0, "past the end: %zu ranges", n);
	n = load_order_ahead(r, NKEYS, succ, 0, UINT64_MAX, out, NKEYS + 1);
	CHECK(n == NKEYS && out[0].off == r[0].offset, "from 0: %zu ranges", n);
	CHECK(load_order_ahead(r, NKEYS, NULL, one->offset, UINT64_MAX, out, NKEYS + 1) == 0, "no order: no hint");
	free(succ);
}

int main(void)
{
	test_succ();
	test_ahead();
	return test_result();
}
