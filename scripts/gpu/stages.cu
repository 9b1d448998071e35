// The independent check of `latscope lab gpu` (issue #57): the same stages, measured by a
// program that shares no code with latscope, to run on the GPU machine interleaved with the lab
// (scripts/gpu/check.sh). Compile there: nvcc -O2 -o stages scripts/gpu/stages.cu
//
// Isolated requests, one at a time on one stream: a 1-block kernel stamps %globaltimer at entry
// and exit into host-mapped memory, fences at system scope, and sets a flag the host polls;
// the stream is synchronized, and the host waits `spacing` ns. Even requests synchronize before
// polling (end_to_sync, total), odd ones poll before synchronizing (end_to_host), as the lab
// alternates its rounds. %globaltimer is mapped onto
// CLOCK_MONOTONIC by ping-pong through host-mapped memory before and after the run (the best
// round trip of each), interpolated linearly: the method latscope uses, written again here.
//
// Usage: stages REQUESTS SPACING_NS [spin|yield|blocking]
// Prints one line per stage: name count min p50 p99 max negative (ns).
//
// UNTESTED: written without a GPU or nvcc at hand; the session that runs check.sh first
// compiles and checks it.

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <algorithm>
#include <cmath>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, cudaGetErrorName(e_),          \
                    cudaGetErrorString(e_));                                             \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

struct Record {
    volatile unsigned int flag;
    unsigned int pad[3];
    volatile unsigned long long start, end;
};

struct Cell {
    volatile unsigned int request, answer;
    volatile unsigned long long stamp;
};

static __device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void stamp(Record *r) {
    unsigned long long start = globaltimer();
    unsigned long long end = globaltimer();
    r->start = start;
    r->end = end;
    __threadfence_system();
    r->flag = 1;
}

__global__ void ping(Cell *c) {
    unsigned int last = 0;
    for (;;) {
        unsigned int seq = c->request;
        if (seq == last) continue;
        if (seq == 0xffffffffu) return;
        c->stamp = globaltimer();
        __threadfence_system();
        c->answer = seq;
        last = seq;
    }
}

static uint64_t now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct Anchor {
    int64_t host, device, error;
};

static Anchor calibrate(Cell *cell, Cell *dcell, cudaStream_t s, int pings) {
    memset((void *)cell, 0, sizeof(Cell));
    ping<<<1, 1, 0, s>>>(dcell);
    CHECK(cudaGetLastError());
    Anchor best = {0, 0, INT64_MAX};
    for (int i = 1; i <= pings; i++) {
        uint64_t before = now();
        cell->request = (unsigned)i;
        __sync_synchronize();
        while (cell->answer != (unsigned)i) {
        }
        uint64_t after = now();
        int64_t half = (int64_t)(after - before + 1) / 2;
        if (half < best.error) best = {(int64_t)(before + (after - before) / 2), (int64_t)cell->stamp, half};
    }
    cell->request = 0xffffffffu;
    CHECK(cudaStreamSynchronize(s));
    return best;
}

// Device time -> host time, interpolating the offset between the two anchors.
static int64_t to_host(const Anchor &b, const Anchor &a, int64_t device) {
    double ob = (double)(b.device - b.host), oa = (double)(a.device - a.host);
    double span = (double)(a.device - b.device);
    double off = span == 0 ? ob : ob + (oa - ob) * (double)(device - b.device) / span;
    return device - (int64_t)llround(off);
}

struct Stage {
    const char *name;
    std::vector<int64_t> v;
};

static void print(Stage &s) {
    std::vector<int64_t> pos;
    long negative = 0;
    for (int64_t x : s.v) {
        if (x < 0) negative++;
        else pos.push_back(x);
    }
    std::sort(pos.begin(), pos.end());
    size_t n = pos.size();
    auto rank = [&](double q) { return n ? pos[(size_t)std::max(0.0, std::ceil(q * n) - 1)] : 0; };
    printf("%s %zu %lld %lld %lld %lld %ld\n", s.name, s.v.size(), n ? (long long)pos[0] : 0,
           (long long)rank(0.5), (long long)rank(0.99), n ? (long long)pos[n - 1] : 0, negative);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s REQUESTS SPACING_NS [spin|yield|blocking]\n", argv[0]);
        return 2;
    }
    long requests = atol(argv[1]);
    uint64_t spacing = strtoull(argv[2], 0, 10);
    const char *sync = argc > 3 ? argv[3] : "spin";
    unsigned flags = !strcmp(sync, "yield") ? cudaDeviceScheduleYield
                     : !strcmp(sync, "blocking") ? cudaDeviceScheduleBlockingSync
                                                 : cudaDeviceScheduleSpin;
    CHECK(cudaSetDeviceFlags(flags | cudaDeviceMapHost));
    cudaStream_t s, ps;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
    Record *rec, *drec;
    Cell *cell, *dcell;
    CHECK(cudaHostAlloc((void **)&rec, sizeof(Record) * requests, cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&cell, sizeof(Cell), cudaHostAllocMapped));
    memset((void *)rec, 0, sizeof(Record) * requests);
    CHECK(cudaHostGetDevicePointer((void **)&drec, rec, 0));
    CHECK(cudaHostGetDevicePointer((void **)&dcell, cell, 0));
    for (int i = 0; i < 100; i++) {  // warm-up on the last record, reset after
        stamp<<<1, 1, 0, s>>>(drec + requests - 1);
        CHECK(cudaStreamSynchronize(s));
    }
    memset((void *)rec, 0, sizeof(Record) * requests);

    std::vector<uint64_t> t0(requests), t1(requests), seen(requests), synced(requests);
    Anchor before = calibrate(cell, dcell, ps, 200);
    for (long i = 0; i < requests; i++) {
        t0[i] = now();
        stamp<<<1, 1, 0, s>>>(drec + i);
        t1[i] = now();
        // A host learns of the end one way at a time: even requests synchronize first (the
        // synchronize's own wake-up), odd ones poll the flag first; the other is not timed.
        if (i % 2 == 0) {
            CHECK(cudaStreamSynchronize(s));
            synced[i] = now();
            while (!rec[i].flag) {
            }
        } else {
            while (!rec[i].flag) {
            }
            seen[i] = now();
            CHECK(cudaStreamSynchronize(s));
        }
        uint64_t until = now() + spacing;
        while (now() < until) {
        }
    }
    Anchor after = calibrate(cell, dcell, ps, 200);

    Stage st[6] = {{"launch_call", {}}, {"submit_to_start", {}}, {"execute", {}},
                   {"end_to_host", {}}, {"end_to_sync", {}}, {"total", {}}};
    for (long i = 0; i < requests; i++) {
        int64_t start = to_host(before, after, (int64_t)rec[i].start);
        int64_t end = to_host(before, after, (int64_t)rec[i].end);
        st[0].v.push_back((int64_t)(t1[i] - t0[i]));
        st[1].v.push_back(start - (int64_t)t0[i]);
        st[2].v.push_back((int64_t)(rec[i].end - rec[i].start));
        if (i % 2) {
            st[3].v.push_back((int64_t)seen[i] - end);
        } else {
            st[4].v.push_back((int64_t)synced[i] - end);
            st[5].v.push_back((int64_t)(synced[i] - t0[i]));
        }
    }
    printf("# stage count min p50 p99 max negative (ns); clock error +-%lld ns, offsets %lld -> %lld\n",
           (long long)std::max(before.error, after.error), (long long)(before.device - before.host),
           (long long)(after.device - after.host));
    for (Stage &x : st) print(x);
    return 0;
}
