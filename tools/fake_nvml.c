/*
 * A fake libnvidia-ml.so.1 for tests and the benchmark, built against the real nvml.h (shipped by
 * the nvidia-nvml-dev wheel) so that every signature is checked by the compiler.
 *
 * The GPU table is read at call time from the key=value file named by $FAKE_NVML_CONFIG; the file
 * is re-read whenever its inode, size or mtime changes (tests replace it with a rename). Keys:
 *
 *   init_error=<nvmlReturn_t>   what nvmlInit returns (9 = driver not loaded)
 *   error=<nvmlReturn_t>        what every other call returns after init (1 = uninitialized)
 *   count=<n>                   number of GPUs
 *   driver=<text>               nvmlSystemGetDriverVersion
 *   hang=<function name>        that function sleeps hang_ms before answering
 *   hang_gpu=<index>            only on this GPU (default: any)
 *   hang_ms=<ms>
 *   gpu<i>.lost=1               every call on GPU i returns NVML_ERROR_GPU_IS_LOST
 *   gpu<i>.unsupported=<fn,fn>  those functions return NVML_ERROR_NOT_SUPPORTED on GPU i
 *   gpu<i>.missing=<fn,fn>      those functions return NVML_ERROR_FUNCTION_NOT_FOUND on GPU i
 *   gpu<i>.uuid / name / mem_total / mem_used / util / mem_util / power_mw / limit_mw /
 *   energy_mj / temp / sm_mhz / mem_mhz / reasons / ecc_corrected / ecc_uncorrected
 *
 * Built with -DFAKE_OLD_DRIVER, the library lacks nvmlDeviceGetTemperatureV,
 * nvmlDeviceGetCurrentClocksEventReasons and nvmlDeviceGetTotalEnergyConsumption (the symbols are
 * absent, as with an old driver), so callers see NVML_ERROR_FUNCTION_NOT_FOUND from the bindings.
 */
#define _GNU_SOURCE
#include <nvml.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_GPUS 64
#define STR_LEN 256

typedef unsigned long long ull;

typedef struct {
    char uuid[STR_LEN];
    char name[STR_LEN];
    char unsupported[STR_LEN];
    char missing[STR_LEN];
    int lost;
    ull mem_total, mem_used, util, mem_util, power_mw, limit_mw, energy_mj, temp, sm_mhz,
        mem_mhz, reasons, ecc_corrected, ecc_uncorrected;
} gpu_t;

typedef struct {
    int loaded;
    nvmlReturn_t init_error, error;
    unsigned count;
    char driver[STR_LEN];
    char hang[STR_LEN];
    long long hang_gpu;
    ull hang_ms;
} global_t;

static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static global_t G;
static gpu_t GPUS[MAX_GPUS];
static struct stat cfg_stat;
static int initialized = 0;
static unsigned long init_calls = 0;

static void gpu_defaults(unsigned i, gpu_t *g) {
    memset(g, 0, sizeof *g);
    snprintf(g->uuid, STR_LEN, "GPU-00000000-fake-0000-0000-%012u", i);
    snprintf(g->name, STR_LEN, "NVIDIA H100 80GB HBM3");
    g->mem_total = 85899345920ULL;
    g->mem_used = 1073741824ULL;
    g->power_mw = 70000;
    g->limit_mw = 700000;
    g->energy_mj = 1000000;
    g->temp = 40;
    g->sm_mhz = 1980;
    g->mem_mhz = 2619;
}

static void set_gpu(gpu_t *g, const char *field, const char *v) {
    ull n = strtoull(v, NULL, 0);
#define STR_FIELD(f) if (strcmp(field, #f) == 0) { snprintf(g->f, STR_LEN, "%s", v); return; }
#define NUM_FIELD(f) if (strcmp(field, #f) == 0) { g->f = n; return; }
    STR_FIELD(uuid) STR_FIELD(name) STR_FIELD(unsupported) STR_FIELD(missing)
    NUM_FIELD(mem_total) NUM_FIELD(mem_used) NUM_FIELD(util) NUM_FIELD(mem_util)
    NUM_FIELD(power_mw) NUM_FIELD(limit_mw) NUM_FIELD(energy_mj) NUM_FIELD(temp)
    NUM_FIELD(sm_mhz) NUM_FIELD(mem_mhz) NUM_FIELD(reasons) NUM_FIELD(ecc_corrected)
    NUM_FIELD(ecc_uncorrected)
    if (strcmp(field, "lost") == 0) { g->lost = (int)n; }
#undef STR_FIELD
#undef NUM_FIELD
}

