/* A fake CUDA driver (libcuda.so.1) for the tests: the functions of
 * src/gpu/cuda_api.h over host memory.  Device memory is malloc'd and a
 * CUdeviceptr is its address; copies happen at once (a stream is always
 * done); a kernel launch runs the kernel's host twin (src/gpu/kernels.h)
 * on those addresses, so the project's GPU paths run end to end on a
 * machine without a GPU.
 *
 * Set by the environment:
 *   FAKE_CUDA_DEVICES=N     devices (default 1; 0: cuInit says no device)
 *   FAKE_CUDA_NOT_READY=N   an event reports not ready N times before done,
 *                           so callers' polling paths run
 * For the tests (dlsym): fake_cuda_pinned(&now, &peak) gives the pinned
 * host bytes, fake_cuda_device_bytes() the device bytes still allocated,
 * fake_cuda_launches() the kernels launched. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda_api.h"
#include "gpu/kernels.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t pinned_now, pinned_peak, device_now;
static unsigned long launches;

/* Sizes of the blocks handed out, kept in front of them. */
#define HDR 64

static void *take(size_t n, size_t *counter)
{
	char *p = malloc(n + HDR);

	if (!p)
		return NULL;
	memcpy(p, &n, sizeof(n));
	pthread_mutex_lock(&lock);
	*counter += n;
	if (counter == &pinned_now && pinned_now > pinned_peak)
		pinned_peak = pinned_now;
	pthread_mutex_unlock(&lock);
	return p + HDR;
}

static void give(void *q, size_t *counter)
{
	char *p = (char *)q - HDR;
	size_t n;

	memcpy(&n, p, sizeof(n));
	pthread_mutex_lock(&lock);
	*counter -= n;
	pthread_mutex_unlock(&lock);
	free(p);
}

static int devices(void)
{
	const char *s = getenv("FAKE_CUDA_DEVICES");

	return s ? atoi(s) : 1;
}

void fake_cuda_pinned(size_t *now, size_t *peak);
void fake_cuda_pinned(size_t *now, size_t *peak)
{
	pthread_mutex_lock(&lock);
	*now = pinned_now;
	*peak = pinned_peak;
	pthread_mutex_unlock(&lock);
}

size_t fake_cuda_device_bytes(void);
size_t fake_cuda_device_bytes(void)
{
	return device_now;
}

unsigned long fake_cuda_launches(void);
unsigned long fake_cuda_launches(void)
{
	return launches;
}

CUresult cuInit(unsigned int flags)
{
	(void)flags;
	return devices() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
	*str = error == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "fake CUDA error";
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	*count = devices();
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (ordinal < 0 || ordinal >= devices())
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	(void)dev;
	strncpy(name, "Fake GPU", (size_t)len);
	name[len - 1] = '\0';
	return CUDA_SUCCESS;
}

static int context;

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	(void)dev;
	*ctx = (CUcontext)&context;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	(void)dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	return ctx == (CUcontext)&context ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	*total = (size_t)16 << 30;
	*free_bytes = *total - device_now;
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	void *p = take(bytesize, &device_now);

	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	give((void *)(uintptr_t)dptr, &device_now);
	return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	(void)flags;
	*pp = take(bytesize, &pinned_now);
	return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p)
{
	give(p, &pinned_now);
	return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
	(void)p;
	(void)flags;
	pthread_mutex_lock(&lock);
	pinned_now += bytesize;
	if (pinned_now > pinned_peak)
		pinned_peak = pinned_now;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p)
{
	(void)p;
	return CUDA_SUCCESS;   /* the bytes registered are not known here: the peak is what tests use */
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream stream)
{
	(void)stream;
	memcpy(dst, (const void *)(uintptr_t)src, bytes);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream)
{
	(void)stream;
	memcpy((void *)(uintptr_t)dst, src, bytes);
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	(void)flags;
	*stream = malloc(1);
	return *stream ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuStreamDestroy_v2(CUstream stream)
{
	free(stream);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream)
{
	(void)stream;
	return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
	(void)stream;
	(void)event;
	(void)flags;
	return CUDA_SUCCESS;
}

/* An event: how many more queries answer "not ready". */
struct CUevent_st {
	int not_ready;
};

CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
	(void)flags;
	*event = calloc(1, sizeof(**event));
	return *event ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent event, CUstream stream)
{
	const char *s = getenv("FAKE_CUDA_NOT_READY");

	(void)stream;
	event->not_ready = s ? atoi(s) : 0;
	return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event)
{
	if (event->not_ready > 0) {
		event->not_ready--;
		return CUDA_ERROR_NOT_READY;
	}
	return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent event)
{
	event->not_ready = 0;
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent event)
{
	free(event);
	return CUDA_SUCCESS;
}

static int module;

CUresult cuModuleLoadData(CUmodule *mod, const void *image)
{
	if (!image)
		return CUDA_ERROR_INVALID_IMAGE;
	*mod = (CUmodule)&module;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule mod)
{
	(void)mod;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *func, CUmodule mod, const char *name)
{
	const struct ck_gpu_kernel *k = ck_gpu_kernel_find(name);

	(void)mod;
	if (!k)
		return CUDA_ERROR_NOT_FOUND;
	*func = (CUfunction)(uintptr_t)k;
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
			unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedMemBytes,
			CUstream stream, void **kernelParams, void **extra)
{
	const struct ck_gpu_kernel *k = (const struct ck_gpu_kernel *)(uintptr_t)f;

	(void)gridY;
	(void)gridZ;
	(void)blockY;
	(void)blockZ;
	(void)sharedMemBytes;
	(void)stream;
	if (!gridX || !blockX || !kernelParams || extra)
		return CUDA_ERROR_INVALID_VALUE;
	k->host(kernelParams);
	pthread_mutex_lock(&lock);
	launches++;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}
