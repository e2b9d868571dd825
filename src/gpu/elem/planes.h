/* Byte planes of an XOR delta, one element at a time (device and host):
 * for arrays of nelem elements of size bytes, byte b of element i of
 * cur ^ prev goes to planes[b * nelem + i].  Nearby values share their
 * high bytes, so the planes of a delta between two steps of a tensor are
 * long runs of zeros that zstd compresses.  prev NULL: the planes of cur
 * itself.  unxor is the inverse: cur from planes and prev. */
#ifndef CKPTFS_GPU_ELEM_PLANES_H
#define CKPTFS_GPU_ELEM_PLANES_H

#include <stdint.h>

#include "../hd.h"

CK_HD void ck_elem_planes_xor(uint8_t *planes, const uint8_t *cur, const uint8_t *prev, uint64_t nelem,
			      unsigned size, uint64_t i)
{
	for (unsigned b = 0; b < size; b++) {
		uint8_t x = cur[i * size + b];

		if (prev)
			x ^= prev[i * size + b];
		planes[b * nelem + i] = x;
	}
}

CK_HD void ck_elem_planes_unxor(uint8_t *cur, const uint8_t *planes, const uint8_t *prev, uint64_t nelem,
				unsigned size, uint64_t i)
{
	for (unsigned b = 0; b < size; b++) {
		uint8_t x = planes[b * nelem + i];

		if (prev)
			x ^= prev[i * size + b];
		cur[i * size + b] = x;
	}
}

#endif
