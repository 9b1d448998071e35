#!/usr/bin/env python3
"""What `latscope frames --live` costs a client and its compositor, against WAYLAND_DEBUG.

    scripts/bench/frames_live_cost.py BINARY [--runs 3] [--seconds 5]

Runs weston-presentation-shm -f (a C client, presenting with feedback) on a private weston
headless (pixman) for SECONDS, three ways in turn, RUNS times (interleaved: a burst of load hits
all three alike): untraced (`off`), both sides printing WAYLAND_DEBUG to files (`WAYLAND_DEBUG`,
what `latscope frames CLIENT_LOG SERVER_LOG` needs), and under `BINARY frames --live` (`probes`,
no WAYLAND_DEBUG). Needs root and bpftrace. Prints a Markdown table of medians: frames presented
per second of the client's life and its own c2p (commit -> presentation, from its output), and
the CPU time the client and the compositor spent per frame presented (from /proc, polled every
50 ms while the client lives). bpftrace's own CPU time is not counted.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ["off", "WAYLAND_DEBUG", "probes"]


def cpu_ms(pid):
    """A live process's user + system CPU time, ms (from /proc); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def client_pid():
    out = subprocess.run(["pgrep", "-x", "weston-presenta"], capture_output=True, text=True)
    pids = out.stdout.split()
    return int(pids[0]) if pids else None


def weston(rt, debug):
    env = dict(os.environ, XDG_RUNTIME_DIR=rt)
    env.pop("WAYLAND_DISPLAY", None)
    env.pop("WAYLAND_DEBUG", None)
    if debug:
        env["WAYLAND_DEBUG"] = "server"
    proc = subprocess.Popen(
        ["weston", "--backend=headless-backend.so", "--socket=w", "--idle-time=0",
         "--no-config", "--use-pixman"],
        env=env, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(rt, "server.log"), "w"), start_new_session=True)
    for _ in range(200):
        if os.path.exists(os.path.join(rt, "w")):
            return proc
        time.sleep(0.05)
    sys.exit("weston made no socket")


def client_command(binary, mode, seconds, rt, comp_pid):
    shm = ["stdbuf", "-oL", "weston-presentation-shm", "-f"]
    if mode == "probes":
        return [binary, "frames", "--live", "--compositor-pid", str(comp_pid),
                "--duration", f"{seconds}s", "-f", "json", "--"] + shm
    return ["timeout", "--signal=TERM", str(seconds)] + shm


def one_run(binary, mode, seconds):
    with tempfile.TemporaryDirectory() as rt:
        os.chmod(rt, 0o700)
        comp = weston(rt, mode == "WAYLAND_DEBUG")
        try:
            time.sleep(0.3)
            env = dict(os.environ, XDG_RUNTIME_DIR=rt, WAYLAND_DISPLAY="w")
            env.pop("WAYLAND_DEBUG", None)
            if mode == "WAYLAND_DEBUG":
                env["WAYLAND_DEBUG"] = "1"
            out = open(os.path.join(rt, "client.out"), "w")
            # the client's own figures: its stdout (under frames --live, latscope's stderr)
            child = subprocess.Popen(client_command(binary, mode, seconds, rt, comp.pid),
                                     env=env, stdout=subprocess.DEVNULL if mode == "probes" else out,
                                     stderr=out if mode == "probes" else open(os.path.join(rt, "client.log"), "w"))
            pid, client_ms, started, comp_ms = None, 0.0, None, 0.0
            first = last = time.monotonic()
            while child.poll() is None:
                pid = pid or client_pid()
                if pid and started is None:
                    started, first = cpu_ms(comp.pid), time.monotonic()
                ms = cpu_ms(pid) if pid else None
                if ms is not None:
                    client_ms, comp_ms, last = ms, cpu_ms(comp.pid) - started, time.monotonic()
                time.sleep(0.05)
        finally:
            os.killpg(comp.pid, signal.SIGTERM)
            comp.wait()
        text = open(os.path.join(rt, "client.out")).read()
    c2p = [int(m) for m in re.findall(r"c2p +(\d+) ms", text)]
    frames = max(len(c2p), 1)
    return {
        "fps": len(c2p) / max(last - first, 0.1),
        "c2p_ms": statistics.median(c2p) if c2p else float("nan"),
        "client_us": client_ms * 1000 / frames,
        "compositor_us": comp_ms * 1000 / frames,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    results = {m: [] for m in MODES}
    for _ in range(a.runs):
        for mode in MODES:
            results[mode].append(one_run(os.path.abspath(a.binary), mode, a.seconds))
    print(f"weston 10 headless (pixman), weston-presentation-shm -f for {a.seconds} s, "
          f"medians of {a.runs} interleaved runs\n")
    print("| traced by | frames/s | client's c2p p50 | client CPU / frame | compositor CPU / frame |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        med = lambda k: statistics.median(r[k] for r in results[mode])
        print(f"| {mode} | {med('fps'):.1f} | {med('c2p_ms'):.0f} ms "
              f"| {med('client_us'):.0f} µs | {med('compositor_us'):.0f} µs |")


if __name__ == "__main__":
    main()
