/*
 * A test target for `latscope live` over process trees: work done in child processes.
 *
 *   forks calls N KIDS    KIDS children each call work() N times (KIDS 0: this process)
 *   forks sleep N         nanosleep(1 ms) N times (run-queue latency; rename it with `exec -a`)
 *   forks hold K          K children alive at once (each pause()s), then all killed and reaped
 *
 * work() sleeps 20 µs, so that it is a span of its own. No output.
 * Build: cc -O1 -o forks forks.c
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) void work(int i)
{
    struct timespec t = {0, 20000};
    (void)i;
    nanosleep(&t, 0);
}

static void calls(int n)
{
    for (int i = 0; i < n; i++)
        work(i);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = atoi(argv[2]);
    if (strcmp(argv[1], "calls") == 0) {
        int kids = argc > 3 ? atoi(argv[3]) : 0;
        if (kids == 0) {
            calls(n);
            return 0;
        }
        for (int k = 0; k < kids; k++)
            if (fork() == 0) {
                calls(n);
                _exit(0);
            }
        while (wait(0) > 0)
            ;
        return 0;
    }
    if (strcmp(argv[1], "sleep") == 0) {
        struct timespec t = {0, 1000000};
        for (int i = 0; i < n; i++)
            nanosleep(&t, 0);
        return 0;
    }
    if (strcmp(argv[1], "hold") == 0) {
        pid_t *pids = calloc(n, sizeof *pids);
        int made = 0;
        for (; made < n; made++) {
            pids[made] = fork();
            if (pids[made] == 0) {
                pause();
                _exit(0);
            }
            if (pids[made] < 0)
                break;
        }
        for (int k = 0; k < made; k++)
            kill(pids[k], SIGKILL);
        while (wait(0) > 0)
            ;
        return 0;
    }
    return 2;
}
