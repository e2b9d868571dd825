/* The GPU layer (include/ckptfs/gpu.h) against the fake driver
 * (tests/cuda/libcuda.so.1): no driver and no device are -ENODEV; pinned
 * and device memory, streams, events polled until done, copies both
 * ways; each kernel's device path (the fake runs its host twin, so this
 * checks the launch: arguments, grid, names) and host path against a
 * reference computed here, for every element size and with and without a
 * previous version.  On a machine with a GPU, tests/gpu/checks.sh runs the
 * same checks on the real driver (t_gpu with CKPTFS_LIBCUDA unset). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/gpu.h"
#include "testutil.h"

static void no_driver(void)
{
	struct ck_gpu *g = NULL;

	setenv("CKPTFS_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	CHECK(ck_gpu_open(0, &g) == -ENODEV && ck_gpu_count() == 0, "a missing driver is not -ENODEV");
	CHECK(ck_gpu_last_error()[0], "no reason for a missing driver");
}

/* The planes of cur ^ prev as the kernels define them. */
static void reference(uint8_t *out, const uint8_t *cur, const uint8_t *prev, size_t nelem, unsigned size)
{
	for (size_t i = 0; i < nelem; i++)
		for (unsigned b = 0; b < size; b++)
			out[b * nelem + i] = cur[i * size + b] ^ (prev ? prev[i * size + b] : 0);
}

static void kernels(struct ck_gpu *g, int device_code)
{
	static const unsigned sizes[] = { 1, 2, 4, 8 };
	const size_t nelem = 70001;   /* past one block, not a multiple of it */
	uint64_t s, e, dcur, dprev, dout;
	uint8_t *cur, *prev, *want, *got, *back;

	SETUP(ck_gpu_stream_new(g, &s) == 0 && ck_gpu_event_new(g, &e) == 0);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned size = sizes[k];
		size_t n = nelem * size;
		unsigned long long ne = nelem;

		SETUP(ck_gpu_host_alloc(g, n, (void **)&cur) == 0 && ck_gpu_host_alloc(g, n, (void **)&prev) == 0 &&
		      ck_gpu_host_alloc(g, n, (void **)&got) == 0);
		want = malloc(n);
		back = malloc(n);
		SETUP(want && back);
		for (size_t i = 0; i < n; i++) {
			cur[i] = (uint8_t)(i * 2654435761u >> 13);
			prev[i] = (uint8_t)(cur[i] ^ (i % 7 == 0 ? (i >> 3) : 0));
		}
		for (int with_prev = 0; with_prev < 2; with_prev++) {
			const uint8_t *p = with_prev ? prev : NULL;
			void *hargs[] = { &got, &cur, &p, &ne, &size };

			reference(want, cur, p, nelem, size);
			memset(got, 0, n);
			CHECK(ck_gpu_run_host("ck_planes_xor", hargs) == 0 && !memcmp(got, want, n),
			      "host planes of %u-byte elements (prev %d)", size, with_prev);
			if (device_code) {
				uint64_t dp;
				void *dargs[] = { &dout, &dcur, &dp, &ne, &size };

				SETUP(ck_gpu_alloc(g, n, &dcur) == 0 && ck_gpu_alloc(g, n, &dprev) == 0 &&
				      ck_gpu_alloc(g, n, &dout) == 0);
				dp = with_prev ? dprev : 0;
				memset(got, 0, n);
				CHECK(ck_gpu_copy_to_device(g, dcur, cur, n, s) == 0 &&
				      ck_gpu_copy_to_device(g, dprev, prev, n, s) == 0 &&
				      ck_gpu_launch(g, "ck_planes_xor", nelem, dargs, s) == 0 &&
				      ck_gpu_copy_to_host(g, got, dout, n, s) == 0 && ck_gpu_event_record(g, e, s) == 0,
				      "device planes queued: %s", ck_gpu_last_error());
				/* Poll as a worker does (the fake answers "not ready" first). */
				for (int polls = 0; ck_gpu_event_done(g, e) == 0 && polls < 100; polls++)
					;
				CHECK(ck_gpu_event_done(g, e) == 1, "event never done");
				CHECK(!memcmp(got, want, n), "device planes of %u-byte elements (prev %d)", size, with_prev);
				/* And back: unxor of the planes gives cur. */
				{
					void *uargs[] = { &dcur, &dout, &dp, &ne, &size };

					CHECK(ck_gpu_launch(g, "ck_planes_unxor", nelem, uargs, s) == 0 &&
					      ck_gpu_copy_to_host(g, back, dcur, n, s) == 0 && ck_gpu_stream_sync(g, s) == 0 &&
					      !memcmp(back, cur, n), "device unxor of %u-byte elements", size);
				}
				ck_gpu_free(g, dcur);
				ck_gpu_free(g, dprev);
				ck_gpu_free(g, dout);
			}
		}
		ck_gpu_host_free(g, cur);
		ck_gpu_host_free(g, prev);
		ck_gpu_host_free(g, got);
		free(want);
		free(back);
	}
	{
		void *args[] = { NULL };

		CHECK(ck_gpu_run_host("no_such_kernel", args) == -ENOENT, "an unknown kernel ran");
		CHECK(ck_gpu_launch(g, "no_such_kernel", 1, args, s) == -ENOENT, "an unknown kernel launched");
	}
	if (!device_code) {
		void *args[] = { NULL };

		CHECK(ck_gpu_launch(g, "ck_planes_xor", 1, args, s) == -ENOSYS, "launch without device code");
	}
	ck_gpu_event_free(g, e);
	ck_gpu_stream_free(g, s);
}

