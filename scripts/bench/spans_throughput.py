#!/usr/bin/env python3
"""Throughput of `latscope spans` per input format, beside the tools that make the text.

    scripts/bench/spans_throughput.py BINARY [--mb 200] [--runs 3]

Inputs, made in a private temporary directory from the committed samples in tests/data/traces
(their events repeated with shifted time stamps until each file has about --mb megabytes):
perf script text, ftrace text, babeltrace2 text, Chrome JSON, JSON lines. Prints the median
of --runs of each: MB/s and events/s of latscope, then what perf script and babeltrace2 take
to write text of their own (when perf, lttng and babeltrace2 are installed and we are root).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from decimal import Decimal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACES = os.path.join(ROOT, "tests", "data", "traces")
STAMP = re.compile(r"(\d+\.\d+):")


def grow_text(src, dst, mb):
    lines = [l for l in open(src, encoding="utf-8") if STAMP.search(l) and not l.startswith("#")]
    first = Decimal(STAMP.search(lines[0]).group(1))
    last = Decimal(STAMP.search(lines[-1]).group(1))
    period = last - first + Decimal("0.001")
    places = len(STAMP.search(lines[0]).group(1).split(".")[1])
    n = 0
    with open(dst, "w", encoding="utf-8") as out:
        k = 0
        while out.tell() < mb * 1_000_000:
            shift = period * k
            for l in lines:
                m = STAMP.search(l)
                t = Decimal(m.group(1)) + shift
                out.write(l[: m.start(1)] + f"{t:.{places}f}" + l[m.end(1):])
                n += 1
            k += 1
    return n


def grow_babeltrace(src, dst, mb):
    lines = [l for l in open(src, encoding="utf-8") if l.startswith("[")]
    n = 0
    with open(dst, "w", encoding="utf-8") as out:
        k = 0
        while out.tell() < mb * 1_000_000:
            for l in lines:
                stamp, rest = l[1:].split("]", 1)
                t = Decimal(stamp.split(":")[2]) if ":" in stamp else Decimal(stamp)
                secs = 1000 + k * 10 + t % 10
                out.write(f"[{secs:.9f}]{rest}")
                n += 1
            k += 1
    return n


def grow_chrome(src, dst, mb):
    text = open(src, encoding="utf-8").read()
    events = []
    for line in text.splitlines()[1:]:
        line = line.rstrip(",")
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    n = 0
    with open(dst, "w", encoding="utf-8") as out:
        out.write('{"traceEvents":[\n')
        k = 0
        while out.tell() < mb * 1_000_000:
            for e in events:
                e = dict(e)
                if "ts" in e:
                    e["ts"] = e["ts"] + k * 10_000_000
                out.write(json.dumps(e) + ",\n")
                n += 1
            k += 1
        out.write('{"ph":"M","name":"end"}]}\n')
    return n


def grow_jsonl(dst, mb):
    n = 0
    with open(dst, "w", encoding="utf-8") as out:
        while out.tell() < mb * 1_000_000:
            out.write(f'{{"ts": {n * 1000}, "name": "request_start", "id": {n}}}\n')
            out.write(f'{{"ts": {n * 1000 + 700}, "name": "request_done", "id": {n}}}\n')
            n += 2
    return n


def timed(cmd, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    wake = ["--start", "sched:sched_wakeup", "--end", "sched:sched_switch", "--key", "pid=next_pid"]
    with tempfile.TemporaryDirectory(prefix="latscope-bench-") as d:
        cases = [
            ("perf", grow_text(os.path.join(TRACES, "sched.perf.txt"), f"{d}/p.txt", a.mb), f"{d}/p.txt", wake),
            ("ftrace", grow_text(os.path.join(TRACES, "sched.ftrace.txt"), f"{d}/f.txt", a.mb), f"{d}/f.txt", wake),
            ("babeltrace", grow_babeltrace(os.path.join(TRACES, "cyg-profile.babeltrace.txt"), f"{d}/b.txt", a.mb), f"{d}/b.txt",
             ["--span", "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit", "--key", "addr,vtid"]),
            ("chrome", grow_chrome(os.path.join(TRACES, "chromium-startup.truncated.json"), f"{d}/c.json", a.mb), f"{d}/c.json", []),
            ("jsonl", grow_jsonl(f"{d}/j.jsonl", a.mb), f"{d}/j.jsonl", ["--span", "r=request_start..request_done", "--key", "id"]),
        ]
        print(f"{'format':<11} {'MB':>6} {'events':>10} {'median s':>9} {'MB/s':>8} {'Mevents/s':>10}")
        for name, events, path, rule in cases:
            size = os.path.getsize(path) / 1e6
            t = timed([a.binary, "spans", "-f", "json", *rule, path], a.runs)
            print(f"{name:<11} {size:>6.0f} {events:>10} {t:>9.2f} {size / t:>8.0f} {events / t / 1e6:>10.2f}")
        tools(d, a.runs)


def tools(d, runs):
    """perf script and babeltrace2 writing their text, for scale."""
    if os.geteuid() != 0:
        return
    try:
        subprocess.run(["perf", "record", "-q", "-a", "-e", "sched:sched_wakeup,sched:sched_switch",
                        "-o", f"{d}/perf.data", "--", "sh", "-c", "for i in $(seq 2000); do sleep 0.0005; done"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
        out = subprocess.run(["perf", "script", "--ns", "-i", f"{d}/perf.data"], capture_output=True, check=True).stdout
        t = timed(["perf", "script", "--ns", "-i", f"{d}/perf.data"], runs)
        lines = out.count(b"\n")
        print(f"perf script --ns: {len(out) / 1e6:.1f} MB of text, {lines} events in {t:.2f} s: "
              f"{len(out) / 1e6 / t:.0f} MB/s, {lines / t / 1e6:.2f} Mevents/s")
    except (OSError, subprocess.SubprocessError) as e:
        print(f"perf script: not measured ({e})")


if __name__ == "__main__":
    main()
