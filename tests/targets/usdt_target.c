/*
 * A test target for `latscope live` and `latscope probes`: USDT start/end pairs around
 * busy-waits of known length, in known proportions.
 *
 *   usdt_target ITERATIONS [PAUSE_MS [NO_WAIT [LINGER_MS]]]
 *
 * Iteration i busy-waits 1000 µs when i % 10 == 9, 200 µs when i % 10 >= 6, else 50 µs
 * (60% 50 µs, 30% 200 µs, 10% 1 ms). Around each wait:
 *   latscope_test:request_start(i, delay_us)   latscope_test:request_end(i, delay_us)
 * and the wait itself is the function work(delay_us), for uprobe/uretprobe spans.
 * latscope_test:tick(i) fires once per iteration (for --rate). PAUSE_MS (default 0) sleeps
 * between iterations, and the program first sleeps 1 s so that a tracer can attach. A third
 * argument of 1 skips the waits (work(0)), so that probe overhead dominates (for benchmarks).
 * LINGER_MS (default 0) sleeps after the loop, so that a scraper sees the final counts.
 * Build: cc -O2 -o usdt_target usdt_target.c   (needs sys/sdt.h: Debian systemtap-sdt-dev)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) uint64_t work(uint64_t delay_us)
{
    uint64_t end = now_ns() + delay_us * 1000u;
    uint64_t spins = 0;
    while (now_ns() < end)
        spins++;
    return spins;
}

static uint64_t delay_for(long i)
{
    if (i % 10 == 9)
        return 1000;
    if (i % 10 >= 6)
        return 200;
    return 50;
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
    long pause_ms = argc > 2 ? atol(argv[2]) : 0;
    int no_wait = argc > 3 && atoi(argv[3]) == 1;
    long linger_ms = argc > 4 ? atol(argv[4]) : 0;
    volatile uint64_t sink = 0;
    usleep(1000 * 1000);
    uint64_t loop_start = now_ns();
    for (long i = 0; i < iterations; i++) {
        uint64_t delay = no_wait ? 0 : delay_for(i);
        DTRACE_PROBE1(latscope_test, tick, i);
        DTRACE_PROBE2(latscope_test, request_start, i, delay);
        sink += work(delay);
        DTRACE_PROBE2(latscope_test, request_end, i, delay);
        if (pause_ms > 0)
            usleep(pause_ms * 1000);
    }
    printf("%ld iterations, %llu spins, loop_ns=%llu\n", iterations, (unsigned long long)sink,
           (unsigned long long)(now_ns() - loop_start));
    fflush(stdout);
    if (linger_ms > 0)
        usleep(linger_ms * 1000);
    return 0;
}
