#!/usr/bin/env python3
"""latscope's pipe ping-pong between two processes against `perf bench sched pipe`.

Both pass a 4-byte message back and forth over two pipes between two processes; perf reports
total time / round trips ("usecs/op"), latscope every round trip. The two tools run alternately,
five times each, so drifts of this shared machine hit both alike. The issue's bar: the medians
agree within 15%.

    scripts/bench/ipc_vs_perf.py [--loops 100000] [--reps 5] [--latscope target/release/latscope]

Needs linux-perf (Debian) for `perf`.
"""
import argparse
import json
import re
import statistics
import subprocess


def perf_once(loops):
    out = subprocess.run(["perf", "bench", "sched", "pipe", "-l", str(loops)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"([\d.]+) usecs/op", out).group(1)) * 1000.0


def latscope_once(binary, loops):
    out = subprocess.run([binary, "lab", "ipc", "--transport", "pipe", "--peer", "process",
                          "--payload", "4", "--count", str(loops), "--warmup", "1000",
                          "--max-time", "120s", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)["results"][0]
    return r["mean"], r["p50"], json.loads(out)["timer"]["median_ns"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loops", type=int, default=100000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--latscope", default="target/release/latscope")
    a = ap.parse_args()
    perf, mean, p50, timer = [], [], [], []
    for i in range(a.reps):
        perf.append(perf_once(a.loops))
        m, p, t = latscope_once(a.latscope, a.loops)
        mean.append(m)
        p50.append(p)
        timer.append(t)
        print(f"rep {i + 1}: perf {perf[-1]:.0f} ns/op   latscope mean {m:.0f} ns, p50 {p} ns")
    mp, mm, m50 = statistics.median(perf), statistics.median(mean), statistics.median(p50)
    ratio = mm / mp
    print(f"\nmedians of {a.reps}: perf bench sched pipe {mp:.0f} ns per round trip; "
          f"latscope mean {mm:.0f} ns (ratio {ratio:.3f}), p50 {m50:.0f} ns (ratio {m50 / mp:.3f}); "
          f"timer overhead {statistics.median(timer):.0f} ns")
    ok = abs(ratio - 1.0) <= 0.15
    print("agreement within 15%:", "yes" if ok else "NO")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
