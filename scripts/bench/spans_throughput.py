#!/usr/bin/env python3
"""Throughput of `latscope spans` per input format, beside the tools that make the text.

    scripts/bench/spans_throughput.py BINARY [--mb 200] [--runs 5] [--cpu 1] [--threads N]
                                      [--only perf,chrome] [--compress zst] [--no-ceiling]
                                      [--keep-cache]

Inputs, made once under --dir (target/bench/spans/MB/) from the committed samples (their events
repeated with shifted time stamps until each file has about --mb megabytes): perf script text,
ftrace text, babeltrace2 text, Chrome JSON, JSON lines, and a WAYLAND_DEBUG log (mklog.py),
also as libwayland 1.23 and 1.26 print it and with its 32-bit clock wrapping half-way, the
stamps after the wrap padded with spaces (tests/independent/dialect.py). Each is dropped from
the page cache and read once (not with --keep-cache: how the cache holds a file moves both
tools, see evict()), then read --runs times, in rounds of every input in turn, by latscope
pinned to one CPU, interleaved with `grep -c` on the same file pinned alike (the floor: one
pass that finds lines), and by latscope unpinned with `--threads N` (default: every CPU; 0
skips it). Prints a Markdown table of medians: MB/s, events/s, the ratio to grep -c on one
core, then N threads' MB/s, their ratio to grep -c and their speed-up over one core, and the
ceiling of that speed-up on this machine (N one-core runs at once, each pinned to its own CPU:
a shared VM's cores do not each give a whole core's speed when all are busy; skip it with
--no-ceiling) with the share of it reached; then the same from the fastest run of each, with
the spread of the one-core runs; then what perf script takes to write text of its own (when
perf is installed and we are root). Machines are shared: compare medians of one run, and say
the load.
"""
import argparse
import json
import os
import re
import statistics
import sys
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


def evict(path):
    """Drops the file's pages from the page cache (they are clean once synced), so that the
    read after it caches the file as one sequential read does. The state of the page cache
    moves both tools: a 100 MB WAYLAND_DEBUG log cached page by page, as the cache had it after
    a day of other work, took latscope 121-125 ms and grep -c 44 ms; evicted and read again, 109
    and 32 ms (interleaved medians of 11-15, this VM, 2026-11-29): 2.8x grep -c, then 3.4x."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def measure(cmd):
    """Wall and CPU (user + system) seconds of one run, its output read from a pipe and dropped
    (GNU grep stops at the first match when its output is /dev/null). On a loaded machine the
    CPU time is the steadier of the two: a pinned run waiting for its CPU adds wall time only."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    while proc.stdout.read(1 << 16):
        pass
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # grep -c exits 1 on no match
        sys.exit(f"{cmd} failed")
    return wall, usage.ru_utime + usage.ru_stime


def cpu_list(spec):
    """The CPUs of a taskset list (`0,2`, `0-3`, `0-1,4`), in order."""
    cpus = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def at_once(cmds):
    """Wall seconds until every one of `cmds`, started together, has ended (outputs dropped)."""
    t = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in cmds]
    if any(p.wait() != 0 for p in procs):
        sys.exit(f"{cmds[0]} failed")
    return time.perf_counter() - t


def timed(cmd, runs):
    return statistics.median(measure(cmd)[0] for _ in range(runs))


def grow_wayland(dst, mb):
    """A WAYLAND_DEBUG log of the real glmark2 client log, repeated (mklog.py)."""
    src = os.path.join(ROOT, "tests", "data", "wayland", "weston-glmark2-build.client.log")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "mklog.py"), src,
                    str(round(mb * 1e6 / (1 << 20))), dst], check=True)
    return sum(1 for _ in open(dst, "rb"))


def wayland_dialect(plain, dst, dialect, wrap=False):
    """The WAYLAND_DEBUG log `plain` as libwayland `dialect` prints it (tests/independent/dialect.py:
    1.23 adds queues and `#` ids, 1.26 a thread id and the time of day): more bytes, the same events.
    With `wrap`, its stamps are shifted so that the 32-bit clock wraps half-way: after the wrap,
    libwayland's `[%7u.%03u]` pads every stamp with spaces (`[     10.816]`), as it does for a
    quarter of the clock's range."""
    wrapped = ["--wrap"] if wrap else []
    with open(dst, "wb") as out:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "independent", "dialect.py"), dialect,
                        *wrapped, plain], stdout=out, check=True)
    return sum(1 for _ in open(dst, "rb"))


