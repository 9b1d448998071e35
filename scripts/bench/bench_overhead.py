#!/usr/bin/env python3
"""What `latscope bench` costs per run and what it does to the time it measures, next to
`hyperfine -N`, on `true` and on a ~20 ms CPU-bound program (tests/targets/spin.c).

    scripts/bench/bench_overhead.py [--repeats 5]

Per program and tool, medians of REPEATS interleaved repetitions:
  * reported: the median wall time the tool reports for one run;
  * harness: the tool's own elapsed time ÷ runs (what a run costs, including the tool's work
    between runs and its analysis at the end).
latscope is run with its default `--counters all` (timed runs with nothing attached, plus one
counted round every 4 blocks) and with `--counters none`. The perturbation table sets the wall
time of latscope's timed runs beside its counted runs (the same command with the inherited
counters attached, which is how every run was measured before counted runs were split off) and
beside hyperfine's.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median_of(runs, key='wall_ns'):
    return statistics.median(r[key] for r in runs)


def latscope(binary, command, runs, counters):
    start = time.perf_counter()
    out = subprocess.run([binary, 'bench', '--runs', str(runs), '--counters', counters, '--format', 'json',
                          command], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    c = json.loads(out.stdout)['commands'][0]
    counted = c.get('counted_runs') or []
    return {'reported': median_of(c['runs']) / 1e3, 'harness': elapsed / runs * 1e6,
            'counted': median_of(counted) / 1e3 if counted else None}


def hyperfine(command, runs, directory):
    path = os.path.join(directory, 'h.json')
    start = time.perf_counter()
    subprocess.run(['hyperfine', '-N', '--runs', str(runs), '--style', 'none', '--export-json', path, command],
                   capture_output=True, check=True)
    elapsed = time.perf_counter() - start
    with open(path) as f:
        r = json.load(f)['results'][0]
    os.remove(path)
    return {'reported': r['median'] * 1e6, 'harness': elapsed / runs * 1e6, 'counted': None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--repeats', type=int, default=5)
    args = ap.parse_args()
    binary = os.path.join(ROOT, 'target/release/latscope')
    subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix='bench-overhead-')
    spin = os.path.join(work, 'spin')
    subprocess.run(['cc', '-O2', '-o', spin, os.path.join(ROOT, 'tests/targets/spin.c')], check=True)
    programs = {'true': ('true', 1000), '20 ms spin': (f'{spin} 10000000', 100)}
    tools = {
        'latscope bench (default: --counters all)': lambda c, n: latscope(binary, c, n, 'all'),
        'latscope bench --counters none': lambda c, n: latscope(binary, c, n, 'none'),
        'hyperfine -N': lambda c, n: hyperfine(c, n, work),
    }
    results = {(p, t): [] for p in programs for t in tools}
    for _ in range(args.repeats):
        for p, (command, runs) in programs.items():
            for t, f in tools.items():
                results[(p, t)].append(f(command, runs))
    os.remove(spin)
    os.rmdir(work)
    print(f'{args.repeats} interleaved repetitions, medians; `true` 1000 runs, the 20 ms spin 100 runs\n')
    print('| program | tool | reported median [µs] | harness time per run [µs] |')
    print('|---|---|--:|--:|')
    for (p, t), rows in results.items():
        reported = statistics.median(r['reported'] for r in rows)
        harness = statistics.median(r['harness'] for r in rows)
        print(f'| {p} | {t} | {reported:.1f} | {harness:.1f} |')
    print('\nPerturbation: the same command timed with nothing attached, with the inherited counters attached, '
          'and by hyperfine\n')
    print('| program | latscope timed runs [µs] | latscope counted runs [µs] | counters add | hyperfine [µs] | '
          'latscope ÷ hyperfine |')
    print('|---|--:|--:|--:|--:|--:|')
    for p in programs:
        rows = results[(p, 'latscope bench (default: --counters all)')]
        timed = statistics.median(r['reported'] for r in rows)
        counted = statistics.median(r['counted'] for r in rows)
        h = statistics.median(r['reported'] for r in results[(p, 'hyperfine -N')])
        print(f'| {p} | {timed:.1f} | {counted:.1f} | {100 * (counted / timed - 1):+.1f}% | {h:.1f} | '
              f'{timed / h:.3f} |')


if __name__ == '__main__':
    main()
