/*
 * A CPU-bound program whose work is set by its argument, for benchmarking the benchmark:
 *   spin N     runs N iterations of a dependent integer loop (about 1 ns each) and exits 0.
 * `spin 10000000` and `spin 10300000` differ by exactly 3% of the work.
 * Build: cc -O2 -o spin spin.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    volatile uint64_t sink;
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    sink = x;
    (void)sink;
    return 0;
}
