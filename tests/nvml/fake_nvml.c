/* A fake NVML for the tests: built as tests/nvml/libnvidia-ml.so.1, it
 * exports the functions the health watcher calls (src/health/nvml_api.h)
 * and replays GPU metrics from the trace file named by
 * $CKPT_FAKE_NVML_TRACE.  Without that variable nvmlInit fails as it
 * does on a machine without the driver.
 *
 * The trace is text, one sample of one GPU per line, KEY=VALUE words;
 * '#' starts a comment:
 *
 *   init=fail                   nvmlInit fails (NVML_ERROR_DRIVER_NOT_LOADED)
 *   gpu=0 name=H100 temp=65 power=300 util=95 memutil=40 used=60000 total=81559
 *   gpu=0 temp=80               keys left out keep the GPU's previous values
 *   gpu=0 xid=48                an XID critical error event (XID 48) with this sample
 *   gpu=0 ecc=2 corrected=5     volatile ECC totals (uncorrected, corrected);
 *                               ecc=-1 (the default): the GPU has no ECC
 *   gpu=0 fail=1                this sample's reads fail (NVML_ERROR_UNKNOWN)
 *   gpu=0 lost=1                ... with NVML_ERROR_GPU_IS_LOST
 *
 * power is in W, used and total in MiB.  Each GPU's lines are consumed one
 * per sample, a sample being one nvmlDeviceGetTemperature call (the first
 * read of every sample the watcher takes); past the last line, the last
 * repeats (without its event again).  The file is read again when its size
 * changes, so a test may append lines to a running trace: they are the
 * next samples. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "health/nvml_api.h"

#define MAX_GPUS 8

struct row {
	unsigned temp, power_w, util, memutil;
	unsigned long long used_mib, total_mib;
	long long ecc, corrected;
	unsigned xid;
	int fail, lost;
};

struct nvmlDevice_st {
	unsigned index;
	char name[64];
	struct row *rows;
	size_t nrows;
	size_t pos;          /* rows consumed */
	const struct row *cur;
	unsigned pending_xid;
};

