/* The CUDA driver, loaded with dlopen (include/ckptfs/gpu.h).
 *
 * Nothing links the driver: a machine without one runs the same code,
 * and the tests load a fake library by the same soname
 * (tests/cuda/fake_cuda.c, named by CKPTFS_LIBCUDA).  The kernels' device
 * code is a fatbin embedded at build time (kernels_image.c), loaded as a
 * module once per struct ck_gpu. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/gpu.h"
#include "cuda_api.h"
#include "kernels.h"

#define DRIVER_SONAME "libcuda.so.1"
#define BLOCK 256u
#define MAX_GRID 65535u

struct cuda_fns {
	__typeof__(cuInit) *init;
	__typeof__(cuGetErrorString) *error_string;
	__typeof__(cuDeviceGetCount) *device_count;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDeviceGetName) *device_name;
	__typeof__(cuDevicePrimaryCtxRetain) *ctx_retain;
	__typeof__(cuDevicePrimaryCtxRelease_v2) *ctx_release;
	__typeof__(cuCtxSetCurrent) *ctx_set;
	__typeof__(cuMemGetInfo_v2) *mem_info;
	__typeof__(cuMemAlloc_v2) *mem_alloc;
	__typeof__(cuMemFree_v2) *mem_free;
	__typeof__(cuMemHostAlloc) *host_alloc;
	__typeof__(cuMemFreeHost) *host_free;
	__typeof__(cuMemHostRegister_v2) *host_register;
	__typeof__(cuMemHostUnregister) *host_unregister;
	__typeof__(cuMemcpyDtoHAsync_v2) *copy_d2h;
	__typeof__(cuMemcpyHtoDAsync_v2) *copy_h2d;
	__typeof__(cuStreamCreate) *stream_create;
	__typeof__(cuStreamDestroy_v2) *stream_destroy;
	__typeof__(cuStreamSynchronize) *stream_sync;
	__typeof__(cuStreamWaitEvent) *stream_wait;
	__typeof__(cuEventCreate) *event_create;
	__typeof__(cuEventRecord) *event_record;
	__typeof__(cuEventQuery) *event_query;
	__typeof__(cuEventSynchronize) *event_sync;
	__typeof__(cuEventDestroy_v2) *event_destroy;
	__typeof__(cuModuleLoadData) *module_load;
	__typeof__(cuModuleUnload) *module_unload;
	__typeof__(cuModuleGetFunction) *module_function;
	__typeof__(cuLaunchKernel) *launch;
};

struct ck_gpu {
	void *lib;
	struct cuda_fns fn;
	CUdevice dev;
	CUcontext ctx;
	CUmodule module;        /* NULL without device code */
	CUfunction *funcs;      /* per row of ck_gpu_kernels, resolved on first use */
	pthread_mutex_t lock;   /* funcs */
	char name[128];
};

static __thread char last_error[160];

static int fail(const struct ck_gpu *g, CUresult r, const char *what)
{
	const char *s = NULL;

	if (g && g->fn.error_string)
		g->fn.error_string(r, &s);
	snprintf(last_error, sizeof(last_error), "%s: %s (%d)", what, s ? s : "CUDA error", r);
	if (r == CUDA_ERROR_OUT_OF_MEMORY)
		return -ENOMEM;
	if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE || r == CUDA_ERROR_NOT_INITIALIZED)
		return -ENODEV;
	return -EIO;
}

const char *ck_gpu_last_error(void)
{
	return last_error;
}

