#!/usr/bin/env python3
"""How far can the verdict of `latscope bench` be trusted on this machine? (The benchmark of
the benchmark.)

    scripts/bench/verdict_study.py [--trials 40] [--seconds 10] [--changes 0,0.005,0.01]

Uses tests/targets/spin.c, a CPU-bound loop whose work is set by its argument (WORK iterations,
about 15-20 ms here). For each change c in --changes, TRIALS trials compare `spin WORK` with
`spin WORK*(1+c)`: c = 0 is A/A (any `faster`/`slower` is a false alarm), c > 0 is A/B
(detection = the share of trials called `slower`).

latscope runs with its defaults and `--max-time SECONDS`: it stops as soon as the verdict is
clear, else at SECONDS. hyperfine then runs the same pair with the same number of runs (-N, all A
then all B, as it does), and is read the two ways its users can: its printed ratio of means with
the propagated ± (a change is "called" when ratio ± error excludes 1), and Welch's t-test on the
exported times at p < 0.05 (what hyperfine's scripts/welch_ttest.py does). Prints a Markdown
table; every trial goes to target/bench/verdict_study.jsonl.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK = 8_000_000


def latscope_trial(latscope, a, b, seconds, seed):
    start = time.perf_counter()
    out = subprocess.run([latscope, 'bench', '--format', 'json', '--seed', str(seed),
                          '--max-time', f'{seconds}s', a, b], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    doc = json.loads(out.stdout)
    wall = doc['comparisons'][0]['metrics'][0]
    assert wall['metric'] == 'wall'
    return {'verdict': wall['verdict'], 'ratio': wall['p50']['ratio'], 'ci': wall['p50']['ci'],
            'p': wall['p_value'], 'detectable': wall.get('detectable'), 'stop': doc.get('stop'),
            'runs': len(doc['commands'][0]['runs']), 'elapsed': elapsed}


def welch_p(xa, xb):
    """Two-sided Welch t-test p-value (normal tail for the t statistic: n is in the hundreds)."""
    va, vb = statistics.variance(xa), statistics.variance(xb)
    se = math.sqrt(va / len(xa) + vb / len(xb))
    if se == 0:
        return 1.0
    t = (statistics.mean(xb) - statistics.mean(xa)) / se
    return math.erfc(abs(t) / math.sqrt(2))


def hyperfine_trial(a, b, runs, directory):
    path = os.path.join(directory, 'hyperfine.json')
    subprocess.run(['hyperfine', '-N', '--runs', str(runs), '--style', 'none', '--export-json', path, a, b],
                   capture_output=True, check=True)
    with open(path) as f:
        doc = json.load(f)
    ra, rb = doc['results']
    ratio = rb['mean'] / ra['mean']
    error = ratio * math.sqrt((ra['stddev'] / ra['mean']) ** 2 + (rb['stddev'] / rb['mean']) ** 2)
    return {'ratio': ratio, 'error': error, 'welch_p': welch_p(ra['times'], rb['times'])}


def hyperfine_calls(h):
    """'slower', 'faster' or 'same' as each reading of hyperfine's output calls it."""
    by_error = 'slower' if h['ratio'] - h['error'] > 1 else 'faster' if h['ratio'] + h['error'] < 1 else 'same'
    by_welch = ('slower' if h['ratio'] > 1 else 'faster') if h['welch_p'] < 0.05 else 'same'
    return by_error, by_welch


def summarise(change, ours, theirs):
    n = len(ours)
    verdicts = {}
    for r in ours:
        verdicts[r['verdict']] = verdicts.get(r['verdict'], 0) + 1
    shown = ', '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))
    target = 'slower' if change > 0 else None
    calls = [hyperfine_calls(h) for h in theirs]
    if target:
        ok = lambda v: v == target
        rate = lambda k: f'{k}/{n} ({100 * k / n:.0f}%) detected'
    else:
        ok = lambda v: v in ('faster', 'slower')
        rate = lambda k: f'{k}/{n} ({100 * k / n:.1f}%) false alarms'
    ours_k = sum(1 for r in ours if ok(r['verdict']))
    err_k = sum(1 for c in calls if ok(c[0]))
    welch_k = sum(1 for c in calls if ok(c[1]))
    seconds = statistics.median(r['elapsed'] for r in ours)
    runs = statistics.median(r['runs'] for r in ours)
    mde = [r['detectable'] for r in ours if r.get('detectable')]
    mde_text = f'{100 * statistics.median(mde):.2f}%' if mde else '–'
    name = 'A/A' if change == 0 else f'+{100 * change:g}% work'
    return (f'| {name} | {shown} | {rate(ours_k)} | {seconds:.1f} s / {runs:.0f} | {mde_text} | '
            f'{rate(err_k)} | {rate(welch_k)} |')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--trials', type=int, default=40)
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--changes', default='0,0.005,0.01')
    ap.add_argument('--work', type=int, default=WORK)
    args = ap.parse_args()
    latscope = os.path.join(ROOT, 'target/release/latscope')
    subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    os.makedirs(os.path.join(ROOT, 'target/bench'), exist_ok=True)
    work = tempfile.mkdtemp(prefix='verdict-study-')  # private (0700), removed at the end
    spin = os.path.join(work, 'spin')
    subprocess.run(['cc', '-O2', '-o', spin, os.path.join(ROOT, 'tests/targets/spin.c')], check=True)
    changes = [float(c) for c in args.changes.split(',')]
    log = open(os.path.join(ROOT, 'target/bench/verdict_study.jsonl'), 'a')
    rows = []
    for change in changes:
        a = f'{spin} {args.work}'
        b = f'{spin} {round(args.work * (1 + change))}'
        ours, theirs = [], []
        for t in range(args.trials):
            r = latscope_trial(latscope, a, b, args.seconds, seed=t + 1)
            h = hyperfine_trial(a, b, r['runs'], work)
            ours.append(r)
            theirs.append(h)
            log.write(json.dumps({'change': change, 'trial': t, 'latscope': r, 'hyperfine': h}) + '\n')
            log.flush()
            print(f'+{100 * change:g}% trial {t + 1}: latscope {r["verdict"]} ({r["ratio"]:.4f}, {r["runs"]} runs, '
                  f'{r["elapsed"]:.1f} s, stop {r["stop"]}), hyperfine {h["ratio"]:.4f} ± {h["error"]:.4f}, '
                  f'Welch p {h["welch_p"]:.3f}', file=sys.stderr)
        rows.append(summarise(change, ours, theirs))
    os.remove(spin)
    hf = os.path.join(work, 'hyperfine.json')
    if os.path.exists(hf):
        os.remove(hf)
    os.rmdir(work)
    print(f'\n{args.trials} trials per case, `latscope bench --max-time {args.seconds:g}s` (defaults otherwise), '
          f'spin {args.work} vs its variant; hyperfine -N with the same number of runs\n')
    print('| case | latscope verdicts | latscope | latscope time / runs (median) | detectable change (median) | '
          'hyperfine ratio ± error | hyperfine + Welch t-test |')
    print('|---|---|--:|--:|--:|--:|--:|')
    for row in rows:
        print(row)


if __name__ == '__main__':
    main()
