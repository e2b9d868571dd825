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

#define SPLIT(W)                                                               \
static void split##W(const uint8_t *restrict s, size_t n, uint8_t *restrict p) \
{                                                                              \
	for (unsigned k = 0; k < W; k++) {                                     \
		uint8_t *restrict d = p + k * n;                               \
		for (size_t i = 0; i < n; i++)                                 \
			d[i] = s[i * W + k];                                   \
	}                                                                      \
}

static void join2_pair(const uint8_t *restrict p0, const uint8_t *restrict p1, size_t n,
		       uint8_t *restrict d)
{
	for (size_t i = 0; i < n; i++) {
		d[2 * i] = p0[i];
		d[2 * i + 1] = p1[i];
	}
}

/* Wider elements join as a tree of two-way interleaves, a block at a time
 * (each join2 vectorizes; four or eight interleaved streams do not):
 * join2(join2(p0, p2), join2(p1, p3)) puts p0 p1 p2 p3 in order.  Planes
 * are separate pointers, so that a stored plane is joined straight from
 * its payload. */
#define JOIN_BLOCK 2048

/* Elements [i, i + m) (m <= JOIN_BLOCK) of planes p[0..size) into d. */
static void join_block(const uint8_t *const *p, size_t i, size_t m, unsigned size, uint8_t *restrict d)
{
	uint8_t a[4][2 * JOIN_BLOCK], b[2][4 * JOIN_BLOCK];

	switch (size) {
	case 2:
		join2_pair(p[0] + i, p[1] + i, m, d);
		break;
	case 4:
		join2_pair(p[0] + i, p[2] + i, m, a[0]);
		join2_pair(p[1] + i, p[3] + i, m, a[1]);
		join2_pair(a[0], a[1], 2 * m, d);
		break;
	case 8:
		join2_pair(p[0] + i, p[4] + i, m, a[0]);
		join2_pair(p[2] + i, p[6] + i, m, a[1]);
		join2_pair(p[1] + i, p[5] + i, m, a[2]);
		join2_pair(p[3] + i, p[7] + i, m, a[3]);
		join2_pair(a[0], a[1], 2 * m, b[0]);
		join2_pair(a[2], a[3], 2 * m, b[1]);
		join2_pair(b[0], b[1], 4 * m, d);
		break;
	default:
		memcpy(d, p[0] + i, m);
		break;
	}
}

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
	const uint8_t *p[8];
	size_t n = len / size;

	for (unsigned k = 0; k < size; k++)
		p[k] = planes + k * n;
	ck_planes_apply(p, n, size, CK_PLANES_SET, NULL, dst);
}

/* out may be b (a delta decoded over its reference). */
void ck_xor_bytes(const uint8_t *a, const uint8_t *b, size_t len, uint8_t *out)
{
	for (size_t i = 0; i < len; i++)
		out[i] = a[i] ^ b[i];
}


/* SUB (ck_zigzag_sub, chunk_int.h) over n elements. */
#define SUB(W, T)                                                              \
static void sub##W(const uint8_t *restrict cur, const uint8_t *restrict ref,   \
		   size_t n, uint8_t *restrict out)                            \
{                                                                              \
	for (size_t i = 0; i < n; i++)                                         \
		ck_le_store##W(out + i * W, ck_zigzag_sub##W(ck_le_load##W(cur + i * W), \
							     ck_le_load##W(ref + i * W))); \
}

/* out may be ref (a delta decoded over its reference). */
#define ADD(W, T)                                                              \
static void add##W(const uint8_t *restrict zzs, const uint8_t *ref,            \
		   size_t n, uint8_t *out)                                     \
{                                                                              \
	for (size_t i = 0; i < n; i++) {                                       \
		T zz = ck_le_load##W(zzs + i * W);                             \
		T d = (T)((T)(zz >> 1) ^ (T)(0 - (zz & 1)));                   \
		ck_le_store##W(out + i * W, (T)(ck_le_load##W(ref + i * W) + d)); \
	}                                                                      \
}

/* ROT: x rotated left (right) by one bit within its W bytes. */
#define ROT(W, T)                                                              \
static void rotl##W(const uint8_t *restrict src, size_t n, uint8_t *restrict out) \
{                                                                              \
	for (size_t i = 0; i < n; i++)                                         \
		ck_le_store##W(out + i * W, ck_rotl##W(ck_le_load##W(src + i * W))); \
}                                                                              \
static void rotr##W(const uint8_t *restrict src, size_t n, uint8_t *restrict out) \
{                                                                              \
	for (size_t i = 0; i < n; i++) {                                       \
		T x = ck_le_load##W(src + i * W);                              \
		ck_le_store##W(out + i * W, (T)((T)(x >> 1) | (T)(x << (8 * W - 1)))); \
	}                                                                      \
}

SUB(1, uint8_t) SUB(2, uint16_t) SUB(4, uint32_t) SUB(8, uint64_t)
ADD(1, uint8_t) ADD(2, uint16_t) ADD(4, uint32_t) ADD(8, uint64_t)
ROT(1, uint8_t) ROT(2, uint16_t) ROT(4, uint32_t) ROT(8, uint64_t)

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

void ck_rot_elems(const uint8_t *src, size_t len, unsigned size, int right, uint8_t *out)
{
	size_t n = len / size, body = n * size;

	switch (size) {
	case 1: (right ? rotr1 : rotl1)(src, n, out); break;
	case 2: (right ? rotr2 : rotl2)(src, n, out); break;
	case 4: (right ? rotr4 : rotl4)(src, n, out); break;
	default: (right ? rotr8 : rotl8)(src, n, out); break;
	}
	memmove(out + body, src + body, len - body);
}

void ck_planes_apply(const uint8_t *const *planes, size_t n, unsigned size, enum ck_planes_op op,
		     const uint8_t *ref, uint8_t *out)
{
	uint8_t tmp[8 * JOIN_BLOCK];

	for (size_t i = 0; i < n; i += JOIN_BLOCK) {
		size_t m = n - i < JOIN_BLOCK ? n - i : JOIN_BLOCK;
		uint8_t *at = out + i * size;

		if (op == CK_PLANES_SET) {
			join_block(planes, i, m, size, at);
			continue;
		}
		/* The block's elements stay in L1 between the join and the op. */
		join_block(planes, i, m, size, tmp);
		if (op == CK_PLANES_XOR)
			ck_xor_bytes(tmp, ref + i * size, m * size, at);
		else if (op == CK_PLANES_ROTR)
			ck_rot_elems(tmp, m * size, size, 1, at);
		else
			ck_add_elems(tmp, ref + i * size, m * size, size, at);
	}
}