/* Every function resolved, or -ENODEV (an old or foreign library). */
static int resolve(void *lib, struct cuda_fns *fn)
{
	struct {
		void **slot;
		const char *name;
	} const want[] = {
#define FN(field, sym) { (void **)&fn->field, #sym }
		FN(init, cuInit), FN(error_string, cuGetErrorString), FN(device_count, cuDeviceGetCount),
		FN(device_get, cuDeviceGet), FN(device_name, cuDeviceGetName),
		FN(ctx_retain, cuDevicePrimaryCtxRetain), FN(ctx_release, cuDevicePrimaryCtxRelease_v2),
		FN(ctx_set, cuCtxSetCurrent), FN(mem_info, cuMemGetInfo_v2), FN(mem_alloc, cuMemAlloc_v2),
		FN(mem_free, cuMemFree_v2), FN(host_alloc, cuMemHostAlloc), FN(host_free, cuMemFreeHost),
		FN(host_register, cuMemHostRegister_v2), FN(host_unregister, cuMemHostUnregister),
		FN(copy_d2h, cuMemcpyDtoHAsync_v2), FN(copy_h2d, cuMemcpyHtoDAsync_v2),
		FN(stream_create, cuStreamCreate), FN(stream_destroy, cuStreamDestroy_v2),
		FN(stream_sync, cuStreamSynchronize), FN(stream_wait, cuStreamWaitEvent),
		FN(event_create, cuEventCreate), FN(event_record, cuEventRecord), FN(event_query, cuEventQuery),
		FN(event_sync, cuEventSynchronize), FN(event_destroy, cuEventDestroy_v2),
		FN(module_load, cuModuleLoadData), FN(module_unload, cuModuleUnload),
		FN(module_function, cuModuleGetFunction), FN(launch, cuLaunchKernel),
#undef FN
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		*want[i].slot = dlsym(lib, want[i].name);
		if (!*want[i].slot) {
			snprintf(last_error, sizeof(last_error), "%s lacks %s", DRIVER_SONAME, want[i].name);
			return -ENODEV;
		}
	}
	return 0;
}

static void *load_driver(void)
{
	const char *name = getenv("CKPTFS_LIBCUDA");
	void *lib = dlopen(name && *name ? name : DRIVER_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!lib)
		snprintf(last_error, sizeof(last_error), "%s", dlerror());
	return lib;
}

int ck_gpu_count(void)
{
	struct cuda_fns fn;
	void *lib = load_driver();
	int n = 0;

	if (lib && resolve(lib, &fn) == 0 && fn.init(0) == CUDA_SUCCESS && fn.device_count(&n) != CUDA_SUCCESS)
		n = 0;
	if (lib)
		dlclose(lib);
	return n;
}

int ck_gpu_open(int device, struct ck_gpu **out)
{
	struct ck_gpu *g = calloc(1, sizeof(*g));
	CUresult r;
	int rc;

	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->lock, NULL);
	g->lib = load_driver();
	rc = g->lib ? resolve(g->lib, &g->fn) : -ENODEV;
	if (rc == 0 && (r = g->fn.init(0)) != CUDA_SUCCESS)
		rc = fail(g, r, "cuInit");
	if (rc == 0 && (r = g->fn.device_get(&g->dev, device)) != CUDA_SUCCESS)
		rc = fail(g, r, "cuDeviceGet");
	if (rc == 0 && (r = g->fn.ctx_retain(&g->ctx, g->dev)) != CUDA_SUCCESS)
		rc = fail(g, r, "cuDevicePrimaryCtxRetain");
	else if (rc == 0 && g->fn.device_name(g->name, (int)sizeof(g->name), g->dev) != CUDA_SUCCESS)
		g->name[0] = '\0';
	if (rc == 0 && !(g->funcs = calloc(ck_gpu_nkernels, sizeof(*g->funcs))))
		rc = -ENOMEM;
	if (rc == 0 && ck_gpu_image_size && (r = g->fn.ctx_set(g->ctx)) == CUDA_SUCCESS &&
	    (r = g->fn.module_load(&g->module, ck_gpu_image)) != CUDA_SUCCESS) {
		/* No code for this device (too old, or too new for the PTX): the
		 * host paths still work. */
		fail(g, r, "cuModuleLoadData");
		g->module = NULL;
	}
	if (rc) {
		ck_gpu_close(g);
		return rc;
	}
	*out = g;
	return 0;
}

