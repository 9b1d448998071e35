#!/usr/bin/env python3
"""What latscope's BPF programs cost per event, from the kernel's own accounting.

    sudo scripts/bench/live_bpf_cost.py [--iterations 200000] [--forks 2000] [--runs 3]

With `kernel.bpf_stats_enabled=1` the kernel counts, per BPF program, how often it ran and how
long (`run_cnt`, `run_time_ns` in /proc/PID/fdinfo of the process that holds it). That is the
tracer's own time, charged per event, and much less sensitive to the rest of the machine than
wall time is. Two comparisons:

1. Per probe hit: the USDT test target with no busy-wait (three probe hits per iteration) under
   `latscope live` (one span, one rate) and under the hand-written bpftrace one-liner.
2. Following a process tree: a shell loop that starts /bin/true N times, under `latscope live`
   over the whole tree and with --this-process-only; the difference per process is the cost of
   the sched_process_fork/exit programs and the map of traced pids.

Prints medians over --runs of the summed BPF time per event (ns). Needs root and bpftrace.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import live_overhead  # noqa: E402  (the shared target and one-liner)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bpf_totals(pid):
    """(run_cnt, run_time_ns) summed over the BPF programs process `pid` holds."""
    cnt = ns = 0
    for fd in glob.glob(f'/proc/{pid}/fdinfo/*'):
        try:
            text = open(fd).read()
        except OSError:
            continue
        if 'prog_type' not in text:
            continue
        fields = dict(line.split(':', 1) for line in text.splitlines() if ':' in line)
        cnt += int(fields.get('run_cnt', '0').strip() or 0)
        ns += int(fields.get('run_time_ns', '0').strip() or 0)
    return cnt, ns


def bpftrace_of(pid):
    """The bpftrace process: `pid` itself, or its child."""
    if 'bpftrace' in open(f'/proc/{pid}/comm').read():
        return pid
    for children in glob.glob(f'/proc/{pid}/task/*/children'):
        for child in open(children).read().split():
            try:
                if 'bpftrace' in open(f'/proc/{child}/comm').read():
                    return int(child)
            except OSError:
                pass
    return None


def measured(cmd):
    """Runs `cmd`, polling its bpftrace's BPF totals; the last reading before it ends."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = (0, 0)
    while proc.poll() is None:
        bt = bpftrace_of(proc.pid)
        if bt:
            reading = bpf_totals(bt)
            if reading[0] >= last[0]:
                last = reading
        time.sleep(0.05)
    return last


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--iterations', type=int, default=200000)
    ap.add_argument('--forks', type=int, default=2000)
    ap.add_argument('--runs', type=int, default=3)
    args = ap.parse_args()
    subprocess.run(['sysctl', '-q', '-w', 'kernel.bpf_stats_enabled=1'], check=True)
    latscope, t, p, one_liner = live_overhead.setup()
    target = [t, str(args.iterations), '0', '1', '300']
    loop = f'i=0; while [ $i -lt {args.forks} ]; do /bin/true; i=$((i+1)); done'
    rate = ['--rate', 'tracepoint:sched:sched_process_exec']
    cases = {
        'probe hits: bpftrace one-liner (hist + count)': (['bpftrace', '-c', ' '.join(target), '-e', one_liner], 3 * args.iterations),
        'probe hits: latscope live (span + rate)': ([latscope, 'live', '-q', '--span', f'req={p("request_start")}..{p("request_end")}',
                                                      '--rate', p('tick'), '--'] + target, 3 * args.iterations),
        'tree: latscope live, the whole tree': ([latscope, 'live', '-q'] + rate + ['--', '/bin/sh', '-c', loop], args.forks),
        'tree: latscope live --this-process-only': ([latscope, 'live', '-q', '--this-process-only'] + rate +
                                                    ['--', '/bin/sh', '-c', loop], args.forks),
    }
    results = {}
    for _ in range(args.runs):
        for name, (cmd, events) in cases.items():
            cnt, ns = measured(cmd)
            results.setdefault(name, []).append((cnt, ns / events))
    print(f'BPF run time from the kernel (kernel.bpf_stats_enabled), medians of {args.runs} runs\n')
    print('| case | BPF programs run (median) | BPF ns per event (median) | min–max |')
    print('|---|--:|--:|--:|')
    for name, rows in results.items():
        per = [r[1] for r in rows]
        print(f'| {name} | {statistics.median(r[0] for r in rows):.0f} | {statistics.median(per):.0f} | '
              f'{min(per):.0f}–{max(per):.0f} |')
    tree = statistics.median(r[1] for r in results['tree: latscope live, the whole tree'])
    alone = statistics.median(r[1] for r in results['tree: latscope live --this-process-only'])
    print(f'\nfollowing the tree costs {tree - alone:.0f} ns of BPF time per process started')


if __name__ == '__main__':
    main()