static void set_global(const char *key, const char *v) {
    if (strcmp(key, "init_error") == 0) G.init_error = (nvmlReturn_t)strtol(v, NULL, 0);
    else if (strcmp(key, "error") == 0) G.error = (nvmlReturn_t)strtol(v, NULL, 0);
    else if (strcmp(key, "count") == 0) G.count = (unsigned)strtoul(v, NULL, 0);
    else if (strcmp(key, "driver") == 0) snprintf(G.driver, STR_LEN, "%s", v);
    else if (strcmp(key, "hang") == 0) snprintf(G.hang, STR_LEN, "%s", v);
    else if (strcmp(key, "hang_gpu") == 0) G.hang_gpu = strtoll(v, NULL, 0);
    else if (strcmp(key, "hang_ms") == 0) G.hang_ms = strtoull(v, NULL, 0);
}

/* Re-parse the table when the file changed (one stat per call). Called with cfg_lock held. */
static void cfg_reload(void) {
    const char *path = getenv("FAKE_NVML_CONFIG");
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) {
        memset(&G, 0, sizeof G);
        return;
    }
    if (G.loaded && st.st_ino == cfg_stat.st_ino && st.st_size == cfg_stat.st_size &&
        st.st_mtim.tv_sec == cfg_stat.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == cfg_stat.st_mtim.tv_nsec) {
        return;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        memset(&G, 0, sizeof G);
        return;
    }
    memset(&G, 0, sizeof G);
    snprintf(G.driver, STR_LEN, "550.54.15");
    G.hang_gpu = -1;
    G.hang_ms = 1000;
    for (unsigned i = 0; i < MAX_GPUS; i++) {
        gpu_defaults(i, &GPUS[i]);
    }
    char line[2 * STR_LEN];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strchr(line, '=');
        if (line[0] == '#' || eq == NULL) {
            continue;
        }
        *eq = '\0';
        unsigned idx;
        int used = 0;
        if (sscanf(line, "gpu%u.%n", &idx, &used) == 1 && used > 0) {
            if (idx < MAX_GPUS) {
                set_gpu(&GPUS[idx], line + used, eq + 1);
            }
        } else {
            set_global(line, eq + 1);
        }
    }
    fclose(f);
    cfg_stat = st;
    G.loaded = 1;
}

/* A consistent copy of the globals and (when idx >= 0) of one GPU's row. */
static void snapshot(global_t *g, int idx, gpu_t *gpu) {
    pthread_mutex_lock(&cfg_lock);
    cfg_reload();
    *g = G;
    if (gpu != NULL && idx >= 0 && idx < MAX_GPUS) {
        *gpu = GPUS[idx];
    }
    pthread_mutex_unlock(&cfg_lock);
}

static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) {
            return 1;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return 0;
}

