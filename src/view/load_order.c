/* Load order of a file's storages, and the ranges a loader reads next
 * (src/view/load_order.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "load_order.h"
#include "view_internal.h"

static int key_is_decimal(const char *k)
{
	if (!*k)
		return 0;
	for (; *k; k++)
		if (*k < '0' || *k > '9')
			return 0;
	return 1;
}

static int load_order_cmp(const void *a, const void *b, void *arg)
{
	const struct phys_range *r = arg;
	const char *x = r[*(const uint32_t *)a].key, *y = r[*(const uint32_t *)b].key;

	if (key_is_decimal(x) && key_is_decimal(y) && strlen(x) != strlen(y))
		return strlen(x) < strlen(y) ? -1 : 1;
	return strcmp(x, y);
}

uint32_t *load_order_succ(const struct phys_range *r, size_t n)
{
	uint32_t *order, *succ;

	if (n < 2 || n >= LOAD_ORDER_END)
		return NULL;
	order = malloc(n * sizeof(*order));
	succ = malloc(n * sizeof(*succ));
	if (!order || !succ) {
		free(order);
		free(succ);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, n, sizeof(*order), load_order_cmp, (void *)r);
	for (size_t i = 0; i < n; i++)
		succ[order[i]] = i + 1 < n ? order[i + 1] : LOAD_ORDER_END;
	free(order);
	return succ;
}

/* The range holding byte off, or else the first after it; n when none is. */
static size_t range_from(const struct phys_range *r, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].offset + r[mid].length <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t load_order_ahead(const struct phys_range *r, size_t n, const uint32_t *succ, uint64_t end,
			uint64_t budget, struct ck_byte_range *out, size_t max)
{
	/* From the range holding the last byte read: a read that ends right
	 * at a storage's end goes on with that storage's successor, not with
	 * its neighbour in the file. */
	size_t first = end ? range_from(r, n, end - 1) : 0, k = 0;
	uint64_t bytes = 0;

	if (!succ || first == n)
		return 0;
	for (uint32_t i = (uint32_t)first; i != LOAD_ORDER_END && k < max && bytes < budget; i = succ[i]) {
		uint64_t from = i == first && r[i].offset < end ? end : r[i].offset;
		uint64_t stop = r[i].offset + r[i].length;

		if (from >= stop)
			continue;       /* read to its end already */
		out[k].off = from;
		out[k].len = stop - from;
		bytes += out[k++].len;
	}
	return k;
}
