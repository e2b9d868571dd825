/* GPU samples from NVML, loaded with dlopen (include/ckptfs/health.h).
 *
 * Nothing links NVML: a machine without the NVIDIA driver runs the same
 * binary, and the tests load a fake library by the same soname. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/health.h"
#include "health/nvml_api.h"

/* The functions used, resolved from the library.  The first group is
 * required; the others are used where the library has them. */
struct nvml_fns {
	__typeof__(nvmlInit_v2) *init;
	__typeof__(nvmlShutdown) *shutdown;
	__typeof__(nvmlDeviceGetCount_v2) *count;
	__typeof__(nvmlDeviceGetHandleByIndex_v2) *handle;
	__typeof__(nvmlDeviceGetTemperature) *temperature;
	__typeof__(nvmlDeviceGetPowerUsage) *power;
	__typeof__(nvmlDeviceGetUtilizationRates) *utilization;
	__typeof__(nvmlDeviceGetMemoryInfo) *memory;
	__typeof__(nvmlErrorString) *error_string;
	__typeof__(nvmlSystemGetDriverVersion) *driver;
	__typeof__(nvmlDeviceGetName) *name;
	__typeof__(nvmlDeviceGetUUID) *uuid;
	__typeof__(nvmlDeviceGetTotalEccErrors) *ecc;
	__typeof__(nvmlEventSetCreate) *event_set_create;
	__typeof__(nvmlDeviceRegisterEvents) *register_events;
	__typeof__(nvmlEventSetWait_v2) *event_wait;
	__typeof__(nvmlEventSetFree) *event_set_free;
};

struct nvml_gpu {
	nvmlDevice_t dev;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	int have_prev;                  /* a successful sample before: the ECC baseline */
	int64_t prev_ecc_uncorrected;
	uint64_t xid_pending;           /* events taken, not yet in a sample */
	uint64_t last_xid;
};

struct ck_nvml {
	void *lib;
	struct nvml_fns fn;
	int initialised;
	nvmlEventSet_t events;          /* NULL: no XID events */
	char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	unsigned ngpus;
	struct nvml_gpu *gpus;
};

static const char *nvml_strerror(const struct ck_nvml *nv, nvmlReturn_t r)
{
	const char *s = nv->fn.error_string ? nv->fn.error_string(r) : NULL;

	return s ? s : "unknown NVML error";
}

/* dlsym into a function pointer without the object/function pointer cast
 * that ISO C leaves undefined (POSIX guarantees the representation). */
static void *sym(void *lib, const char *name, void *fnp, size_t size)
{
	void *p = dlsym(lib, name);

	memcpy(fnp, &p, size);
	return p;
}

#define SYM(field, name) sym(nv->lib, name, &nv->fn.field, sizeof(nv->fn.field))

static int resolve(struct ck_nvml *nv, const char *lib, struct ck_error *err)
{
	const char *missing = NULL;

	if (!SYM(init, "nvmlInit_v2"))
		missing = "nvmlInit_v2";
	else if (!SYM(shutdown, "nvmlShutdown"))
		missing = "nvmlShutdown";
	else if (!SYM(count, "nvmlDeviceGetCount_v2"))
		missing = "nvmlDeviceGetCount_v2";
	else if (!SYM(handle, "nvmlDeviceGetHandleByIndex_v2"))
		missing = "nvmlDeviceGetHandleByIndex_v2";
	else if (!SYM(temperature, "nvmlDeviceGetTemperature"))
		missing = "nvmlDeviceGetTemperature";
	else if (!SYM(power, "nvmlDeviceGetPowerUsage"))
		missing = "nvmlDeviceGetPowerUsage";
	else if (!SYM(utilization, "nvmlDeviceGetUtilizationRates"))
		missing = "nvmlDeviceGetUtilizationRates";
	else if (!SYM(memory, "nvmlDeviceGetMemoryInfo"))
		missing = "nvmlDeviceGetMemoryInfo";
	if (missing)
		return ck_fail(err, ENOENT, "%s: no %s", lib, missing);
	SYM(error_string, "nvmlErrorString");
	SYM(driver, "nvmlSystemGetDriverVersion");
	SYM(name, "nvmlDeviceGetName");
	SYM(uuid, "nvmlDeviceGetUUID");
	SYM(ecc, "nvmlDeviceGetTotalEccErrors");
	if (!SYM(event_set_create, "nvmlEventSetCreate") || !SYM(register_events, "nvmlDeviceRegisterEvents") ||
	    !SYM(event_wait, "nvmlEventSetWait_v2") || !SYM(event_set_free, "nvmlEventSetFree"))
		nv->fn.event_set_create = NULL;
	return 0;
}