def cached(d, name, make):
    """`make(path)` once: inputs are kept in --dir between runs (the generators take minutes)."""
    path = os.path.join(d, name)
    events_file = path + ".events"
    if not os.path.exists(events_file):
        n = make(path + ".tmp")
        os.rename(path + ".tmp", path)
        with open(events_file, "w") as f:
            f.write(str(n))
    return int(open(events_file).read()), path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench", "spans"),
                    help="where the generated inputs are kept (made once per --mb)")
    ap.add_argument("--cpu", default="1", help="the CPU every one-core run is pinned to (taskset -c)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="also run unpinned with --threads N (default: every CPU; 0: the one-core runs only)")
    ap.add_argument("--cpus", help="pin the --threads runs to these CPUs (taskset -c; default: unpinned)")
    ap.add_argument("--only", help="comma-separated formats to run (perf,ftrace,babeltrace,chrome,jsonl,wayland,"
                         "wayland-1.23,wayland-1.26,wayland-wrap)")
    ap.add_argument("--compress", choices=["gz", "zst", "xz"],
                    help="also read each input compressed so (pinned: the decoder thread shares the CPU; "
                         "MB/s of the text it holds, grep -c on the plain text)")
    ap.add_argument("--no-tools", action="store_true", help="skip perf script's own speed")
    ap.add_argument("--keep-cache", action="store_true",
                    help="read the inputs from the page cache as it is (default: each is dropped from it and "
                         "read once, so every input and every run starts from the same state)")
    ap.add_argument("--no-ceiling", action="store_true",
                    help="skip N one-core runs at once, each pinned to its own CPU (what the machine gives N "
                         "independent copies: the ceiling of --threads N's speed-up)")
    a = ap.parse_args()
    d = os.path.join(a.dir, f"{a.mb}MB")
    os.makedirs(d, exist_ok=True)
    wake = ["--start", "sched:sched_wakeup", "--end", "sched:sched_switch", "--key", "pid=next_pid"]
    cases = [
        ("perf", "p.txt", lambda p: grow_text(os.path.join(TRACES, "sched.perf.txt"), p, a.mb), wake, "sched_wakeup"),
        ("ftrace", "f.txt", lambda p: grow_text(os.path.join(TRACES, "sched.ftrace.txt"), p, a.mb), wake, "sched_wakeup"),
        ("babeltrace", "b.txt", lambda p: grow_babeltrace(os.path.join(TRACES, "cyg-profile.babeltrace.txt"), p, a.mb),
         ["--span", "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit", "--key", "addr,vtid"], "func_entry"),
        ("chrome", "c.json", lambda p: grow_chrome(os.path.join(TRACES, "chromium-startup.truncated.json"), p, a.mb), [], '"ph"'),
        ("jsonl", "j.jsonl", lambda p: grow_jsonl(p, a.mb), ["--span", "r=request_start..request_done", "--key", "id"], "request_done"),
        ("wayland", "w.log", lambda p: grow_wayland(p, a.mb), None, "wl_buffer"),
    ]
    # the same log as libwayland 1.23 and 1.26 print it (made from it, so it is made first)
    plain = lambda: cached(d, "w.log", lambda p: grow_wayland(p, a.mb))[1]
    for dialect in ("1.23", "1.26"):
        cases.append((f"wayland-{dialect}", f"w{dialect}.log",
                      lambda p, dialect=dialect: wayland_dialect(plain(), p, dialect), None, "wl_buffer"))
    # and with its clock wrapping half-way (the second half's stamps padded with spaces)
    cases.append(("wayland-wrap", "wwrap.log", lambda p: wayland_dialect(plain(), p, "1.21", wrap=True), None,
                  "wl_buffer"))
    if a.only:
        keep = set(a.only.split(","))
        cases = [c for c in cases if c[0] in keep]
    pin = ["taskset", "-c", a.cpu]
    # the CPUs the --threads runs may use, one copy of the one-core run pinned to each
    cpus = cpu_list(a.cpus) if a.cpus else list(range(os.cpu_count() or 1))
    ceiling = a.threads > 1 and not a.no_ceiling and len(cpus) >= a.threads
    print(f"{a.runs} runs each, medians; one core: pinned to CPU {a.cpu}; --threads {a.threads} on CPUs "
          f"{a.cpus or 'any'}; page cache: {'as it was' if a.keep_cache else 'each input dropped, then read once'}; "
          f"load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"| format | MB | events | latscope s | MB/s | Mevents/s | grep -c s | × grep -c "
          f"| CPU s | CPU MB/s | grep CPU s | CPU × grep |"
          + (f" {a.threads} threads s | MB/s | × grep -c | vs 1 core |" if a.threads else "")
          + (" ceiling | of it |" if ceiling else ""))
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|" + ("--:|--:|--:|--:|" if a.threads else "")
          + ("--:|--:|" if ceiling else ""))
    jobs = []  # (label, size, events, plain path, command, grep pattern)
    for name, file, make, rule, pattern in cases:
        events, path = cached(d, file, make)
        paths = [path]
        if a.compress:
            paths.append(compressed(path, a.compress))
        for path in paths:
            cmd = [a.binary, "wayland", "--format", "json", path] if rule is None else \
                [a.binary, "spans", "-f", "json", *rule, path]
            label = name + ("" if path == paths[0] else f" .{a.compress}")
            jobs.append((label, os.path.getsize(paths[0]) / 1e6, events, paths[0], cmd, pattern))
            if not a.keep_cache:
                evict(path)
            subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # the page cache
    # Rounds of every input in turn: a burst of load on a shared machine (the other vCPU taken
    # for seconds) hits a few runs of every input, not every run of one (run one input after
    # the other, a whole input's two-thread runs came out at 1.2x one thread, and the next
    # input's at 1.8x).
    ours, grep, many, together = ([[] for _ in jobs] for _ in range(4))
    for _ in range(a.runs):
        for k, (_, _, _, plain, cmd, pattern) in enumerate(jobs):
            ours[k].append(measure(pin + cmd + ["--threads", "1"]))
            if ceiling:
                together[k].append(at_once([["taskset", "-c", str(c)] + cmd + ["--threads", "1"]
                                            for c in cpus[:a.threads]]))
            # on the plain text (grep -c of the compressed bytes would say nothing)
            grep[k].append(measure(pin + ["grep", "-c", pattern, plain]))
            if a.threads:
                many_pin = ["taskset", "-c", a.cpus] if a.cpus else []
                many[k].append(measure(many_pin + cmd + ["--threads", str(a.threads)]))
    for k, (label, size, events, _, _, _) in enumerate(jobs):
        t, g = statistics.median(w for w, _ in ours[k]), statistics.median(w for w, _ in grep[k])
        tc, gc = statistics.median(c for _, c in ours[k]), statistics.median(c for _, c in grep[k])
        row = (f"| {label} | {size:.0f} | {events} | {t:.3f} | {size / t:.0f} | {events / t / 1e6:.2f} | {g:.3f} | {t / g:.1f} "
               f"| {tc:.3f} | {size / tc:.0f} | {gc:.3f} | {tc / gc:.1f} |")
        if a.threads and many[k]:
            m = statistics.median(w for w, _ in many[k])
            row += f" {m:.3f} | {size / m:.0f} | {m / g:.1f} | {t / m:.2f}× |"
        elif a.threads:
            row += " — | — | — | — |"
        if ceiling:
            # N copies of the one-core run at once, each on its own CPU, finish in this time:
            # the machine gives N independent copies this many times one copy's speed
            top = a.threads * t / statistics.median(together[k])
            row += f" {top:.2f}× | {t / m / top:.0%} |" if many[k] else f" {top:.2f}× | — |"
        print(row, flush=True)
    if ceiling:
        print(f"ceiling: {a.threads} one-core runs at once, each pinned to its own CPU, "
              f"{a.threads} × (one run's time ÷ their time together); of it: the speed-up ÷ the ceiling")
    best_of(jobs, ours, grep, many, a.threads)
    print("Perfetto trace_processor, Chrome JSON: 177 MB/s (google/perfetto PR #1641)")
    if not a.no_tools:
        with tempfile.TemporaryDirectory(prefix="latscope-bench-") as tmp:
            tools(tmp, a.runs)


