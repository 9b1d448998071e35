#!/usr/bin/env python3
"""Overhead of `latscope live` next to the equivalent hand-written bpftrace one-liner.

    scripts/bench/live_overhead.py [--iterations 200000] [--runs 5] [--serve]

Runs the USDT test target (tests/targets/usdt_target.c) with no busy-wait, so that every
iteration is three USDT probe hits and nothing else, three ways: untraced, traced by
`latscope live` (one span and one rate), and traced by the bpftrace program a person would
write for the same thing (`hist()` of the span, `count()` of the rate). Reports the median wall
time of each and the slowdown relative to untraced; also `latscope live --record-spans` with every
span printed and with only the first 1000 (and new maxima). Needs root and bpftrace.

With --fork-heavy, the cost of following a process tree instead: a shell loop that starts
/bin/true N times (timed by the shell itself), untraced, traced by `latscope live` over the
whole tree (the default with a command: sched_process_fork/exit keep the map of traced pids),
and with --this-process-only (the same program without the tree), each counting exec events.

With --serve, a fourth way: `latscope live --interval 1 --serve 127.0.0.1:0` scraped for
protobuf (as Prometheus with native histograms does) every 0.1 s while the target runs, next to
the same command without --serve, so that the cost of serving shows as the difference.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import re
import threading
import urllib.request
import time

SCRAPE_SECONDS = []  # the duration of every scrape of `live --serve`

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(cmd):
    """Seconds the target spent in its probe loop (it prints loop_ns=N), whoever runs it."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = re.search(r'loop_ns=(\d+)', out.stdout + out.stderr)
    if not m:
        sys.exit(f'no loop_ns in the output of {cmd}')
    return int(m.group(1)) / 1e9


