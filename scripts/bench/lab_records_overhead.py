#!/usr/bin/env python3
"""Does keeping individual messages (`--max-spans N`) perturb what the labs measure?

Runs each lab configuration alternately without and with `--max-spans` (N large enough to keep
every message, the worst case), `--reps` times each, and prints per configuration the median over
the repetitions of each run's p50 and p99 (ns), and the change with recording.

    scripts/bench/lab_records_overhead.py [--reps 5] [--latscope target/release/latscope]
        [--labs ipc,wayland,x11]

lab wayland starts a private weston headless and lab x11 a private Xvfb (Debian: weston, xvfb).
"""
import argparse
import json
import statistics
import subprocess

LABS = {
    "ipc": (["lab", "ipc", "--transport", "inproc,pipe,unix-stream,shm-spin", "--peer", "thread",
             "--pattern", "ping-pong,stream", "--payload", "8", "--count", "50000",
             "--warmup", "1000", "--max-time", "30s"], "results",
            lambda r: f"{r['transport']}/{r['pattern']}", lambda r: r),
    "wayland": (["lab", "wayland", "round-trip", "frames", "--count", "2000", "--frames", "300",
                 "--pace", "free-run", "--buffers", "3"], "results",
                lambda r: r["label"].split(" ")[0], None),
    "x11": (["lab", "x11", "round-trip", "upload", "--method", "put,shm", "-n", "5000",
             "--max-time", "30s"], "results",
            lambda r: f"{r['pattern']} {r.get('method') or ''}".strip(), lambda r: r),
}


def rows(binary, lab, record):
    args, key, name, dist = LABS[lab]
    cmd = [binary, *args, "--format", "json"]
    if record:
        cmd += ["--max-spans", "1000000"]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    out = {}
    for r in doc[key]:
        if dist is None:  # wayland: one row per metric
            for m in r["metrics"]:
                out[f"{name(r)} {m['name']}"] = (m["p50"], m["p99"])
        else:
            out[name(r)] = (dist(r)["p50"], dist(r)["p99"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--latscope", default="target/release/latscope")
    ap.add_argument("--labs", default="ipc,wayland,x11")
    a = ap.parse_args()
    for lab in a.labs.split(","):
        runs = {False: [], True: []}
        for _ in range(a.reps):
            for record in (False, True):
                runs[record].append(rows(a.latscope, lab, record))
        print(f"lab {lab}: median over {a.reps} runs of each run's p50 / p99, ns")
        print(f"  {'row':32} {'p50 off':>9} {'p50 on':>9} {'change':>7}   {'p99 off':>9} {'p99 on':>9}")
        for row in runs[False][0]:
            med = {rec: [statistics.median(r[row][i] for r in runs[rec]) for i in (0, 1)]
                   for rec in (False, True)}
            change = (med[True][0] - med[False][0]) / med[False][0] * 100 if med[False][0] else 0
            print(f"  {row:32} {med[False][0]:>9.0f} {med[True][0]:>9.0f} {change:>6.1f}%"
                  f"   {med[False][1]:>9.0f} {med[True][1]:>9.0f}")


if __name__ == "__main__":
    main()
