/*
 * A stand-in for the NVIDIA driver's libcuda.so.1, for tests/lab_gpu.rs: the functions
 * `latscope lab gpu` resolves, with a "device" that runs each kernel on the calling thread
 * (the stamping kernel) or on a thread of its own (the calibration ping), so that the CUDA
 * backend's real code (dlopen, every call, the record layout, the ping protocol, graphs) runs
 * end to end without a GPU. Built by the tests: cc -shared -fPIC -pthread -o libcuda_stub.so
 *
 * Its "%globaltimer" is CLOCK_MONOTONIC + 5 ms. Environment:
 *   LIBCUDA_STUB_INIT=N      cuInit returns N
 *   LIBCUDA_STUB_VERSION=N   cuDriverGetVersion (default 12040)
 *   LIBCUDA_STUB_DEVICES=N   devices (default 1)
 *   LIBCUDA_STUB_MODE=N      compute mode (default 0; 2 prohibited, 3 exclusive-process)
 *   LIBCUDA_STUB_BUSY=1      an exclusive-process device held elsewhere: cuCtxCreate fails
 *   LIBCUDA_STUB_JIT=N       cuModuleLoadDataEx returns N with a JIT log
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
#define OFFSET_NS 5000000ull
#define PING_STOP 0xffffffffu

static int env(const char *name, int fallback) {
    const char *v = getenv(name);
    return v ? atoi(v) : fallback;
}

static uint64_t device_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + OFFSET_NS;
}

static char stamp_fn, ping_fn, module_handle;

struct launch {
    uint64_t record, spin;
    unsigned blocks;
};

struct graph {
    struct launch *launches;
    int n, cap;
};

static void *capturing;
static struct graph *captured;

static pthread_t ping_thread;
static void *ping_stream;
static int ping_running;

static void run_stamp(struct launch l) {
    for (unsigned b = 0; b < l.blocks; b++) {
        uint64_t entry = device_now(), exit_;
        do {
            exit_ = device_now();
        } while (exit_ < entry + l.spin);
        volatile uint64_t *stamps = (volatile uint64_t *)(uintptr_t)(l.record + 16 + 16 * b);
        stamps[0] = entry;
        stamps[1] = exit_;
        __atomic_fetch_add((unsigned *)(uintptr_t)l.record, 1, __ATOMIC_SEQ_CST);
    }
}

static void *run_ping(void *cell) {
    unsigned *request = cell, *answer = request + 1, last = 0;
    uint64_t *stamp = (uint64_t *)((char *)cell + 8);
    for (;;) {
        unsigned seq = __atomic_load_n(request, __ATOMIC_SEQ_CST);
        if (seq == last) continue;
        if (seq == PING_STOP) return 0;
        __atomic_store_n(stamp, device_now(), __ATOMIC_SEQ_CST);
        __atomic_store_n(answer, seq, __ATOMIC_SEQ_CST);
        last = seq;
    }
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    return env("LIBCUDA_STUB_INIT", 0);
}

CUresult cuDriverGetVersion(int *v) {
    *v = env("LIBCUDA_STUB_VERSION", 12040);
    return 0;
}

CUresult cuDeviceGetCount(int *n) {
    *n = env("LIBCUDA_STUB_DEVICES", 1);
    return 0;
}

CUresult cuDeviceGet(int *d, int ordinal) {
    *d = ordinal;
    return 0;
}

CUresult cuDeviceGetAttribute(int *v, int attribute, int d) {
    (void)d;
    *v = attribute == 20 ? env("LIBCUDA_STUB_MODE", 0) : 0;
    return 0;
}

CUresult cuDeviceGetName(char *name, int len, int d) {
    (void)d;
    strncpy(name, "latscope stub device", (size_t)len - 1);
    return 0;
}

CUresult cuCtxCreate_v2(void **ctx, unsigned flags, int d) {
    (void)flags;
    (void)d;
    if (env("LIBCUDA_STUB_MODE", 0) == 3 && env("LIBCUDA_STUB_BUSY", 0)) return 46;
    *ctx = malloc(1);
    return 0;
}

CUresult cuCtxDestroy_v2(void *ctx) {
    free(ctx);
    return 0;
}

CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options,
                            void **values) {
    int code = env("LIBCUDA_STUB_JIT", 0);
    const char *ptx = image;
    if (!code && (!strstr(ptx, ".version 7.0") || !strstr(ptx, "latscope_stamp") ||
                  !strstr(ptx, "latscope_ping")))
        code = 218;
    if (code) {
        for (unsigned i = 0; i < n; i++)
            if (options[i] == 5) strcpy(values[i], "ptxas fatal   : stub JIT refuses this PTX");
        return code;
    }
    *module = &module_handle;
    return 0;
}

CUresult cuModuleGetFunction(void **f, void *module, const char *name) {
    (void)module;
    if (!strcmp(name, "latscope_stamp")) *f = &stamp_fn;
    else if (!strcmp(name, "latscope_ping")) *f = &ping_fn;
    else return 500;
    return 0;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
    if (f == &ping_fn) {
        ping_stream = stream;
        ping_running = 1;
        return pthread_create(&ping_thread, 0, run_ping, (void *)(uintptr_t)*(uint64_t *)params[0])
                   ? 999
                   : 0;
    }
    struct launch l = {*(uint64_t *)params[0], *(uint64_t *)params[1], gx};
    if (capturing == stream) {
        if (captured->n == captured->cap) {
            captured->cap = captured->cap ? 2 * captured->cap : 8;
            captured->launches = realloc(captured->launches, sizeof(struct launch) * captured->cap);
        }
        captured->launches[captured->n++] = l;
        return 0;
    }
    run_stamp(l);
    return 0;
}

CUresult cuStreamCreate(void **s, unsigned flags) {
    (void)flags;
    *s = malloc(1);
    return 0;
}

CUresult cuStreamSynchronize(void *s) {
    if (ping_running && s == ping_stream) {
        pthread_join(ping_thread, 0);
        ping_running = 0;
    }
    return 0;
}

CUresult cuStreamDestroy_v2(void *s) {
    free(s);
    return 0;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    *p = calloc(1, bytes);
    return *p ? 0 : 2;
}

CUresult cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned flags) {
    (void)flags;
    *d = (uint64_t)(uintptr_t)p;
    return 0;
}

CUresult cuMemFreeHost(void *p) {
    free(p);
    return 0;
}

CUresult cuStreamBeginCapture_v2(void *s, int mode) {
    (void)mode;
    capturing = s;
    captured = calloc(1, sizeof(struct graph));
    return 0;
}

CUresult cuStreamEndCapture(void *s, void **g) {
    (void)s;
    *g = captured;
    capturing = 0;
    captured = 0;
    return 0;
}

CUresult cuGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags) {
    (void)flags;
    struct graph **e = malloc(sizeof *e);
    *e = g;
    *exec = e;
    return 0;
}

CUresult cuGraphLaunch(void *exec, void *s) {
    (void)s;
    struct graph *g = *(struct graph **)exec;
    for (int i = 0; i < g->n; i++) run_stamp(g->launches[i]);
    return 0;
}

CUresult cuGraphExecDestroy(void *exec) {
    free(exec);
    return 0;
}

CUresult cuGraphDestroy(void *g) {
    free(((struct graph *)g)->launches);
    free(g);
    return 0;
}

static const char *name_of(CUresult code) {
    switch (code) {
    case 0: return "CUDA_SUCCESS";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    default: return "CUDA_ERROR_UNKNOWN";
    }
}

CUresult cuGetErrorName(CUresult code, const char **s) {
    *s = name_of(code);
    return 0;
}

CUresult cuGetErrorString(CUresult code, const char **s) {
    *s = code == 100 ? "no CUDA-capable device is detected" : "stub error";
    return 0;
}
