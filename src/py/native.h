/* The C API of the Python package (python/ckptfs/_native.py loads
 * libckptfs-py.so with ctypes): plain C types only, every function
 * named ckpy_* and exported (exports.map); everything else in the library
 * stays hidden.  Each module's functions are declared in its own header
 * beside this one.  Errors are -errno, as in the core. */
#ifndef CKPTFS_PY_NATIVE_H
#define CKPTFS_PY_NATIVE_H

#define CKPY_API __attribute__((visibility("default")))

/* The library's version ("0.1.0"), the package's to compare with. */
CKPY_API const char *ckpy_version(void);
/* How many GPUs the CUDA driver sees (0 without one), and whether this
 * build has device code for the kernels (1) or runs their host twins (0). */
CKPY_API int ckpy_gpu_count(void);
CKPY_API int ckpy_gpu_has_kernels(void);

#endif
