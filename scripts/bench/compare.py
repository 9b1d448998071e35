#!/usr/bin/env python3
"""Time `latscope compare` (reading two results, a bootstrap and a Mann-Whitney test per item).

    scripts/bench/compare.py NEW_BINARY [OLD_BINARY] [--runs 5]

Inputs, made in a private temporary directory:
  spans   the two bundled glmark2/weston logs (normal and throttled) as `wayland -f json`
          results: 3 items of 500-2100 samples each;
  lab-ipc a 48-configuration IPC matrix (inproc, pipe, unix-stream, shm-futex; thread and
          process peers; 4 payloads; ping-pong and stream) of 2000 messages each;
  bench   two bench results of 3 commands x 30 runs.
Prints the median wall time of each comparison (and the old binary's where it reads the kind).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(binary, args, out=None):
    with open(out, "wb") if out else open(os.devnull, "wb") as sink:
        subprocess.run([binary] + args, stdout=sink, stderr=subprocess.DEVNULL, check=True)


def timed(binary, args, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run([binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
        if r.returncode != 0:
            return None
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("new")
    p.add_argument("old", nargs="?")
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    d = tempfile.mkdtemp(prefix="latscope-bench-")
    logs = os.path.join(ROOT, "tests/data/compare")
    for name in ("before", "throttled"):
        run(a.new, ["wayland", "-f", "json", f"{logs}/glmark2-weston.{name}.client.log"],
            f"{d}/spans-{name}.json")
    for i in (1, 2):
        run(a.new, ["lab", "ipc", "-f", "json", "--transport", "inproc,pipe,unix-stream,shm-futex",
                    "--peer", "thread,process", "--payload", "8,64,1KiB,4KiB",
                    "--pattern", "ping-pong,stream", "--count", "2000"], f"{d}/ipc-{i}.json")
        run(a.new, ["bench", "-f", "json", "--runs", "30", "true", "sleep 0", "true --version"],
            f"{d}/bench-{i}.json")
    cases = [("spans (3 items)", "spans-before.json", "spans-throttled.json"),
             ("lab-ipc (48 items)", "ipc-1.json", "ipc-2.json"),
             ("bench (3 items x 30 runs)", "bench-1.json", "bench-2.json")]
    print(f"{'comparison':<28} {'new [ms]':>10} {'old [ms]':>10}")
    for label, x, y in cases:
        args = ["compare", "-f", "json", f"{d}/{x}", f"{d}/{y}"]
        new = timed(a.new, args, a.runs)
        old = timed(a.old, args, a.runs) if a.old else None
        fmt = lambda t: "–" if t is None else f"{t * 1e3:.1f}"
        print(f"{label:<28} {fmt(new):>10} {fmt(old):>10}")


if __name__ == "__main__":
    main()
