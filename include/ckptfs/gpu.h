/* The GPU, through the CUDA driver loaded at run time (src/gpu): pinned
 * host memory, device memory, streams, events, asynchronous copies and
 * the project's own kernels (src/gpu/kernels, built by nvcc when
 * configure finds the toolkit).  Nothing links the driver: a machine
 * without one runs the same code, ck_gpu_open reports -ENODEV, and
 * callers take their host path, which runs the same per-element code
 * (src/gpu/elem, ck_gpu_run_host).  The tests load a fake driver by the
 * same soname (tests/cuda/fake_cuda.c) whose device memory is host
 * memory and whose kernels are those host twins.
 *
 * Device pointers are CUdeviceptr values (uint64_t); streams may be the
 * project's (ck_gpu_stream_new) or another library's (torch's
 * current_stream().cuda_stream), passed as a uint64_t handle: both use the
 * device's primary context, the one the CUDA runtime uses.
 *
 * Thread rules: a struct ck_gpu may be used by any number of threads at
 * once (the driver's own rules: one stream is ordered, several run
 * concurrently); each call makes the context current on the calling
 * thread.  Errors are -errno: -ENODEV (no driver, no device), -ENOMEM,
 * -ENOSYS (a kernel this build has no device code for), -EIO (anything
 * else the driver says; ck_gpu_last_error names it).
 */
#ifndef CKPTFS_GPU_H
#define CKPTFS_GPU_H

#include <stddef.h>
#include <stdint.h>

struct ck_gpu;

/* The driver loaded (CKPTFS_LIBCUDA names another library, for tests),
 * initialised, and device's primary context retained.  0, -ENODEV (no
 * driver library, no such device), -EIO. */
int ck_gpu_open(int device, struct ck_gpu **out);
/* Releases what ck_gpu_open took and every module; streams, events and
 * memory the caller made must be freed first.  NULL is accepted. */
void ck_gpu_close(struct ck_gpu *g);
/* How many devices the driver sees (0 without a driver). */
int ck_gpu_count(void);
/* The device's name ("NVIDIA H200"), or "". */
const char *ck_gpu_name(const struct ck_gpu *g);
/* Whether this build holds device code for the project's kernels (nvcc
 * found at configure time): without it ck_gpu_launch is -ENOSYS. */
int ck_gpu_has_kernels(const struct ck_gpu *g);
/* The driver's last error on this thread, as text ("" when none). */
const char *ck_gpu_last_error(void);

/* ---- memory ---- */
int ck_gpu_host_alloc(struct ck_gpu *g, size_t n, void **p);   /* pinned */
void ck_gpu_host_free(struct ck_gpu *g, void *p);
int ck_gpu_host_register(struct ck_gpu *g, void *p, size_t n); /* pin memory already there */
void ck_gpu_host_unregister(struct ck_gpu *g, void *p);
int ck_gpu_alloc(struct ck_gpu *g, size_t n, uint64_t *dev);
void ck_gpu_free(struct ck_gpu *g, uint64_t dev);
/* Free and total device memory, bytes. */
int ck_gpu_mem_info(struct ck_gpu *g, size_t *free_bytes, size_t *total_bytes);

/* ---- streams and events ---- */
/* A non-blocking stream of its own (does not wait for the default one). */
int ck_gpu_stream_new(struct ck_gpu *g, uint64_t *stream);
void ck_gpu_stream_free(struct ck_gpu *g, uint64_t stream);
int ck_gpu_stream_sync(struct ck_gpu *g, uint64_t stream);
/* Work queued on stream after this waits for event. */
int ck_gpu_stream_wait(struct ck_gpu *g, uint64_t stream, uint64_t event);
int ck_gpu_event_new(struct ck_gpu *g, uint64_t *event);
void ck_gpu_event_free(struct ck_gpu *g, uint64_t event);
int ck_gpu_event_record(struct ck_gpu *g, uint64_t event, uint64_t stream);
/* 1 when the work before the event is done, 0 while it is not, -errno. */
int ck_gpu_event_done(struct ck_gpu *g, uint64_t event);
int ck_gpu_event_sync(struct ck_gpu *g, uint64_t event);

/* ---- copies (queued on stream; host memory should be pinned) ---- */
int ck_gpu_copy_to_host(struct ck_gpu *g, void *dst, uint64_t src, size_t n, uint64_t stream);
int ck_gpu_copy_to_device(struct ck_gpu *g, uint64_t dst, const void *src, size_t n, uint64_t stream);

/* ---- kernels ----
 * Each kernel of src/gpu/kernels takes its arguments as the driver does:
 * args[i] points at the i-th argument's value (device pointers as
 * uint64_t).  nthreads: how many elements it covers (the grid is sized
 * from it; kernels stride past the grid). */
int ck_gpu_launch(struct ck_gpu *g, const char *kernel, uint64_t nthreads, void **args, uint64_t stream);
/* The same kernel run on the CPU, on host pointers: its per-element code
 * compiled for the host.  0, or -ENOENT for an unknown kernel. */
int ck_gpu_run_host(const char *kernel, void **args);

#endif