/* Registers every GPU that supports them for XID critical errors; without
 * any, the event set goes (ECC counters still count). */
static void open_events(struct ck_nvml *nv)
{
	int any = 0;

	if (!nv->fn.event_set_create || nv->fn.event_set_create(&nv->events) != NVML_SUCCESS) {
		nv->events = NULL;
		return;
	}
	for (unsigned i = 0; i < nv->ngpus; i++)
		if (nv->fn.register_events(nv->gpus[i].dev, nvmlEventTypeXidCriticalError, nv->events) == NVML_SUCCESS)
			any = 1;
	if (!any) {
		nv->fn.event_set_free(nv->events);
		nv->events = NULL;
	}
}

int ck_nvml_open(const char *lib, struct ck_nvml **out, struct ck_error *err)
{
	struct ck_nvml *nv;
	unsigned count = 0;
	nvmlReturn_t r;
	int rc;

	*out = NULL;
	if (!lib)
		lib = CK_NVML_LIBRARY;
	nv = calloc(1, sizeof(*nv));
	if (!nv)
		return ck_fail(err, ENOMEM, "out of memory");
	nv->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!nv->lib) {
		const char *why = dlerror();

		free(nv);
		return ck_fail(err, ENOENT, "%s", why ? why : lib);
	}
	rc = resolve(nv, lib, err);
	if (rc)
		goto fail;
	r = nv->fn.init();
	if (r != NVML_SUCCESS) {
		rc = ck_fail(err, ENODEV, "nvmlInit: %s", nvml_strerror(nv, r));
		goto fail;
	}
	nv->initialised = 1;
	r = nv->fn.count(&count);
	if (r != NVML_SUCCESS || count == 0) {
		rc = ck_fail(err, ENODEV, "nvmlDeviceGetCount: %s",
			     r != NVML_SUCCESS ? nvml_strerror(nv, r) : "no GPU");
		goto fail;
	}
	nv->gpus = calloc(count, sizeof(*nv->gpus));
	if (!nv->gpus) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto fail;
	}
	nv->ngpus = count;
	for (unsigned i = 0; i < count; i++) {
		struct nvml_gpu *g = &nv->gpus[i];

		r = nv->fn.handle(i, &g->dev);
		if (r != NVML_SUCCESS) {
			rc = ck_fail(err, EIO, "nvmlDeviceGetHandleByIndex(%u): %s", i, nvml_strerror(nv, r));
			goto fail;
		}
		if (!nv->fn.name || nv->fn.name(g->dev, g->name, sizeof(g->name)) != NVML_SUCCESS)
			g->name[0] = '\0';
		if (!nv->fn.uuid || nv->fn.uuid(g->dev, g->uuid, sizeof(g->uuid)) != NVML_SUCCESS)
			g->uuid[0] = '\0';
		g->name[sizeof(g->name) - 1] = g->uuid[sizeof(g->uuid) - 1] = '\0';
	}
	if (!nv->fn.driver || nv->fn.driver(nv->driver, sizeof(nv->driver)) != NVML_SUCCESS)
		nv->driver[0] = '\0';
	nv->driver[sizeof(nv->driver) - 1] = '\0';
	open_events(nv);
	*out = nv;
	return 0;
fail:
	ck_nvml_close(nv);
	return rc;
}

void ck_nvml_close(struct ck_nvml *nv)
{
	if (!nv)
		return;
	if (nv->events)
		nv->fn.event_set_free(nv->events);
	if (nv->initialised)
		nv->fn.shutdown();
	if (nv->lib)
		dlclose(nv->lib);
	free(nv->gpus);
	free(nv);
}

unsigned ck_nvml_count(const struct ck_nvml *nv)
{
	return nv->ngpus;
}

const char *ck_nvml_name(const struct ck_nvml *nv, unsigned i)
{
	return i < nv->ngpus ? nv->gpus[i].name : "";
}

const char *ck_nvml_uuid(const struct ck_nvml *nv, unsigned i)
{
	return i < nv->ngpus ? nv->gpus[i].uuid : "";
}