static void maybe_hang(const global_t *g, const char *fn, int idx) {
    if (strcmp(g->hang, fn) != 0 || (g->hang_gpu >= 0 && g->hang_gpu != idx)) {
        return;
    }
    struct timespec ts = {(time_t)(g->hang_ms / 1000), (long)(g->hang_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Prologue of a call that is not about one GPU. */
static nvmlReturn_t global_check(const char *fn, global_t *g) {
    snapshot(g, -1, NULL);
    maybe_hang(g, fn, -1);
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    return g->error;
}

/* Prologue of a per-GPU call: hang, global error, lost GPU, unsupported / missing. */
static nvmlReturn_t gpu_check(const char *fn, nvmlDevice_t device, gpu_t *gpu) {
    global_t g;
    uintptr_t raw = (uintptr_t)device;
    if (raw == 0 || raw > MAX_GPUS) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    int idx = (int)(raw - 1);
    snapshot(&g, idx, gpu);
    maybe_hang(&g, fn, idx);
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (g.error != NVML_SUCCESS) {
        return g.error;
    }
    if ((unsigned)idx >= g.count) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (gpu->lost) {
        return NVML_ERROR_GPU_IS_LOST;
    }
    if (in_list(gpu->unsupported, fn)) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (in_list(gpu->missing, fn)) {
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    return NVML_SUCCESS;
}

#define GPU_PROLOGUE(fn)                             \
    gpu_t gpu;                                       \
    nvmlReturn_t ret_ = gpu_check(fn, device, &gpu); \
    if (ret_ != NVML_SUCCESS) {                      \
        return ret_;                                 \
    }

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (out == NULL || strlen(value) + 1 > length) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

/* ---- test hooks (not NVML) ---------------------------------------------------------------- */

unsigned long fake_nvml_init_calls(void) { return __atomic_load_n(&init_calls, __ATOMIC_SEQ_CST); }

/* ---- init / shutdown ---------------------------------------------------------------------- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    global_t g;
    snapshot(&g, -1, NULL);
    maybe_hang(&g, "nvmlInit", -1);
    __atomic_add_fetch(&init_calls, 1, __ATOMIC_SEQ_CST);
    if (!g.loaded) {
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (g.init_error == NVML_SUCCESS) {
        initialized = 1;
    }
    return g.init_error;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    initialized = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    static __thread char buf[32];
    snprintf(buf, sizeof buf, "fake NVML error %d", (int)result);
    return buf;
}

/* ---- system ------------------------------------------------------------------------------- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    global_t g;
    nvmlReturn_t ret = global_check("nvmlSystemGetDriverVersion", &g);
    return ret != NVML_SUCCESS ? ret : copy_string(g.driver, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    global_t g;
    nvmlReturn_t ret = global_check("nvmlDeviceGetCount_v2", &g);
    if (ret == NVML_SUCCESS) {
        *deviceCount = g.count;
    }
    return ret;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    global_t g;
    gpu_t gpu;
    if (index >= MAX_GPUS) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    snapshot(&g, (int)index, &gpu);
    maybe_hang(&g, "nvmlDeviceGetHandleByIndex_v2", (int)index);
    if (!initialized) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (g.error != NVML_SUCCESS) {
        return g.error;
    }
    if (index >= g.count) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (gpu.lost) {
        return NVML_ERROR_GPU_IS_LOST;
    }
    *device = (nvmlDevice_t)(uintptr_t)(index + 1);
    return NVML_SUCCESS;
}

/* ---- per GPU ------------------------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    GPU_PROLOGUE("nvmlDeviceGetUUID");
    return copy_string(gpu.uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    GPU_PROLOGUE("nvmlDeviceGetName");
    return copy_string(gpu.name, name, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    GPU_PROLOGUE("nvmlDeviceGetMemoryInfo");
    memory->total = gpu.mem_total;
    memory->used = gpu.mem_used;
    memory->free = gpu.mem_total - gpu.mem_used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    GPU_PROLOGUE("nvmlDeviceGetUtilizationRates");
    utilization->gpu = (unsigned)gpu.util;
    utilization->memory = (unsigned)gpu.mem_util;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    GPU_PROLOGUE("nvmlDeviceGetPowerUsage");
    *power = (unsigned)gpu.power_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    GPU_PROLOGUE("nvmlDeviceGetEnforcedPowerLimit");
    *limit = (unsigned)gpu.limit_mw;
    return NVML_SUCCESS;
}

#ifndef FAKE_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
    GPU_PROLOGUE("nvmlDeviceGetTotalEnergyConsumption");
    *energy = gpu.energy_mj;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature) {
    GPU_PROLOGUE("nvmlDeviceGetTemperatureV");
    if (temperature->version != nvmlTemperature_v1 ||
        temperature->sensorType != NVML_TEMPERATURE_GPU) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    temperature->temperature = (int)gpu.temp;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons) {
    GPU_PROLOGUE("nvmlDeviceGetCurrentClocksEventReasons");
    *clocksEventReasons = gpu.reasons;
    return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp) {
    GPU_PROLOGUE("nvmlDeviceGetTemperature");
    if (sensorType != NVML_TEMPERATURE_GPU) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *temp = (unsigned)gpu.temp;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons) {
    GPU_PROLOGUE("nvmlDeviceGetCurrentClocksThrottleReasons");
    *clocksThrottleReasons = gpu.reasons;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock) {
    GPU_PROLOGUE("nvmlDeviceGetClockInfo");
    switch (type) {
    case NVML_CLOCK_SM:
        *clock = (unsigned)gpu.sm_mhz;
        return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
        *clock = (unsigned)gpu.mem_mhz;
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_NOT_SUPPORTED;
    }
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts) {
    GPU_PROLOGUE("nvmlDeviceGetTotalEccErrors");
    /* Aggregate counts are made larger than volatile ones so a test can tell which was read. */
    ull extra = counterType == NVML_AGGREGATE_ECC ? 1000000 : 0;
    *eccCounts = (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? gpu.ecc_corrected
                                                                : gpu.ecc_uncorrected) + extra;
    return NVML_SUCCESS;
}
