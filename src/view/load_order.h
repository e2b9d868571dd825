/* The order a loader reads a checkpoint file's storages in, and what it
 * reads next: the hints packed files are prefetched by.  Pure functions
 * over a file's storage ranges (offset order), so tests can drive them
 * without a store. */
#ifndef CKPTFS_VIEW_LOAD_ORDER_H
#define CKPTFS_VIEW_LOAD_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/packstore.h"

struct phys_range;

/* No successor: the last range in load order. */
#define LOAD_ORDER_END UINT32_MAX

/* Ranges r[0..n) (offset order) chained in the order a loader asks for
 * them: succ[i] is the range read after r[i], or LOAD_ORDER_END.  torch.save
 * numbers storages as its pickle first meets them and torch.load reads
 * them in that order, but the zip holds them sorted as strings ("0", "1",
 * "10", "100", ..., "2"): decimal keys compare as numbers, other keys
 * (tensor names) as strings.  A new array (the caller frees it), or NULL
 * when there are fewer than two ranges or no memory. */
uint32_t *load_order_succ(const struct phys_range *r, size_t n);

/* What a loader whose read ends at byte end reads next, into out[0..max):
 * the rest of the range holding the read's last byte (end - 1), then the
 * ranges after it in load order, until budget bytes.  A read that ends in
 * the bytes between ranges (a zip header) goes on with the next range in
 * the file.  Returns how many were written; 0 when end is past the last
 * range. */
size_t load_order_ahead(const struct phys_range *r, size_t n, const uint32_t *succ, uint64_t end,
			uint64_t budget, struct ck_byte_range *out, size_t max);

#endif
