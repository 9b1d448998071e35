#!/usr/bin/env python3
"""What the X11 lab's client costs per request, beside x11perf and a C XCB client.

On one private Xvfb (started here, no TCP), for each latscope binary given (--bin NAME=PATH, e.g.
the build before and after a change), in interleaved rounds:

  * pipelined 10x10x24 PutImage and ShmPutImage (`lab x11 upload --pipelined`): requests/s,
    the client's CPU ns per request (from the lab's own /proc reading), the X server's, and the
    lab connection's requests per write (its `wire` counters);
  * the round trip (`lab x11 round-trip`): p50 ns, beside tests/targets/xcb_round_trip.c (libxcb,
    compiled here);
  * with --strace: system calls per request, counted by `strace -f -c` over a separate run
    (strace slows the run; only the counts are used).

x11perf -putimage10 -shmput10 runs before and after each round; its mean is the reference rate.
Medians over --rounds rounds. Prints a Markdown table (ns, per second).

  scripts/bench/x11_client.py --bin before=/tmp/latscope-before --bin after=target/release/latscope \\
      --rounds 5 --strace
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_xvfb():
    r, w = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(w), "-nolisten", "tcp", "-screen", "0", "1280x1024x24"],
        pass_fds=[w], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    os.close(w)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(r, 32)
        if not chunk:
            raise SystemExit("Xvfb exited before printing its display")
        number += chunk
    os.close(r)
    return proc, ":" + number.decode().strip()


def x11perf(display):
    out = subprocess.run(["x11perf", "-display", display, "-repeat", "1", "-time", "1",
                          "-putimage10", "-shmput10"], capture_output=True, text=True, check=True)
    rates = {}
    for line in out.stdout.splitlines():
        m = re.search(r"\(\s*([\d.]+)/sec\): (.*)$", line)
        if m:
            rates[m.group(2).strip()] = float(m.group(1))
    return rates


def lab(binary, display, args, strace=None):
    cmd = [binary, "lab", "x11", "--display", display, "-f", "json"] + args
    if strace:
        cmd = ["strace", "-f", "-c", "-o", strace] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {out.stderr}")
    return json.loads(out.stdout)


def strace_calls(path):
    """Total calls of the syscalls that move X traffic, from an `strace -c` summary."""
    calls = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit():
                calls[parts[-1]] = int(parts[3])
    io = ("sendmsg", "sendto", "writev", "write", "recvfrom", "recvmsg", "read", "poll", "ppoll")
    return sum(calls.get(k, 0) for k in io), calls


def c_round_trip(exe, display, n):
    out = subprocess.run([exe, "-n", str(n), "-w", "1000"], capture_output=True, text=True,
                         env=dict(os.environ, DISPLAY=display), check=True)
    return float(re.search(r"p50_ns=(\d+)", out.stdout).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--strace", action="store_true", help="count system calls per request")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    tmp = tempfile.mkdtemp(prefix="latscope-x11-bench-")
    os.chmod(tmp, 0o700)
    c_exe = os.path.join(tmp, "xcb_round_trip")
    subprocess.run(["cc", "-O2", "-o", c_exe, os.path.join(ROOT, "tests/targets/xcb_round_trip.c"),
                    "-lxcb"], check=True)
    xvfb, display = start_xvfb()
    rows = {}  # (name, config) -> list of dicts

    def add(name, config, **kv):
        rows.setdefault((name, config), []).append(kv)

    try:
        for rnd in range(a.rounds):
            print(f"round {rnd + 1}/{a.rounds}", file=sys.stderr)
            before = x11perf(display)
            for name, path in bins:
                doc = lab(path, display, ["upload", "--pipelined", "--size", "10x10", "--depth",
                                          "24", "-n", "100000000", "--max-time", "1s",
                                          "--warmup", "20000"])
                for r in doc["results"]:
                    ops = r["ops"]
                    w = r.get("wire") or {}
                    add(name, r["method"], rate=r["ops_per_s"],
                        client=r["sides"]["client"]["cpu_ns_per_msg"],
                        server=r["sides"]["server"]["cpu_ns_per_msg"],
                        per_write=(w["requests"] / w["writes"]) if w.get("writes") else None,
                        ops=ops)
                doc = lab(path, display, ["round-trip", "-n", "20000", "--warmup", "1000",
                                          "--max-time", "10s"])
                r = doc["results"][0]
                add(name, "round-trip", p50=r["p50"], client=r["sides"]["client"]["cpu_ns_per_msg"])
            add("C xcb", "round-trip", p50=c_round_trip(c_exe, display, 20000))
            after = x11perf(display)
            for label, key in (("PutImage 10x10 square", "put"), ("ShmPutImage 10x10 square", "shm")):
                add("x11perf", key, rate=(before[label] + after[label]) / 2)
        syscalls = {}
        if a.strace:
            for name, path in bins:
                for method in ("put", "shm"):
                    f = os.path.join(tmp, f"strace-{name}-{method}")
                    doc = lab(path, display, ["upload", "--pipelined", "--method", method,
                                              "--size", "10x10", "--depth", "24", "-n", "200000",
                                              "--warmup", "0", "--max-time", "30s"], strace=f)
                    total, _ = strace_calls(f)
                    syscalls[(name, method)] = total / doc["results"][0]["ops"]
                f = os.path.join(tmp, f"strace-{name}-rt")
                doc = lab(path, display, ["round-trip", "-n", "20000", "--warmup", "0",
                                          "--max-time", "30s"], strace=f)
                total, _ = strace_calls(f)
                syscalls[(name, "round-trip")] = total / doc["results"][0]["ops"]
            f = os.path.join(tmp, "strace-c")
            subprocess.run(["strace", "-c", "-o", f, c_exe, "-n", "20000", "-w", "0"],
                           env=dict(os.environ, DISPLAY=display), check=True, capture_output=True)
            syscalls[("C xcb", "round-trip")] = strace_calls(f)[0] / 20000
    finally:
        xvfb.terminate()
        xvfb.wait()

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def fmt(v, digits=0):
        return "–" if v is None else f"{v:,.{digits}f}"

    print(f"\nMedians of {a.rounds} interleaved rounds on one Xvfb (10x10 depth 24).\n")
    print("| client | configuration | requests/s | vs x11perf | p50 [ns] | client CPU [ns/request] "
          "| X CPU [ns/request] | requests per write | system calls per request |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    ref = {k: med([x["rate"] for x in rows.get(("x11perf", k), [])]) for k in ("put", "shm")}
    for (name, config), xs in rows.items():
        rate = med([x.get("rate") for x in xs])
        ratio = rate / ref[config] if rate and config in ref and name != "x11perf" else None
        print(f"| {name} | {config} | {fmt(rate)} | {fmt(ratio, 2)} | "
              f"{fmt(med([x.get('p50') for x in xs]))} | {fmt(med([x.get('client') for x in xs]))} | "
              f"{fmt(med([x.get('server') for x in xs]))} | {fmt(med([x.get('per_write') for x in xs]), 1)} | "
              f"{fmt(syscalls.get((name, config)), 3)} |")


if __name__ == "__main__":
    main()
