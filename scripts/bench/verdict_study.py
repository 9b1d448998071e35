#!/usr/bin/env python3
"""How far can the verdict of `latscope bench` be trusted on this machine? (The benchmark of
the benchmark.)

    scripts/bench/verdict_study.py [--trials 40] [--seconds 5] [--slower 1.03]

Uses tests/targets/spin.c, a CPU-bound loop whose work is set by its argument:
  (a) A/A: the same command twice. Any verdict other than `same` or `inconclusive` is a false
      alarm.
  (b) A/B: a variant doing 3% more work. Detection is the share of trials called `slower`.
Each trial benchmarks for at most SECONDS (--min-time = --max-time = SECONDS). The same pairs
are then run through hyperfine (-N, the same number of runs, all A then all B as it does), and
its reported ratio of means is read as a user would without an interval: on A/A it misleads
when it reports a difference of 1% or more; on A/B when it reports less than 1% (or the wrong
direction). Prints a Markdown table and writes every trial to target/bench/verdict_study.jsonl.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK = 10_000_000


def latscope_trial(latscope, a, b, seconds, seed):
    out = subprocess.run([latscope, 'bench', '--format', 'json', '--seed', str(seed), '--min-time', f'{seconds}s',
                          '--max-time', f'{seconds}s', a, b], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    c = doc['comparisons'][0]
    return {'verdict': c['verdict'], 'ratio': c['ratio'], 'ci': c['ci'], 'p': c['p_value'],
            'runs': len(doc['commands'][0]['runs'])}


def hyperfine_trial(a, b, runs):
    with tempfile.NamedTemporaryFile(suffix='.json') as f:
        subprocess.run(['hyperfine', '-N', '--runs', str(runs), '--style', 'none', '--export-json', f.name, a, b],
                       capture_output=True, check=True)
        doc = json.load(open(f.name))
    ma, mb = (r['mean'] for r in doc['results'])
    return {'ratio': mb / ma}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--trials', type=int, default=40)
    ap.add_argument('--seconds', type=float, default=5)
    ap.add_argument('--slower', type=float, default=1.03)
    args = ap.parse_args()
    latscope = os.path.join(ROOT, 'target/release/latscope')
    subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    spin = os.path.join(ROOT, 'target/bench/spin')
    os.makedirs(os.path.dirname(spin), exist_ok=True)
    subprocess.run(['cc', '-O2', '-o', spin, os.path.join(ROOT, 'tests/targets/spin.c')], check=True)
    a = f'{spin} {WORK}'
    b = f'{spin} {int(WORK * args.slower)}'
    log = open(os.path.join(ROOT, 'target/bench/verdict_study.jsonl'), 'a')
    rows = {}
    for case, (x, y) in {'A/A': (a, a), f'A/B {args.slower:.2f}x work': (a, b)}.items():
        ours, theirs = [], []
        for t in range(args.trials):
            r = latscope_trial(latscope, x, y, args.seconds, seed=t + 1)
            h = hyperfine_trial(x, y, r['runs'])
            ours.append(r)
            theirs.append(h)
            log.write(json.dumps({'case': case, 'trial': t, 'latscope': r, 'hyperfine': h}) + '\n')
            log.flush()
            print(f'{case} trial {t + 1}: latscope {r["verdict"]} ({r["ratio"]:.4f}, {r["runs"]} runs), '
                  f'hyperfine ratio {h["ratio"]:.4f}', file=sys.stderr)
        rows[case] = (ours, theirs)
    print(f'\n{args.trials} trials per case, {args.seconds:g} s of benchmarking each, spin {WORK} vs its variant\n')
    print('| case | latscope verdicts | latscope: wrong calls | hyperfine ratio (min–max) | hyperfine: misleading ratio |')
    print('|---|---|--:|---|--:|')
    for case, (ours, theirs) in rows.items():
        verdicts = {}
        for r in ours:
            verdicts[r['verdict']] = verdicts.get(r['verdict'], 0) + 1
        ratios = [h['ratio'] for h in theirs]
        if case == 'A/A':
            wrong = sum(1 for r in ours if r['verdict'] in ('faster', 'slower'))
            misleading = sum(1 for q in ratios if abs(q - 1) >= 0.01)
        else:
            wrong = sum(1 for r in ours if r['verdict'] != 'slower')
            misleading = sum(1 for q in ratios if q < 1.01)
        shown = ', '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))
        print(f'| {case} | {shown} | {wrong}/{len(ours)} ({100 * wrong / len(ours):.1f}%) | '
              f'{min(ratios):.4f}–{max(ratios):.4f} | {misleading}/{len(ratios)} ({100 * misleading / len(ratios):.1f}%) |')


if __name__ == '__main__':
    main()
