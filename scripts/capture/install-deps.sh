#!/usr/bin/env bash
# Install (only when missing) the Debian packages needed to run the capture
# scripts: weston headless, weston demo clients, glmark2 (Wayland, GLES2),
# Mir (miral-shell + the nested Wayland platform) and Mesa software rendering.
# Idempotent: when everything is installed it only runs dpkg-query (< 1 s).
# Tested on Debian 12 (bookworm). Needs root (or sudo) when installing.
set -euo pipefail

PKGS=(
    weston                          # weston, weston-simple-shm, weston-presentation-shm
    glmark2-es2-wayland             # glmark2-es2-wayland (pulls glmark2-data)
    mir-demos                       # miral-shell
    mir-platform-graphics-wayland   # mir:wayland platform (graphics-wayland.so.20)
    libgl1-mesa-dri                 # llvmpipe/swrast DRI driver
    libegl-mesa0                    # Mesa EGL vendor (glvnd)
    libegl1
    libgles2
    libwayland-client0
    libwayland-server0
    xkb-data                        # keymaps for weston / Mir seats
    fonts-dejavu-core               # miral-shell wallpaper font
    python3                         # tests/independent/wl_latency.py
    bpftrace                        # latscope live
    systemtap-sdt-dev               # sys/sdt.h for the USDT test target
    mir-test-tools                  # libmirserverlttng.so: Mir's compositor/scene probes fire
    gcc                             # builds tests/targets/usdt_target.c
    libc6-dev
    util-linux                      # setpriv (privilege error test)
    valgrind                        # latscope bench --instructions=callgrind
    chromium                        # opens the HTML report in a test (headless)
    procps                          # ps/kill used when debugging
    dbus-daemon                     # latscope lab ipc --transport dbus (a private bus)
    linux-perf                      # scripts/bench/ipc_vs_perf.py (perf bench sched pipe)
    xvfb                            # latscope lab x11 (a private X server)
    x11-apps                        # x11perf, next to latscope lab x11 upload --pipelined
    libxcb1-dev                     # xcb/xcb.h: tests/targets/xcb_round_trip.c, the C round trip beside lab x11
    strace                          # scripts/bench/x11_client.py: system calls per request; latscope spans reads its -T output
    ltrace                          # latscope spans reads ltrace -T output (tests/spans.rs)
    trace-cmd                       # latscope spans reads trace-cmd report (tests/spans.rs)
    time                            # GNU time: the abuse tests' peak RSS of latscope alone (tests/abuse.rs)
    libkf5screen-bin                # kscreen-doctor: the real libkscreen, next to lab x11 config
    lttng-tools                     # latscope spans: LTTng userspace traces captured by the tests
    liblttng-ust1                   # liblttng-ust-cyg-profile.so.1 (function entry/exit events)
    babeltrace2                     # CTF → text, read by latscope spans
    python3-venv                    # scripts/test.sh: the private venv with DuckDB (PyPI)
    prometheus                      # scrapes latscope live --serve in tests/fleet.rs (run by the test, not the service)
    sway                            # wlroots headless (as the user nobody): latscope frames on a second compositor family
    mutter                          # GNOME's compositor headless (--virtual-monitor): latscope frames where presented is answered
)

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all ${#PKGS[@]} packages already installed" >&2
else
    echo "install-deps: installing ${missing[*]}" >&2
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
        SUDO=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Sanity check: the binaries the capture scripts run.
for c in weston weston-simple-shm weston-presentation-shm glmark2-es2-wayland miral-shell python3 setsid timeout bpftrace cc setpriv valgrind chromium dbus-daemon Xvfb x11perf kscreen-doctor lttng lttng-sessiond babeltrace2 perf prometheus sway mutter stdbuf; do
    command -v "$c" >/dev/null 2>&1 || { echo "install-deps: '$c' still missing after install" >&2; exit 1; }
done
[[ -e /usr/lib/x86_64-linux-gnu/libweston-10/headless-backend.so ]] ||
    ls /usr/lib/*/libweston-*/headless-backend.so >/dev/null 2>&1 ||
    { echo "install-deps: weston headless backend not found" >&2; exit 1; }
ls /usr/lib/*/mir/server-platform/graphics-wayland.so.* >/dev/null 2>&1 ||
    { echo "install-deps: Mir wayland platform (graphics-wayland.so) not found" >&2; exit 1; }
{ [[ -e /usr/include/sys/sdt.h ]] || compgen -G "/usr/include/*/sys/sdt.h" >/dev/null; } || { echo "install-deps: sys/sdt.h missing (systemtap-sdt-dev)" >&2; exit 1; }
echo "install-deps: ok" >&2