struct nvmlEventSet_st {
	int registered[MAX_GPUS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlDevice_st gpus[MAX_GPUS];
static unsigned ngpus;
static int init_fails;
static int trace_init_fails;   /* the trace says init=fail */
static long long trace_size = -1;
static char trace_path[4096];
static struct nvmlEventSet_st the_set;

static void set_key(struct nvmlDevice_st *g, struct row *r, const char *key, const char *val)
{
	if (!strcmp(key, "name"))
		snprintf(g->name, sizeof(g->name), "%s", val);
	else if (!strcmp(key, "temp"))
		r->temp = (unsigned)strtoul(val, NULL, 10);
	else if (!strcmp(key, "power"))
		r->power_w = (unsigned)strtoul(val, NULL, 10);
	else if (!strcmp(key, "util"))
		r->util = (unsigned)strtoul(val, NULL, 10);
	else if (!strcmp(key, "memutil"))
		r->memutil = (unsigned)strtoul(val, NULL, 10);
	else if (!strcmp(key, "used"))
		r->used_mib = strtoull(val, NULL, 10);
	else if (!strcmp(key, "total"))
		r->total_mib = strtoull(val, NULL, 10);
	else if (!strcmp(key, "ecc"))
		r->ecc = strtoll(val, NULL, 10);
	else if (!strcmp(key, "corrected"))
		r->corrected = strtoll(val, NULL, 10);
	else if (!strcmp(key, "xid"))
		r->xid = (unsigned)strtoul(val, NULL, 10);
	else if (!strcmp(key, "fail"))
		r->fail = atoi(val);
	else if (!strcmp(key, "lost"))
		r->lost = atoi(val);
	else
		fprintf(stderr, "fake NVML: unknown key %s\n", key);
}

static void add_row(struct nvmlDevice_st *g, const struct row *r)
{
	struct row *rows = realloc(g->rows, (g->nrows + 1) * sizeof(*rows));

	if (!rows)
		abort();
	g->rows = rows;
	g->rows[g->nrows++] = *r;
}

/* (Re)reads the trace; positions are kept. */
static void load_trace(void)
{
	const char *path = getenv("CKPT_FAKE_NVML_TRACE");
	char line[1024];
	struct row prev[MAX_GPUS];
	struct stat st;
	FILE *f;

	init_fails = !path || !*path;
	if (init_fails)
		return;
	if (strcmp(path, trace_path) != 0) {
		/* Another trace (the next case of a unit test): from scratch. */
		for (unsigned i = 0; i < MAX_GPUS; i++) {
			free(gpus[i].rows);
			memset(&gpus[i], 0, sizeof(gpus[i]));
		}
		ngpus = 0;
		trace_size = -1;
		trace_init_fails = 0;
		snprintf(trace_path, sizeof(trace_path), "%s", path);
	}
	if (stat(path, &st) != 0 || st.st_size == trace_size) {
		init_fails = trace_init_fails;
		return;
	}
	f = fopen(path, "r");
	if (!f)
		return;
	trace_size = st.st_size;
	trace_init_fails = 0;
	memset(prev, 0, sizeof(prev));
	for (unsigned i = 0; i < MAX_GPUS; i++) {
		prev[i].ecc = prev[i].corrected = -1;
		gpus[i].nrows = 0;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#'), *save = NULL, *word;
		struct row r;
		int gpu = -1;

		if (hash)
			*hash = '\0';
		if (strstr(line, "init=fail")) {
			trace_init_fails = 1;
			continue;
		}
		if (!strstr(line, "gpu="))
			continue;
		gpu = atoi(strstr(line, "gpu=") + 4);
		if (gpu < 0 || gpu >= MAX_GPUS)
			continue;
		r = prev[gpu];
		r.xid = 0;
		r.fail = r.lost = 0;
		for (word = strtok_r(line, " \t\r\n", &save); word; word = strtok_r(NULL, " \t\r\n", &save)) {
			char *eq = strchr(word, '=');

			if (!eq || !strncmp(word, "gpu=", 4))
				continue;
			*eq = '\0';
			set_key(&gpus[gpu], &r, word, eq + 1);
		}
		add_row(&gpus[gpu], &r);
		prev[gpu] = r;
		if ((unsigned)gpu + 1 > ngpus)
			ngpus = (unsigned)gpu + 1;
	}
	fclose(f);
	init_fails = trace_init_fails;
}

nvmlReturn_t nvmlInit_v2(void)
{
	nvmlReturn_t rc;

	pthread_mutex_lock(&lock);
	load_trace();
	for (unsigned i = 0; i < MAX_GPUS; i++) {
		gpus[i].index = i;
		if (!gpus[i].name[0])
			snprintf(gpus[i].name, sizeof(gpus[i].name), "Fake GPU");
	}
	rc = init_fails ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
	pthread_mutex_unlock(&lock);
	return rc;
}

/* Forgets the trace: the next nvmlInit starts it from the beginning. */
nvmlReturn_t nvmlShutdown(void)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < MAX_GPUS; i++) {
		free(gpus[i].rows);
		memset(&gpus[i], 0, sizeof(gpus[i]));
	}
	ngpus = 0;
	trace_size = -1;
	trace_init_fails = 0;
	trace_path[0] = '\0';
	pthread_mutex_unlock(&lock);
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
	switch (result) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_TIMEOUT:
		return "Timeout";
	default:
		return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	snprintf(version, length, "fake-1.0");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	*count = ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (index >= ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &gpus[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	snprintf(name, length, "%s", device->name);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	snprintf(uuid, length, "GPU-fake-%u", device->index);
	return NVML_SUCCESS;
}

static nvmlReturn_t failure(const struct row *r)
{
	return r->lost ? NVML_ERROR_GPU_IS_LOST : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp)
{
	const struct row *r;

	if (sensor != NVML_TEMPERATURE_GPU)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&lock);
	load_trace();
	if (!device->nrows) {
		pthread_mutex_unlock(&lock);
		return NVML_ERROR_UNKNOWN;
	}
	if (device->pos < device->nrows) {
		r = &device->rows[device->pos++];
		device->pending_xid = r->xid;
	} else {
		r = &device->rows[device->nrows - 1];
	}
	device->cur = r;
	pthread_mutex_unlock(&lock);
	if (r->fail || r->lost)
		return failure(r);
	*temp = r->temp;
	return NVML_SUCCESS;
}

/* The row the current sample is reading (set by the temperature read). */
static const struct row *current(nvmlDevice_t device)
{
	return device->cur;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *milliwatts)
{
	const struct row *r = current(device);

	if (!r || r->fail || r->lost)
		return r ? failure(r) : NVML_ERROR_UNKNOWN;
	*milliwatts = r->power_w * 1000;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util)
{
	const struct row *r = current(device);

	if (!r || r->fail || r->lost)
		return r ? failure(r) : NVML_ERROR_UNKNOWN;
	util->gpu = r->util;
	util->memory = r->memutil;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	const struct row *r = current(device);

	if (!r || r->fail || r->lost)
		return r ? failure(r) : NVML_ERROR_UNKNOWN;
	memory->total = r->total_mib << 20;
	memory->used = r->used_mib << 20;
	memory->free = memory->total - memory->used;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
					 unsigned long long *count)
{
	const struct row *r = current(device);
	long long v;

	if (!r || r->fail || r->lost)
		return r ? failure(r) : NVML_ERROR_UNKNOWN;
	if (counter_type != NVML_VOLATILE_ECC)
		return NVML_ERROR_INVALID_ARGUMENT;
	v = error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? r->ecc : r->corrected;
	if (v < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*count = (unsigned long long)v;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	memset(&the_set, 0, sizeof(the_set));
	*set = &the_set;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set)
{
	if (!(types & nvmlEventTypeXidCriticalError))
		return NVML_ERROR_NOT_SUPPORTED;
	set->registered[device->index] = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms)
{
	nvmlReturn_t rc = NVML_ERROR_TIMEOUT;

	(void)timeout_ms;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < ngpus; i++) {
		if (set->registered[i] && gpus[i].pending_xid) {
			memset(data, 0, sizeof(*data));
			data->device = &gpus[i];
			data->eventType = nvmlEventTypeXidCriticalError;
			data->eventData = gpus[i].pending_xid;
			gpus[i].pending_xid = 0;
			rc = NVML_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	(void)set;
	return NVML_SUCCESS;
}