def best_of(jobs, ours, grep, many, threads):
    """The same ratios from the fastest run of each: on a VM whose neighbours take its cores'
    time in bursts (runs of one build spread from 0.145 to 0.25 s), the fastest run is the one
    least disturbed, and the spread says how much the medians above can be trusted."""
    print()
    print("Fastest of the runs, and the spread of the one-core runs (slowest ÷ fastest):")
    print("| format | 1 core s | MB/s | grep -c s | × grep -c | spread |"
          + (f" {threads} threads s | MB/s | vs 1 core |" if threads else ""))
    print("|---|--:|--:|--:|--:|--:|" + ("--:|--:|--:|" if threads else ""))
    for k, (label, size, _, _, _, _) in enumerate(jobs):
        walls = [w for w, _ in ours[k]]
        t, g = min(walls), min(w for w, _ in grep[k])
        row = f"| {label} | {t:.3f} | {size / t:.0f} | {g:.3f} | {t / g:.1f} | {max(walls) / t:.2f} |"
        if threads and many[k]:
            m = min(w for w, _ in many[k])
            row += f" {m:.3f} | {size / m:.0f} | {t / m:.2f}× |"
        elif threads:
            row += " — | — | — |"
        print(row, flush=True)


def compressed(path, kind):
    out = f"{path}.{kind}"
    if not os.path.exists(out):
        tool = {"gz": ["gzip", "-c", "-6"], "zst": ["zstd", "-c", "-q", "-3"], "xz": ["xz", "-c", "-1", "-T0"]}[kind]
        with open(out + ".tmp", "wb") as f:
            subprocess.run(tool + [path], stdout=f, check=True)
        os.rename(out + ".tmp", out)
    return out


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
