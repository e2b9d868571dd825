// XOR byte planes on the device: src/gpu/elem/planes.h one element per
// thread, striding past the grid.
#include <stdint.h>

#include "../elem/planes.h"

extern "C" __global__ void ck_planes_xor(uint8_t *planes, const uint8_t *cur, const uint8_t *prev,
					 unsigned long long nelem, unsigned size)
{
	for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < nelem;
	     i += (unsigned long long)gridDim.x * blockDim.x)
		ck_elem_planes_xor(planes, cur, prev, nelem, size, i);
}

extern "C" __global__ void ck_planes_unxor(uint8_t *cur, const uint8_t *planes, const uint8_t *prev,
					   unsigned long long nelem, unsigned size)
{
	for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < nelem;
	     i += (unsigned long long)gridDim.x * blockDim.x)
		ck_elem_planes_unxor(cur, planes, prev, nelem, size, i);
}