const char *ck_nvml_driver(const struct ck_nvml *nv)
{
	return nv->driver;
}

/* Takes every XID event waiting, without blocking, into its GPU. */
static void drain_events(struct ck_nvml *nv)
{
	nvmlEventData_t ev;

	if (!nv->events)
		return;
	for (int guard = 0; guard < 4096; guard++) {
		memset(&ev, 0, sizeof(ev));
		if (nv->fn.event_wait(nv->events, &ev, 0) != NVML_SUCCESS)
			return;   /* NVML_ERROR_TIMEOUT: none left */
		if (!(ev.eventType & nvmlEventTypeXidCriticalError))
			continue;
		for (unsigned i = 0; i < nv->ngpus; i++) {
			if (nv->gpus[i].dev == ev.device) {
				nv->gpus[i].xid_pending++;
				nv->gpus[i].last_xid = ev.eventData;
				break;
			}
		}
	}
}

static int64_t ecc_total(struct ck_nvml *nv, nvmlDevice_t dev, int type)
{
	unsigned long long n = 0;

	if (!nv->fn.ecc || nv->fn.ecc(dev, type, NVML_VOLATILE_ECC, &n) != NVML_SUCCESS)
		return -1;   /* no ECC, or ECC off */
	return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* One GPU's metrics: 0, or -EIO / -ENODEV with why.  Temperature is the
 * one reading every GPU has: its failure fails the sample; the others
 * may be unsupported (NaN). */
static int read_gpu(struct ck_nvml *nv, struct nvml_gpu *g, int64_t now_ns, struct ck_gpu_sample *s,
		    char *why)
{
	unsigned temp = 0, mw = 0;
	nvmlUtilization_t util;
	nvmlMemory_t mem;
	nvmlReturn_t r;

	memset(s, 0, sizeof(*s));
	s->time_ns = now_ns;
	r = nv->fn.temperature(g->dev, NVML_TEMPERATURE_GPU, &temp);
	if (r != NVML_SUCCESS) {
		snprintf(why, 128, "temperature: %s", nvml_strerror(nv, r));
		return r == NVML_ERROR_GPU_IS_LOST ? -ENODEV : -EIO;
	}
	s->temp_c = temp;
	r = nv->fn.power(g->dev, &mw);
	s->power_w = r == NVML_SUCCESS ? mw / 1000.0 : NAN;
	r = nv->fn.utilization(g->dev, &util);
	s->util_gpu = r == NVML_SUCCESS ? util.gpu : NAN;
	s->util_mem = r == NVML_SUCCESS ? util.memory : NAN;
	r = nv->fn.memory(g->dev, &mem);
	s->mem_used = r == NVML_SUCCESS && mem.used <= INT64_MAX ? (int64_t)mem.used : -1;
	s->mem_total = r == NVML_SUCCESS && mem.total <= INT64_MAX ? (int64_t)mem.total : -1;
	s->ecc_uncorrected = ecc_total(nv, g->dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
	s->ecc_corrected = ecc_total(nv, g->dev, NVML_MEMORY_ERROR_TYPE_CORRECTED);
	return 0;
}

void ck_nvml_sample(struct ck_nvml *nv, int64_t now_ns, struct ck_gpu_sample *out, int *rc, char (*why)[128])
{
	char scratch[128];

	for (unsigned i = 0; i < nv->ngpus; i++) {
		char *w = why ? why[i] : scratch;

		w[0] = '\0';
		rc[i] = read_gpu(nv, &nv->gpus[i], now_ns, &out[i], w);
	}
	/* After the metrics: an event of this round lands in this sample. */
	drain_events(nv);
	for (unsigned i = 0; i < nv->ngpus; i++) {
		struct nvml_gpu *g = &nv->gpus[i];
		struct ck_gpu_sample *s = &out[i];

		if (rc[i])
			continue;
		s->xid_events = g->xid_pending;
		s->last_xid = g->last_xid;
		s->errors = g->xid_pending;
		g->xid_pending = 0;
		if (g->have_prev && s->ecc_uncorrected > g->prev_ecc_uncorrected && g->prev_ecc_uncorrected >= 0)
			s->errors += (uint64_t)(s->ecc_uncorrected - g->prev_ecc_uncorrected);
		g->prev_ecc_uncorrected = s->ecc_uncorrected;
		g->have_prev = 1;
	}
}