def timed_served(cmd):
    """timed() for `latscope live --serve 127.0.0.1:0`, scraped every 0.1 s while it runs."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.search(r'serving metrics on http://127\.0\.0\.1:(\d+)/metrics', line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        sys.exit(f'{cmd} did not say where it serves')
    done = threading.Event()
    scrapes = [0]

    def scrape():
        accept = 'application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited'
        while not done.wait(0.1):
            try:
                req = urllib.request.Request(f'http://127.0.0.1:{port}/metrics', headers={'Accept': accept})
                start = time.perf_counter()
                urllib.request.urlopen(req, timeout=2).read()
                SCRAPE_SECONDS.append(time.perf_counter() - start)
                scrapes[0] += 1
            except OSError:
                pass

    scraper = threading.Thread(target=scrape)
    scraper.start()
    err = proc.stderr.read()
    out = proc.stdout.read()
    proc.wait()
    done.set()
    scraper.join()
    m = re.search(r'loop_ns=(\d+)', out + err)
    if proc.returncode != 0 or not m:
        sys.exit(f'{cmd} failed: {err}')
    return int(m.group(1)) / 1e9


def latscope_binary():
    """The release binary, built when missing."""
    latscope = os.path.join(ROOT, 'target/release/latscope')
    if not os.path.exists(latscope):
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    return latscope


def setup():
    """latscope, the compiled USDT target, its probe specs and the equivalent bpftrace one-liner."""
    t = os.path.join(tempfile.mkdtemp(), 'usdt_target')
    subprocess.run(['cc', '-O2', '-o', t, os.path.join(ROOT, 'tests/targets/usdt_target.c')], check=True)
    p = lambda name: f'usdt:{t}:latscope_test:{name}'
    one_liner = (f'{p("request_start")} /pid == cpid/ {{ @s[arg0] = nsecs; }} '
                 f'{p("request_end")} /pid == cpid && @s[arg0]/ {{ @h = hist(nsecs - @s[arg0]); delete(@s[arg0]); }} '
                 f'{p("tick")} /pid == cpid/ {{ @n = count(); }}')
    return latscope_binary(), t, p, one_liner


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--iterations', type=int, default=200000)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--serve', action='store_true', help='also time live --serve while scraped')
    ap.add_argument('--fork-heavy', type=int, metavar='N', help='time following a tree of N processes instead')
    args = ap.parse_args()
    if args.fork_heavy:
        return fork_heavy(args.fork_heavy, args.runs)
    latscope, t, p, one_liner = setup()
    tmp = os.path.dirname(t)
    target = [t, str(args.iterations), '0', '1']
    commands = {
        'untraced': target,
        'bpftrace one-liner (hist + count)': ['bpftrace', '-c', ' '.join(target), '-e', one_liner],
        'latscope live (span + rate)': [latscope, 'live', '-q', '--span', f'req={p("request_start")}..{p("request_end")}',
                                        '--rate', p('tick'), '--'] + target,
    }
    # --record-spans: every span printed (the limit above the iterations), and only the first
    # 1000 plus new maxima (past the limit, two map reads per span and no output).
    for label, limit in [('every span', 10_000_000), ('first 1000', 1000)]:
        save = os.path.join(tmp, f'record-{limit}.json')
        commands[f'latscope live --record-spans ({label})'] = [
            latscope, 'live', '-q', '--save', save, '--record-spans', '--max-spans', str(limit),
            '--span', f'req={p("request_start")}..{p("request_end")}', '--rate', p('tick'), '--'] + target
    served = {}
    if args.serve:
        live = [latscope, 'live', '-q', '--interval', '1', '--span', f'req={p("request_start")}..{p("request_end")}',
                '--rate', p('tick')]
        commands['latscope live --interval 1'] = live + ['--'] + target
        served['latscope live --interval 1 --serve, scraped every 0.1 s'] = \
            live + ['--serve', '127.0.0.1:0', '--'] + target
    results = {}
    for _ in range(args.runs):  # interleaved, so drifts in machine load hit every command alike
        for name, cmd in commands.items():
            results.setdefault(name, []).append(timed(cmd))
        for name, cmd in served.items():
            results.setdefault(name, []).append(timed_served(cmd))
    base = statistics.median(results['untraced'])
    print(f'{args.iterations} iterations x 3 probe hits; the loop time the target measures itself; '
          f'{args.runs} interleaved runs, medians\n')
    print('| command | loop time [s] (median) | min–max [s] | per probe hit [ns] | slowdown vs untraced |')
    print('|---|--:|--:|--:|--:|')
    for name, loops in results.items():
        median = statistics.median(loops)
        per_hit = (median - base) / (3 * args.iterations) * 1e9
        print(f'| {name} | {median:.3f} | {min(loops):.3f}–{max(loops):.3f} | {per_hit:.0f} | {median / base:.1f}x |')
    one = statistics.median(results['bpftrace one-liner (hist + count)'])
    ours = statistics.median(results['latscope live (span + rate)'])
    print(f'\nlatscope live / one-liner: {ours / one:.3f} (issue 3 allows 1.10)')
    for name, loops in results.items():
        if '--record-spans' in name:
            print(f'{name} / latscope live: {statistics.median(loops) / ours:.3f}')
    if SCRAPE_SECONDS:
        print(f'live --serve: {len(SCRAPE_SECONDS)} scrapes (protobuf), median '
              f'{statistics.median(SCRAPE_SECONDS) * 1e3:.2f} ms each, as the scraper saw it')


def fork_heavy(n, runs):
    """Following a process tree: a shell loop of N /bin/true, untraced and traced."""
    latscope = latscope_binary()
    loop = (f's=$(date +%s%N); i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done; '
            f'e=$(date +%s%N); echo loop_ns=$((e-s))')
    target = ['/bin/sh', '-c', loop]
    rate = ['--rate', 'tracepoint:sched:sched_process_exec']
    commands = {
        'untraced': target,
        'latscope live, the whole tree': [latscope, 'live', '-q'] + rate + ['--'] + target,
        'latscope live --this-process-only': [latscope, 'live', '-q', '--this-process-only'] + rate + ['--'] + target,
    }
    results = {}
    for _ in range(runs):
        for name, cmd in commands.items():
            results.setdefault(name, []).append(timed(cmd))
    base = statistics.median(results['untraced'])
    print(f'{n} fork+exec of /bin/true in a shell loop, timed by the shell; {runs} interleaved runs, medians\n')
    print('| command | loop time [s] (median) | min–max [s] | per process [µs] over untraced | slowdown |')
    print('|---|--:|--:|--:|--:|')
    for name, loops in results.items():
        median = statistics.median(loops)
        print(f'| {name} | {median:.3f} | {min(loops):.3f}–{max(loops):.3f} | '
              f'{(median - base) / n * 1e6:.1f} | {median / base:.2f}x |')


if __name__ == '__main__':
    main()
