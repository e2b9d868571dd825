/* Byte planes and the element-wise delta transforms of the chunk codec.
 *
 * These loops run over every byte the store compacts or serves, so they are
 * written for the auto-vectorizer: one loop per element size, restrict
 * pointers, no branches in the body.  GCC only vectorizes such loops at -O2
 * with its cheap cost model when it can prove them profitable without an
 * epilogue, so this file asks for the dynamic model (clang vectorizes them
 * at -O2 as they are).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#include "config.h"
#include "chunk_int.h"

#include <string.h>

#define SPLIT(W)                                                              \
static void split##W(const uint8_t *restrict s, size_t n, uint8_t *restrict p) \
{                                                                             \
	for (unsigned k = 0; k < W; k++) {                                    \
		uint8_t *restrict d = p + k * n;                              \
		for (size_t i = 0; i < n; i++)                                \
			d[i] = s[i * W + k];                                  \
	}                                                                     \
}

static void join2(const uint8_t *restrict p, size_t n, uint8_t *restrict d)
{
	const uint8_t *restrict p0 = p, *restrict p1 = p + n;

	for (size_t i = 0; i < n; i++) {
		d[2 * i] = p0[i];
		d[2 * i + 1] = p1[i];
	}
}

/* Wider elements join plane by plane: GCC vectorizes the strided stores of
 * one plane (~2.5 GB/s) but not four or eight interleaved loads. */
#define JOIN_BY_PLANE(W)                                                      \
static void join##W(const uint8_t *restrict p, size_t n, uint8_t *restrict d) \
{                                                                             \
	for (unsigned k = 0; k < W; k++) {                                    \
		const uint8_t *restrict s = p + k * n;                        \
		for (size_t i = 0; i < n; i++)                                \
			d[i * W + k] = s[i];                                  \
	}                                                                     \
}

JOIN_BY_PLANE(4) JOIN_BY_PLANE(8)

SPLIT(2) SPLIT(4) SPLIT(8)

void ck_planes_split(const uint8_t *src, size_t len, unsigned size, uint8_t *planes)
{
	size_t n = len / size;

	switch (size) {
	case 2: split2(src, n, planes); break;
	case 4: split4(src, n, planes); break;
	case 8: split8(src, n, planes); break;
	default: memcpy(planes, src, n * size); break;
	}
}

void ck_planes_join(const uint8_t *planes, size_t len, unsigned size, uint8_t *dst)
{
	size_t n = len / size;

	switch (size) {
	case 2: join2(planes, n, dst); break;
	case 4: join4(planes, n, dst); break;
	case 8: join8(planes, n, dst); break;
	default: memcpy(dst, planes, n * size); break;
	}
}

/* out may be b (a delta decoded over its reference). */
void ck_xor_bytes(const uint8_t *a, const uint8_t *b, size_t len, uint8_t *out)
{
	for (size_t i = 0; i < len; i++)
		out[i] = a[i] ^ b[i];
}


/* Elements are little-endian integers put together byte by byte: compilers
 * make plain loads of that on little-endian machines, and the format stays
 * the same on big-endian ones.
 *
 * SUB: d = cur - ref (mod 2^bits), zigzag coded so that -1 is 1, not all
 * ones: zz = (d << 1) ^ (sign of d repeated). */
#define SUB(W, T)                                                              \
static void sub##W(const uint8_t *restrict cur, const uint8_t *restrict ref,   \
		   size_t n, uint8_t *restrict out)                            \
{                                                                              \
	for (size_t i = 0; i < n; i++) {                                       \
		T c = 0, r = 0;                                                \
		for (unsigned b = 0; b < W; b++) {                             \
			c |= (T)cur[i * W + b] << (8 * b);                     \
			r |= (T)ref[i * W + b] << (8 * b);                     \
		}                                                              \
		T d = (T)(c - r);                                              \
		T zz = (T)((T)(d << 1) ^ (T)(0 - (d >> (8 * W - 1))));         \
		for (unsigned b = 0; b < W; b++)                               \
			out[i * W + b] = (uint8_t)(zz >> (8 * b));             \
	}                                                                      \
}

#define ADD(W, T)                                                              \
static void add##W(const uint8_t *restrict zzs, const uint8_t *ref,            \
		   size_t n, uint8_t *out)                                     \
{                                                                              \
	for (size_t i = 0; i < n; i++) {                                       \
		T zz = 0, r = 0;                                               \
		for (unsigned b = 0; b < W; b++) {                             \
			zz |= (T)zzs[i * W + b] << (8 * b);                    \
			r |= (T)ref[i * W + b] << (8 * b);                     \
		}                                                              \
		T d = (T)((T)(zz >> 1) ^ (T)(0 - (zz & 1)));                   \
		T c = (T)(r + d);                                              \
		for (unsigned b = 0; b < W; b++)                               \
			out[i * W + b] = (uint8_t)(c >> (8 * b));              \
	}                                                                      \
}

SUB(1, uint8_t) SUB(2, uint16_t) SUB(4, uint32_t) SUB(8, uint64_t)
ADD(1, uint8_t) ADD(2, uint16_t) ADD(4, uint32_t) ADD(8, uint64_t)

void ck_sub_elems(const uint8_t *cur, const uint8_t *ref, size_t len, unsigned size, uint8_t *out)
{
	size_t n = len / size, body = n * size;

	switch (size) {
	case 1: sub1(cur, ref, n, out); break;
	case 2: sub2(cur, ref, n, out); break;
	case 4: sub4(cur, ref, n, out); break;
	default: sub8(cur, ref, n, out); break;
	}
	ck_xor_bytes(cur + body, ref + body, len - body, out + body);
}

void ck_add_elems(const uint8_t *zz, const uint8_t *ref, size_t len, unsigned size, uint8_t *out)
{
	size_t n = len / size, body = n * size;

	switch (size) {
	case 1: add1(zz, ref, n, out); break;
	case 2: add2(zz, ref, n, out); break;
	case 4: add4(zz, ref, n, out); break;
	default: add8(zz, ref, n, out); break;
	}
	ck_xor_bytes(zz + body, ref + body, len - body, out + body);
}
