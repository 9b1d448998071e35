#!/usr/bin/env python3
"""`latscope frames` on long logs: its time and memory as the logs grow.

    scripts/bench/frames_long.py BINARY [BINARY...] [--copies 100,1000,4000] [--runs 3]

Writes the committed weston run (tests/data/frames: weston-presentation-shm and
weston.server.log, with weston-simple-shm's connection in it) COPIES times over into a private
temporary directory, each copy's stamps and display times moved past the last (the 32-bit
stamp wraps as in a long capture), and runs `BINARY frames -f json CLIENT SERVER` under GNU time
RUNS times. Prints a Markdown table of medians: the logs' size, the frames, the wall time, the
throughput and the peak RSS. Every run must report COPIES times the frames of one copy.
With several binaries (a build before a change and one after), their runs alternate on the same
files, so that a busy moment of a shared machine falls on both, and each row after the first
binary's gives its ratios to the first's.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/data/frames"
STAMP = re.compile(rb"^\[ *(\d+)\.(\d{3})\]")
PRESENTED = re.compile(rb"\.presented\((\d+), (\d+), (\d+),")


def stamps(lines):
    return [int(m[1]) * 1000 + int(m[2]) for m in map(STAMP.match, lines) if m]


def shifted(line, d_us):
    """`line` with its stamp (and a `presented` display time) `d_us` later."""
    m = STAMP.match(line)
    if not m:
        return line
    us = (int(m[1]) * 1000 + int(m[2]) + d_us) % (1 << 32)
    rest = line[m.end():]
    p = PRESENTED.search(rest)
    if p:
        t = ((int(p[1]) << 32) + int(p[2])) * 10**9 + int(p[3]) + d_us * 1000
        sec, ns = divmod(t, 10**9)
        rest = rest[: p.start()] + b".presented(%d, %d, %d," % (sec >> 32, sec & 0xFFFFFFFF, ns) + rest[p.end():]
    return b"[%7d.%03d]" % (us // 1000, us % 1000) + rest


def write_copies(copies, out):
    client = (DATA / "weston-presentation-shm.client.log").read_bytes().splitlines(keepends=True)
    server = (DATA / "weston.server.log").read_bytes().splitlines(keepends=True)
    all_stamps = stamps(client) + stamps(server)
    period = max(all_stamps) - min(all_stamps) + 1_000_000
    paths = []
    for lines, name in ((client, "client.log"), (server, "server.log")):
        path = out / name
        with open(path, "wb") as f:
            for k in range(copies):
                f.writelines(shifted(line, k * period) for line in lines)
        paths.append(path)
    return paths


def run(binary, client, server):
    with tempfile.NamedTemporaryFile("r") as usage:
        out = subprocess.run(
            ["/usr/bin/time", "-f", "%e %M", "-o", usage.name, binary, "frames", "-f", "json", client, server],
            capture_output=True,
            check=True,
        )
        wall, rss_kib = usage.read().split()[-2:]
    doc = json.loads(out.stdout)
    return float(wall), int(rss_kib), doc["frames"]["frames"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary", nargs="+")
    ap.add_argument("--copies", default="100,1000,4000")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    several = len(args.binary) > 1
    print(("| binary " if several else "") + "| copies | logs | frames | wall | MB/s | peak RSS |" + (" wall ratio | RSS ratio |" if several else ""))
    print(("|---" if several else "") + "|--:|--:|--:|--:|--:|--:|" + ("--:|--:|" if several else ""))
    one = None
    for copies in map(int, args.copies.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            client, server = write_copies(copies, Path(tmp))
            size = client.stat().st_size + server.stat().st_size
            runs = {b: [] for b in args.binary}
            for _ in range(args.runs):
                for b in args.binary:
                    runs[b].append(run(b, str(client), str(server)))
        first = None
        for b in args.binary:
            frames = runs[b][0][2]
            one = one or frames // copies
            if frames != one * copies:
                sys.exit(f"{b}: {copies} copies gave {frames} frames, not {one * copies}")
            wall = statistics.median(r[0] for r in runs[b])
            rss = statistics.median(r[1] for r in runs[b])
            first = first or (wall, rss)
            row = f"| {copies} | {size / 1e6:.0f} MB | {frames} | {wall:.2f} s | {size / 1e6 / wall:.0f} | {rss / 1024:.1f} MiB |"
            if several:
                row = f"| {b} " + row + f" {wall / first[0]:.2f} | {rss / first[1]:.2f} |"
            print(row)


if __name__ == "__main__":
    main()