int main(void)
{
	const char *builddir = getenv("CKPT_BUILDDIR");
	char fake[1024];
	struct ck_gpu *g = NULL;
	size_t free_bytes, total, now = 0, peak = 0;
	void *lib;

	no_driver();
	snprintf(fake, sizeof(fake), "%s/tests/cuda/libcuda.so.1", builddir ? builddir : ".");
	setenv("CKPTFS_LIBCUDA", fake, 1);
	setenv("FAKE_CUDA_DEVICES", "0", 1);
	CHECK(ck_gpu_open(0, &g) == -ENODEV, "no device is not -ENODEV");
	setenv("FAKE_CUDA_DEVICES", "2", 1);
	setenv("FAKE_CUDA_NOT_READY", "3", 1);
	CHECK(ck_gpu_count() == 2, "devices: %d", ck_gpu_count());
	CHECK(ck_gpu_open(2, &g) == -ENODEV, "device 2 of 2 opened");
	SETUP(ck_gpu_open(1, &g) == 0);
	CHECK(!strcmp(ck_gpu_name(g), "Fake GPU"), "name '%s'", ck_gpu_name(g));
	CHECK(ck_gpu_mem_info(g, &free_bytes, &total) == 0 && total && free_bytes <= total, "memory info");
	kernels(g, ck_gpu_has_kernels(g));
	printf("device code in this build: %s\n", ck_gpu_has_kernels(g) ? "yes" : "no (nvcc not found)");
	lib = dlopen(fake, RTLD_NOW);   /* the driver ck_gpu_open loaded, kept past its close */
	ck_gpu_close(g);
	/* Everything made was given back: no device bytes, no pinned bytes. */
	if (lib) {
		void (*pinned)(size_t *, size_t *) = (void (*)(size_t *, size_t *))dlsym(lib, "fake_cuda_pinned");
		size_t (*dev)(void) = (size_t (*)(void))dlsym(lib, "fake_cuda_device_bytes");

		SETUP(pinned && dev);
		pinned(&now, &peak);
		CHECK(now == 0 && dev() == 0, "left allocated: %zu pinned, %zu device bytes", now, dev());
		CHECK(peak > 0, "nothing was pinned");
		dlclose(lib);
	}
	return test_result();
}
