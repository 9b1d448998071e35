#!/usr/bin/env python3
"""Throughput and memory of `latscope wayland` on a large log, next to `grep -c` on the same file.

    scripts/bench/wayland.py [--size-mb 1024] [--runs 5] [--span commit-release]

Builds (once, cached under target/bench/) a log of SIZE MB from the real glmark2 client log
(mklog.py), then runs each command RUNS times pinned to one core (taskset -c 0) and reports the
median wall time, MB/s and the peak RSS (ru_maxrss of the child). Prints a Markdown table and
appends a JSON line to target/bench/results.jsonl. Numbers vary on a shared machine: compare
medians of runs made one after the other.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, 'tests/data/wayland/weston-glmark2-build.client.log')


def build(size_mb):
    out = os.path.join(ROOT, 'target/bench', f'glmark2-{size_mb}MB.client.log')
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        print(f'building {out} ...', file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(ROOT, 'scripts/bench/mklog.py'), SOURCE, str(size_mb), out + '.tmp'], check=True)
        os.rename(out + '.tmp', out)
    return out


def measure(cmd):
    """Wall seconds and peak RSS (MiB) of one run.

    Output goes to a pipe that is read and dropped, not to /dev/null: GNU grep stops at the
    first match when its output is /dev/null. The RSS comes from GNU time (Debian package
    `time`): ru_maxrss of a child forked from Python starts at Python's own high-water mark.
    """
    rss_file = os.path.join(ROOT, 'target/bench/rss.txt')
    start = time.perf_counter()
    proc = subprocess.Popen(['/usr/bin/time', '-f', '%M', '-o', rss_file] + cmd, stdout=subprocess.PIPE)
    while proc.stdout.read(1 << 16):
        pass
    status = proc.wait()
    wall = time.perf_counter() - start
    if status not in (0, 1):  # grep -c exits 1 on no match
        sys.exit(f'{cmd} failed')
    with open(rss_file) as f:
        return wall, int(f.read().split()[-1]) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--size-mb', type=int, default=1024)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--span', default='commit-release')
    ap.add_argument('--binary', default=os.path.join(ROOT, 'target/release/latscope'))
    args = ap.parse_args()
    if not os.path.exists(args.binary):
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    log = build(args.size_mb)
    size = os.path.getsize(log)
    pin = ['taskset', '-c', '0']
    commands = {
        f'latscope wayland --span {args.span} --format json': pin + [args.binary, 'wayland', '--span', args.span, '--format', 'json', log],
        'latscope wayland (all spans)': pin + [args.binary, 'wayland', '--format', 'json', log],
        'grep -c wl_buffer': pin + ['grep', '-c', 'wl_buffer', log],
    }
    subprocess.run(['cat', log], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    rows = []
    for name, cmd in commands.items():
        results = [measure(cmd) for _ in range(args.runs)]
        walls = [wall for wall, _ in results]
        median = statistics.median(walls)
        rss = max(r for _, r in results)
        rows.append({'command': name, 'bytes': size, 'runs': args.runs, 'median_s': median,
                     'min_s': min(walls), 'max_s': max(walls), 'mb_per_s': size / median / 1e6, 'peak_rss_mib': rss})
    print(f'input: {log} ({size / 1e6:.0f} MB), {args.runs} runs each, pinned to CPU 0\n')
    print('| command | median [s] | min–max [s] | MB/s (median) | peak RSS [MiB] |')
    print('|---|--:|--:|--:|--:|')
    for r in rows:
        print(f"| {r['command']} | {r['median_s']:.3f} | {r['min_s']:.3f}–{r['max_s']:.3f} | {r['mb_per_s']:.0f} | {r['peak_rss_mib']:.1f} |")
    with open(os.path.join(ROOT, 'target/bench/results.jsonl'), 'a') as f:
        f.write(json.dumps({'time': time.time(), 'rows': rows}) + '\n')


if __name__ == '__main__':
    main()