void ck_gpu_close(struct ck_gpu *g)
{
	if (!g)
		return;
	if (g->module && g->fn.ctx_set(g->ctx) == CUDA_SUCCESS)
		g->fn.module_unload(g->module);
	if (g->ctx)
		g->fn.ctx_release(g->dev);
	if (g->lib)
		dlclose(g->lib);
	free(g->funcs);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

const char *ck_gpu_name(const struct ck_gpu *g)
{
	return g->name;
}

int ck_gpu_has_kernels(const struct ck_gpu *g)
{
	return g->module != NULL;
}

/* The context current on this thread: every call starts with it. */
static int current(struct ck_gpu *g)
{
	CUresult r = g->fn.ctx_set(g->ctx);

	return r == CUDA_SUCCESS ? 0 : fail(g, r, "cuCtxSetCurrent");
}

#define CALL(g, what, expr)                                                    \
	do {                                                                   \
		CUresult r_;                                                   \
		int rc_ = current(g);                                          \
		if (rc_)                                                       \
			return rc_;                                            \
		if ((r_ = (expr)) != CUDA_SUCCESS)                             \
			return fail(g, r_, what);                              \
		return 0;                                                      \
	} while (0)

int ck_gpu_host_alloc(struct ck_gpu *g, size_t n, void **p)
{
	CALL(g, "cuMemHostAlloc", g->fn.host_alloc(p, n ? n : 1, CU_MEMHOSTALLOC_PORTABLE));
}

void ck_gpu_host_free(struct ck_gpu *g, void *p)
{
	if (p && current(g) == 0)
		g->fn.host_free(p);
}

int ck_gpu_host_register(struct ck_gpu *g, void *p, size_t n)
{
	CALL(g, "cuMemHostRegister", g->fn.host_register(p, n, CU_MEMHOSTREGISTER_PORTABLE));
}

void ck_gpu_host_unregister(struct ck_gpu *g, void *p)
{
	if (p && current(g) == 0)
		g->fn.host_unregister(p);
}

int ck_gpu_alloc(struct ck_gpu *g, size_t n, uint64_t *dev)
{
	CUdeviceptr d = 0;
	int rc = current(g);
	CUresult r;

	if (rc)
		return rc;
	r = g->fn.mem_alloc(&d, n ? n : 1);
	if (r != CUDA_SUCCESS)
		return fail(g, r, "cuMemAlloc");
	*dev = d;
	return 0;
}

void ck_gpu_free(struct ck_gpu *g, uint64_t dev)
{
	if (dev && current(g) == 0)
		g->fn.mem_free(dev);
}

int ck_gpu_mem_info(struct ck_gpu *g, size_t *free_bytes, size_t *total_bytes)
{
	CALL(g, "cuMemGetInfo", g->fn.mem_info(free_bytes, total_bytes));
}

int ck_gpu_stream_new(struct ck_gpu *g, uint64_t *stream)
{
	CUstream s = NULL;
	int rc = current(g);
	CUresult r;

	if (rc)
		return rc;
	r = g->fn.stream_create(&s, CU_STREAM_NON_BLOCKING);
	if (r != CUDA_SUCCESS)
		return fail(g, r, "cuStreamCreate");
	*stream = (uint64_t)(uintptr_t)s;
	return 0;
}

void ck_gpu_stream_free(struct ck_gpu *g, uint64_t stream)
{
	if (stream && current(g) == 0)
		g->fn.stream_destroy((CUstream)(uintptr_t)stream);
}

int ck_gpu_stream_sync(struct ck_gpu *g, uint64_t stream)
{
	CALL(g, "cuStreamSynchronize", g->fn.stream_sync((CUstream)(uintptr_t)stream));
}

int ck_gpu_stream_wait(struct ck_gpu *g, uint64_t stream, uint64_t event)
{
	CALL(g, "cuStreamWaitEvent", g->fn.stream_wait((CUstream)(uintptr_t)stream, (CUevent)(uintptr_t)event, 0));
}

int ck_gpu_event_new(struct ck_gpu *g, uint64_t *event)
{
	CUevent e = NULL;
	int rc = current(g);
	CUresult r;

	if (rc)
		return rc;
	r = g->fn.event_create(&e, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS)
		return fail(g, r, "cuEventCreate");
	*event = (uint64_t)(uintptr_t)e;
	return 0;
}

void ck_gpu_event_free(struct ck_gpu *g, uint64_t event)
{
	if (event && current(g) == 0)
		g->fn.event_destroy((CUevent)(uintptr_t)event);
}

int ck_gpu_event_record(struct ck_gpu *g, uint64_t event, uint64_t stream)
{
	CALL(g, "cuEventRecord", g->fn.event_record((CUevent)(uintptr_t)event, (CUstream)(uintptr_t)stream));
}

int ck_gpu_event_done(struct ck_gpu *g, uint64_t event)
{
	int rc = current(g);
	CUresult r;

	if (rc)
		return rc;
	r = g->fn.event_query((CUevent)(uintptr_t)event);
	if (r == CUDA_SUCCESS)
		return 1;
	return r == CUDA_ERROR_NOT_READY ? 0 : fail(g, r, "cuEventQuery");
}

int ck_gpu_event_sync(struct ck_gpu *g, uint64_t event)
{
	CALL(g, "cuEventSynchronize", g->fn.event_sync((CUevent)(uintptr_t)event));
}

int ck_gpu_copy_to_host(struct ck_gpu *g, void *dst, uint64_t src, size_t n, uint64_t stream)
{
	CALL(g, "cuMemcpyDtoHAsync", g->fn.copy_d2h(dst, src, n, (CUstream)(uintptr_t)stream));
}

int ck_gpu_copy_to_device(struct ck_gpu *g, uint64_t dst, const void *src, size_t n, uint64_t stream)
{
	CALL(g, "cuMemcpyHtoDAsync", g->fn.copy_h2d(dst, src, n, (CUstream)(uintptr_t)stream));
}

/* Kernel row k's function in the module, resolved once. */
static int function(struct ck_gpu *g, size_t k, CUfunction *f)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&g->lock);
	if (!g->funcs[k])
		r = g->fn.module_function(&g->funcs[k], g->module, ck_gpu_kernels[k].name);
	*f = g->funcs[k];
	pthread_mutex_unlock(&g->lock);
	return r == CUDA_SUCCESS ? 0 : fail(g, r, ck_gpu_kernels[k].name);
}

int ck_gpu_launch(struct ck_gpu *g, const char *kernel, uint64_t nthreads, void **args, uint64_t stream)
{
	const struct ck_gpu_kernel *k = ck_gpu_kernel_find(kernel);
	uint64_t blocks = (nthreads + BLOCK - 1) / BLOCK;
	CUfunction f;
	CUresult r;
	int rc;

	if (!k)
		return -ENOENT;
	if (!g->module)
		return -ENOSYS;
	rc = current(g);
	if (rc == 0)
		rc = function(g, (size_t)(k - ck_gpu_kernels), &f);
	if (rc)
		return rc;
	r = g->fn.launch(f, (unsigned)(blocks > MAX_GRID ? MAX_GRID : blocks ? blocks : 1), 1, 1, BLOCK, 1, 1, 0,
			 (CUstream)(uintptr_t)stream, args, NULL);
	return r == CUDA_SUCCESS ? 0 : fail(g, r, kernel);
}

int ck_gpu_run_host(const char *kernel, void **args)
{
	const struct ck_gpu_kernel *k = ck_gpu_kernel_find(kernel);

	if (!k)
		return -ENOENT;
	k->host(args);
	return 0;
}
