/* Tensor bytes as numbers: IEEE binary16 and bfloat16 decoding, and the
 * sums behind an update's relative L2 norm and largest absolute change.
 * Pure functions; any thread. */
#ifndef CKPTFS_TENSOR_MATH_H
#define CKPTFS_TENSOR_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/dtype.h"

/* IEEE 754 binary16 and bfloat16 (the upper half of a binary32), exactly. */
float ck_f16_to_float(uint16_t h);
float ck_bf16_to_float(uint16_t b);

/* 1 for the dtypes whose values are measured: float32, float16, bfloat16,
 * float64.  Others can only be compared byte for byte. */
int ck_dtype_is_measured(enum ck_dtype dt);

/* Sums over elements of (cur - prev)^2, prev^2 and cur^2 in double, and
 * the largest |cur - prev| (NaN once a difference is NaN). */
struct ck_l2 {
	double diff2, prev2, cur2;
	double max_abs;
};

/* Adds n elements of a measured dtype, little-endian as torch and
 * safetensors store them.  prev may be NULL (only cur2 accumulates). */
void ck_l2_add(struct ck_l2 *acc, enum ck_dtype dt, const void *prev, const void *cur, size_t n);

/* ||cur - prev|| / ||prev||: 0 when nothing changed, NAN when prev is zero
 * under a change. */
double ck_l2_relative(const struct ck_l2 *acc);

#endif
