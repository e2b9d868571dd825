/* The project's kernels by name (src/gpu/kernels/NAME.cu) and their host
 * twins (host_kernels.c): the same per-element code over the same
 * arguments, for the CPU paths and for the fake driver of the tests.
 * Adding a kernel: its element function in elem/, its __global__ in
 * kernels/NAME.cu (extern "C", the name below), its twin and a row in
 * ck_gpu_kernels[]. */
#ifndef CKPTFS_GPU_KERNELS_H
#define CKPTFS_GPU_KERNELS_H

#include <stddef.h>

struct ck_gpu_kernel {
	const char *name;
	unsigned nargs;
	void (*host)(void **args);   /* args as the driver takes them */
};

extern const struct ck_gpu_kernel ck_gpu_kernels[];
extern const size_t ck_gpu_nkernels;

/* The row of kernel name, or NULL. */
const struct ck_gpu_kernel *ck_gpu_kernel_find(const char *name);

/* The device code of every kernel (a fatbin nvcc made at build time;
 * kernels_image.c, generated), or size 0 without nvcc. */
extern const unsigned char ck_gpu_image[];
extern const size_t ck_gpu_image_size;

#endif
