#!/usr/bin/env python3
"""How far can the verdict of `latscope bench` be trusted on this machine? (The benchmark of
the benchmark.)

    scripts/bench/verdict_study.py [--trials 40] [--seconds 10] [--changes 0,0.005,0.01]
        [--latscope target/debug/latscope] [--extra '--time cpu']

Uses tests/targets/spin.c, a CPU-bound loop whose work is set by its argument (WORK iterations,
about 15-20 ms here). For each change c in --changes, TRIALS trials compare `spin WORK` with
`spin WORK*(1+c)`: c = 0 is A/A (any `faster`/`slower` is a false alarm), c > 0 is A/B
(detection = the share of trials called `slower`).

latscope runs with its defaults and `--max-time SECONDS`: it stops as soon as the verdict is
clear, else at SECONDS. hyperfine then runs the same pair with the same number of runs (-N, all A
then all B, as it does), and is read the two ways its users can: its printed ratio of means with
the propagated ± (a change is "called" when ratio ± error excludes 1), and Welch's t-test on the
exported times at p < 0.05 (what hyperfine's scripts/welch_ttest.py does). The runs of each
latscope trial are also judged after the fact on CPU time (user + sys, latscope's paired rule
re-implemented here) and by the minimum (ratio of minima, bootstrap over blocks), to compare
estimators on the same runs. Prints a Markdown table; every trial goes to
target/bench/verdict_study.jsonl with its runs and the load average. Results:
scripts/bench/verdict_study.md.
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


def latscope_trial(latscope, a, b, seconds, seed, extra):
    start = time.perf_counter()
    cmd = [latscope, 'bench', '--format', 'json', '--seed', str(seed), '--max-time', f'{seconds}s', *extra, a, b]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, RUST_BACKTRACE='1'))
    if out.returncode != 0:
        sys.exit(f'{" ".join(cmd)} failed ({out.returncode}):\n{out.stderr}')
    elapsed = time.perf_counter() - start
    doc = json.loads(out.stdout)
    wall = doc['comparisons'][0]['metrics'][0]
    runs = lambda c, f: [f(r) for r in doc['commands'][c]['runs']]
    return {'verdict': wall['verdict'], 'metric': wall['metric'], 'ratio': wall['p50']['ratio'],
            'ci': wall['p50']['ci'], 'p': wall['p_value'], 'detectable': wall.get('detectable'),
            'stop': doc.get('stop'), 'looks': doc.get('looks', 0),
            'runs': len(doc['commands'][0]['runs']), 'elapsed': elapsed,
            'wall_ns': [runs(c, lambda r: r['wall_ns']) for c in (0, 1)],
            'cpu_ns': [runs(c, lambda r: r['user_ns'] + r['sys_ns']) for c in (0, 1)]}


def t_ppf(p, df):
    """Student's t quantile by bisection on the regularized incomplete beta (no SciPy here)."""
    def cdf(t):
        x = df / (df + t * t)
        tail = 0.5 * betainc(df / 2, 0.5, x)
        return 1 - tail if t > 0 else tail
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def betainc(a, b, x):
    """Regularized incomplete beta I_x(a, b) by its continued fraction (Numerical Recipes)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x > (a + 1) / (a + b + 2):
        return 1 - betainc(b, a, 1 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -((a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1 + num / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1 - c * d) < 1e-12:
            break
    return front * (f - 1) / a


def paired_verdict(before, after, alpha, noise):
    """latscope's rule (src/stats/paired.rs) on other values: Yuen's 20%-trimmed paired t on
    the log-ratios; slower/faster when significant and outside ±noise, same inside ±noise."""
    d = sorted(math.log(b / a) for a, b in zip(before, after) if a > 0 and b > 0)
    n = len(d)
    g = int(0.2 * n)
    kept = d[g:n - g]
    mean = sum(kept) / len(kept)
    w = [min(max(x, d[g]), d[n - g - 1]) for x in d]
    wm = sum(w) / n
    se = math.sqrt(sum((x - wm) ** 2 for x in w) / (n - 1)) / (0.6 * math.sqrt(n))
    df = n - 2 * g - 1
    half = t_ppf(1 - alpha / 2, df) * se
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    if lo >= 1 - noise and hi <= 1 + noise:
        return 'same'
    if lo > 1:
        return 'slower'
    if hi < 1:
        return 'faster'
    return 'inconclusive'


def min_verdict(before, after, alpha, seed):
    """The minimum as the estimator (additive noise only ever slows a run): the ratio of the
    two minima with a percentile-bootstrap interval over blocks."""
    import random
    rng = random.Random(seed)
    n = len(before)
    ratios = []
    for _ in range(1000):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(min(after[i] for i in idx) / min(before[i] for i in idx))
    ratios.sort()
    lo, hi = ratios[int(alpha / 2 * 1000)], ratios[int((1 - alpha / 2) * 1000) - 1]
    return 'slower' if lo > 1 else 'faster' if hi < 1 else 'inconclusive'


def other_estimators(r, seed):
    """The same trial's runs judged on CPU time (user + system) and by the minimum."""
    alpha = 0.05 - 0.001 * min(r['looks'], 25)
    return {'wall_paired': paired_verdict(*r['wall_ns'], alpha, 0.0025),
            'cpu_paired': paired_verdict(*r['cpu_ns'], alpha, 0.0025),
            'wall_min': min_verdict(*r['wall_ns'], alpha, seed),
            'cpu_min': min_verdict(*r['cpu_ns'], alpha, seed)}


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
    others = {}
    for r in ours:
        for k, v in r['others'].items():
            others.setdefault(k, []).append(v)
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
    other = ' | '.join(rate(sum(1 for v in others.get(k, []) if ok(v)))
                       for k in ('cpu_paired', 'wall_min', 'cpu_min'))
    return (f'| {name} | {shown} | {rate(ours_k)} | {seconds:.1f} s / {runs:.0f} | {mde_text} | '
            f'{other} | {rate(err_k)} | {rate(welch_k)} |')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--trials', type=int, default=40)
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--changes', default='0,0.005,0.01')
    ap.add_argument('--work', type=int, default=WORK)
    ap.add_argument('--latscope', help='this latscope binary (default: build target/release/latscope)')
    ap.add_argument('--extra', default='', help='more latscope bench options, e.g. "--time cpu"')
    args = ap.parse_args()
    latscope = args.latscope or os.path.join(ROOT, 'target/release/latscope')
    if not args.latscope:
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    extra = args.extra.split()
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
            r = latscope_trial(latscope, a, b, args.seconds, seed=t + 1, extra=extra)
            r['others'] = other_estimators(r, seed=t + 1)
            h = hyperfine_trial(a, b, r['runs'], work)
            ours.append(r)
            theirs.append(h)
            log.write(json.dumps({'change': change, 'trial': t, 'latscope': r, 'hyperfine': h,
                                  'load': os.getloadavg()}) + '\n')
            log.flush()
            print(f'+{100 * change:g}% trial {t + 1}: latscope {r["verdict"]} ({r["ratio"]:.4f}, {r["runs"]} runs, '
                  f'{r["elapsed"]:.1f} s, stop {r["stop"]}), others {r["others"]}, '
                  f'hyperfine {h["ratio"]:.4f} ± {h["error"]:.4f}, Welch p {h["welch_p"]:.3f}, '
                  f'load {os.getloadavg()[0]:.1f}', file=sys.stderr)
        rows.append(summarise(change, ours, theirs))
    os.remove(spin)
    hf = os.path.join(work, 'hyperfine.json')
    if os.path.exists(hf):
        os.remove(hf)
    os.rmdir(work)
    print(f'\n{args.trials} trials per case, `latscope bench --max-time {args.seconds:g}s {args.extra}` '
          f'(defaults otherwise), spin {args.work} vs its variant; the same runs judged on CPU time '
          f'(user + sys, paired trimmed t) and by the minimum (bootstrap over blocks); hyperfine -N '
          f'with the same number of runs\n')
    print('| case | latscope verdicts | latscope | latscope time / runs (median) | detectable change (median) | '
          'same runs: CPU time, paired | same runs: wall minimum | same runs: CPU minimum | '
          'hyperfine ratio ± error | hyperfine + Welch t-test |')
    print('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|')
    for row in rows:
        print(row)


if __name__ == '__main__':
    main()
