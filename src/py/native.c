/* What the Python package asks of the library itself (native.h). */
#include "config.h"

#include "ckptfs/gpu.h"
#include "native.h"

const char *ckpy_version(void)
{
	return PACKAGE_VERSION;
}

int ckpy_gpu_count(void)
{
	return ck_gpu_count();
}

int ckpy_gpu_has_kernels(void)
{
	struct ck_gpu *g;
	int has = 0;

	if (ck_gpu_open(0, &g) == 0) {
		has = ck_gpu_has_kernels(g);
		ck_gpu_close(g);
	}
	return has;
}
