/* CK_HD marks a per-element function that nvcc compiles for the device
 * (inside the project's kernels) and a C compiler compiles for the host
 * (their host twins, the CPU paths and the tests). */
#ifndef CKPTFS_GPU_HD_H
#define CKPTFS_GPU_HD_H

#ifdef __CUDACC__
#define CK_HD static __host__ __device__ __forceinline__
#else
#define CK_HD static inline
#endif

#endif
