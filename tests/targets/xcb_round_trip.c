/* The round trip as a C XCB client makes it: xcb_get_input_focus and its reply, N times, each
 * timed with CLOCK_MONOTONIC. Prints the median and the whole run's time in ns:
 *   p50_ns=N mean_ns=N n=N
 * Compiled by tests/x11.rs and scripts/bench/x11_client.py (cc xcb_round_trip.c -lxcb) and run on
 * the same server as `latscope lab x11 round-trip`: the anchor the lab's round trip is held to.
 * Usage: xcb_round_trip [-n COUNT] [-w WARMUP]   (the display from $DISPLAY) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xcb/xcb.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int round_trip(xcb_connection_t *c) {
    xcb_get_input_focus_reply_t *r = xcb_get_input_focus_reply(c, xcb_get_input_focus(c), NULL);
    if (!r)
        return -1;
    free(r);
    return 0;
}

int main(int argc, char **argv) {
    long n = 20000, warmup = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n"))
            n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-w"))
            warmup = atol(argv[i + 1]);
    }
    if (n < 1) {
        fprintf(stderr, "xcb_round_trip: -n must be at least 1\n");
        return 2;
    }
    xcb_connection_t *c = xcb_connect(NULL, NULL);
    if (xcb_connection_has_error(c)) {
        fprintf(stderr, "xcb_round_trip: cannot connect to $DISPLAY\n");
        return 1;
    }
    uint64_t *ns = malloc(sizeof *ns * (size_t)n);
    if (!ns)
        return 1;
    for (long i = 0; i < warmup; i++)
        if (round_trip(c))
            return 1;
    uint64_t begin = now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t t = now_ns();
        if (round_trip(c)) {
            fprintf(stderr, "xcb_round_trip: the connection broke\n");
            return 1;
        }
        ns[i] = now_ns() - t;
    }
    uint64_t total = now_ns() - begin;
    qsort(ns, (size_t)n, sizeof *ns, cmp);
    /* the lower median for an even count, as latscope's p50 (nearest rank) */
    printf("p50_ns=%llu mean_ns=%llu n=%ld\n", (unsigned long long)ns[(n - 1) / 2],
           (unsigned long long)(total / (uint64_t)n), n);
    xcb_disconnect(c);
    free(ns);
    return 0;
}
