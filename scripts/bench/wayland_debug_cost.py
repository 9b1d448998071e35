#!/usr/bin/env python3
"""The price of WAYLAND_DEBUG: what printing every message costs a client and its compositor.

    scripts/bench/wayland_debug_cost.py BINARY [--runs 5] [--frames 300] [--mir]

Runs `BINARY lab wayland frames --frames N` (a native client pacing on frame callbacks) on a
private weston headless (pixman), or on miral-shell nested in one (--mir), with WAYLAND_DEBUG
off, on the client (=client), on the compositor (=server), and on both, the four in turn, RUNS
times (interleaved: a burst of load hits all four alike). Each side's log goes to a file, as
`latscope frames` needs it. Prints a Markdown table of medians: frames per second,
commit_to_presented p50 and p99 (weston; Mir 2.12 offers no wp_presentation: frame_to_done
then), and the CPU time the client and the compositor spent per frame.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ["off", "client", "server", "both"]


def cpu_ms(pid):
    """A live process's user + system CPU time, ms (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) * 1000 / ticks


def wait_socket(rt, name, proc):
    for _ in range(200):
        if os.path.exists(os.path.join(rt, name)):
            return
        if proc.poll() is not None:
            sys.exit(f"the compositor exited ({proc.returncode})")
        time.sleep(0.05)
    sys.exit(f"no socket {name}")


def compositor(rt, debug, mir, logdir):
    """Starts the compositor (weston, or Mir nested in weston); returns (procs, display, pid
    whose CPU time is the compositor's)."""
    env = dict(os.environ, XDG_RUNTIME_DIR=rt)
    env.pop("WAYLAND_DEBUG", None)
    env.pop("WAYLAND_DISPLAY", None)
    wenv = dict(env, WAYLAND_DEBUG="server") if debug and not mir else env
    weston = subprocess.Popen(
        ["weston", "--backend=headless-backend.so", "--socket=w", "--idle-time=0",
         "--no-config", "--use-pixman"],
        env=wenv, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(logdir, "server.log"), "w"), start_new_session=True)
    wait_socket(rt, "w", weston)
    if not mir:
        return [weston], "w", weston.pid
    menv = dict(env, WAYLAND_DISPLAY="m")
    if debug:
        menv["WAYLAND_DEBUG"] = "server"
    mir_proc = subprocess.Popen(
        ["miral-shell", "--wayland-host=w", "--platform-display-libs=mir:wayland",
         "--console-provider=none", "--idle-timeout=0"],
        env=menv, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(logdir, "server.log"), "w"), start_new_session=True)
    wait_socket(rt, "m", mir_proc)
    return [mir_proc, weston], "m", mir_proc.pid


def one_run(binary, mode, frames, mir):
    with tempfile.TemporaryDirectory() as rt:
        os.chmod(rt, 0o700)
        procs, display, comp_pid = compositor(rt, mode in ("server", "both"), mir, rt)
        try:
            time.sleep(0.3)
            comp_before = cpu_ms(comp_pid)
            env = dict(os.environ, XDG_RUNTIME_DIR=rt)
            env.pop("WAYLAND_DEBUG", None)
            if mode in ("client", "both"):
                env["WAYLAND_DEBUG"] = "client"
            with open(os.path.join(rt, "client.log"), "w") as log:
                child = subprocess.Popen(
                    [binary, "lab", "wayland", "frames", "--display", display,
                     "--frames", str(frames), "-f", "json"],
                    env=env, stdout=subprocess.PIPE, stderr=log)
                out = child.stdout.read()
                _, status, usage = os.wait4(child.pid, 0)
            comp_ms = cpu_ms(comp_pid) - comp_before
        finally:
            for p in procs:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                p.wait()
        if status != 0:
            sys.exit(f"lab wayland failed ({status})")
        r = json.loads(out)["results"][0]
        metric = {m["name"]: m for m in r["metrics"]}
        latency = metric.get("commit_to_presented") or metric["frame_to_done"]
        client_ms = (usage.ru_utime + usage.ru_stime) * 1000
        return {
            "fps": r["frames_per_s"],
            "latency": latency["name"],
            "p50_ms": latency["p50"] / 1e6,
            "p99_ms": latency["p99"] / 1e6,
            "client_us_per_frame": client_ms * 1000 / frames,
            "compositor_us_per_frame": comp_ms * 1000 / frames,
        }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--mir", action="store_true")
    a = ap.parse_args()
    results = {m: [] for m in MODES}
    for _ in range(a.runs):
        for mode in MODES:
            results[mode].append(one_run(os.path.abspath(a.binary), mode, a.frames, a.mir))
    where = "Mir 2.12 nested in weston 10 headless" if a.mir else "weston 10 headless (pixman)"
    latency = results["off"][0]["latency"]
    print(f"{where}, `lab wayland frames --frames {a.frames}`, medians of {a.runs} interleaved runs\n")
    print(f"| WAYLAND_DEBUG | frames/s | {latency} p50 | p99 | client CPU / frame | compositor CPU / frame |")
    print("|---|---|---|---|---|---|")
    for mode in MODES:
        med = lambda k: statistics.median(r[k] for r in results[mode])
        print(f"| {mode} | {med('fps'):.1f} | {med('p50_ms'):.2f} ms | {med('p99_ms'):.2f} ms "
              f"| {med('client_us_per_frame'):.0f} µs | {med('compositor_us_per_frame'):.0f} µs |")


if __name__ == "__main__":
    main()
