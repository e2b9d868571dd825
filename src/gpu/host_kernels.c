/* Host twins of the project's kernels (kernels.h): each runs the
 * kernel's per-element function over every element, with the kernel's
 * arguments. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "elem/planes.h"
#include "kernels.h"

/* Argument i of a kernel's argument array, of type T. */
#define ARG(T, i) (*(T *)args[i])

static void host_planes_xor(void **args)
{
	uint8_t *planes = ARG(uint8_t *, 0);
	const uint8_t *cur = ARG(const uint8_t *, 1), *prev = ARG(const uint8_t *, 2);
	uint64_t nelem = ARG(unsigned long long, 3);
	unsigned size = ARG(unsigned, 4);

	for (uint64_t i = 0; i < nelem; i++)
		ck_elem_planes_xor(planes, cur, prev, nelem, size, i);
}

static void host_planes_unxor(void **args)
{
	uint8_t *cur = ARG(uint8_t *, 0);
	const uint8_t *planes = ARG(const uint8_t *, 1), *prev = ARG(const uint8_t *, 2);
	uint64_t nelem = ARG(unsigned long long, 3);
	unsigned size = ARG(unsigned, 4);

	for (uint64_t i = 0; i < nelem; i++)
		ck_elem_planes_unxor(cur, planes, prev, nelem, size, i);
}

const struct ck_gpu_kernel ck_gpu_kernels[] = {
	{ "ck_planes_xor", 5, host_planes_xor },
	{ "ck_planes_unxor", 5, host_planes_unxor },
};
const size_t ck_gpu_nkernels = sizeof(ck_gpu_kernels) / sizeof(ck_gpu_kernels[0]);

const struct ck_gpu_kernel *ck_gpu_kernel_find(const char *name)
{
	for (size_t i = 0; i < ck_gpu_nkernels; i++)
		if (!strcmp(ck_gpu_kernels[i].name, name))
			return &ck_gpu_kernels[i];
	return NULL;
}
