#!/usr/bin/env python3
"""Per-run overhead of `latscope bench` next to `hyperfine -N`, on `true`.

    scripts/bench/bench_overhead.py [--runs 500] [--repeats 5]

Two figures per tool, medians of REPEATS interleaved repetitions:
  * reported: the time the tool reports for one run of `true` (its measurement floor);
  * harness: the tool's own elapsed time ÷ runs (what a run costs, including the tool's work
    between runs: counters, bookkeeping, scheduling).
latscope opens its 4 software counters on every run (the PMU ones are not supported here).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def latscope(binary, runs):
    start = time.perf_counter()
    out = subprocess.run([binary, 'bench', '--runs', str(runs), '--format', 'json', 'true'],
                         capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    doc = json.loads(out.stdout)
    return doc['commands'][0]['median_ns'] / 1e3, elapsed / runs * 1e6


def hyperfine(runs):
    with tempfile.NamedTemporaryFile(suffix='.json') as f:
        start = time.perf_counter()
        subprocess.run(['hyperfine', '-N', '--runs', str(runs), '--style', 'none', '--export-json', f.name, 'true'],
                       capture_output=True, check=True)
        elapsed = time.perf_counter() - start
        doc = json.load(open(f.name))
    return doc['results'][0]['median'] * 1e6, elapsed / runs * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--runs', type=int, default=500)
    ap.add_argument('--repeats', type=int, default=5)
    args = ap.parse_args()
    binary = os.path.join(ROOT, 'target/release/latscope')
    subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    results = {'latscope bench': [], 'hyperfine -N': []}
    for _ in range(args.repeats):
        results['latscope bench'].append(latscope(binary, args.runs))
        results['hyperfine -N'].append(hyperfine(args.runs))
    print(f'`true`, {args.runs} runs, {args.repeats} interleaved repetitions, medians\n')
    print('| tool | reported time of `true` [µs] | harness time per run [µs] |')
    print('|---|--:|--:|')
    for name, rows in results.items():
        reported = statistics.median(r[0] for r in rows)
        harness = statistics.median(r[1] for r in rows)
        print(f'| {name} | {reported:.1f} | {harness:.1f} |')


if __name__ == '__main__':
    main()
