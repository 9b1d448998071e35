#!/usr/bin/env python3
"""Two (or more) latscope builds side by side on the spans_throughput.py inputs, interleaved.

    scripts/bench/spans_ab.py BEFORE,AFTER [THREADS] [FORMATS] [--dir DIR]

    THREADS: comma-separated thread counts (default 1,2); a count of 1 is pinned to CPU 1
    FORMATS: comma-separated among perf,ftrace,babeltrace,chrome,jsonl,wayland (default all)

Each run is every binary at every thread count, in turn, RUNS times (env, default 7), so that a
burst of load on a shared machine hits all alike. Prints per format the median wall seconds and
MB/s of each, each binary's speed-up over its one-thread run, and whether every run wrote the
same document. The inputs are made by `spans_throughput.py --mb 100` (under --dir).
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAKE = ["--start", "sched:sched_wakeup", "--end", "sched:sched_switch", "--key", "pid=next_pid"]
CASES = {
    "perf": ("p.txt", WAKE),
    "ftrace": ("f.txt", WAKE),
    "babeltrace": ("b.txt", ["--span", "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit",
                             "--key", "addr,vtid"]),
    "chrome": ("c.json", []),
    "jsonl": ("j.jsonl", ["--span", "r=request_start..request_done", "--key", "id"]),
    "wayland": ("w.log", None),  # `latscope wayland`
}


def takes_threads(binary):
    """Whether `binary wayland` has --threads (builds before it read on one thread)."""
    return "--threads" in subprocess.run([binary, "wayland", "--help"], capture_output=True, text=True).stdout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--dir")]
    d = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--dir=")),
             os.path.join(ROOT, "target", "bench", "spans", "100MB"))
    bins = args[0].split(",")
    threads = (args[1] if len(args) > 1 else "1,2").split(",")
    only = args[2].split(",") if len(args) > 2 else list(CASES)
    runs = int(os.environ.get("RUNS", "7"))
    for name in only:
        f, rule = CASES[name]
        path = os.path.join(d, f)
        size = os.path.getsize(path) / 1e6
        times, docs = {}, set()
        for _ in range(runs):
            for b in bins:
                for t in threads:
                    cmd = [b, "wayland", "-f", "json", "--threads", t, path] if rule is None else \
                        [b, "spans", "-f", "json", *rule, "--threads", t, path]
                    if t == "1":
                        cmd = ["taskset", "-c", "1"] + cmd
                    if rule is None and not takes_threads(b):
                        at = cmd.index("--threads")  # a build before `wayland --threads`:
                        del cmd[at:at + 2]  # one thread whatever the count
                    start = time.perf_counter()
                    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
                    times.setdefault((b, t), []).append(time.perf_counter() - start)
                    docs.add(out)
        row = [name]
        for b in bins:
            med = {t: statistics.median(times[(b, t)]) for t in threads}
            row += [f"{os.path.basename(b)} {t} thr: {med[t]:.3f} s {size / med[t]:.0f} MB/s" for t in threads]
            if "1" in threads:
                row.append(" ".join(f"{t} thr {med['1'] / med[t]:.2f}x" for t in threads if t != "1"))
        row.append("same document" if len(docs) == 1 else "DOCUMENTS DIFFER")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
