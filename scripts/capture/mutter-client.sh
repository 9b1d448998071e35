#!/usr/bin/env bash
# Usage: mutter-client.sh DIR [FRAMES]
# Captures the two sides of one run on mutter for `latscope frames`: mutter headless
# (`--headless --wayland --no-x11 --virtual-monitor 1280x720`) with WAYLAND_DEBUG=server, on a
# private session bus (a dbus-daemon listening in the private runtime directory: mutter asks
# the session bus for its names), and latscope's own Wayland client (`latscope lab wayland
# frames --frames FRAMES --max-spans FRAMES -f json`, default 120 frames) with
# WAYLAND_DEBUG=client. weston's clients cannot be used: they bind xdg_wm_base at the version
# mutter offers and abort on its `configure_bounds`, which they have no handler for.
# Writes DIR/client.log (the client's stderr), DIR/client.json (its own per-frame figures, on
# CLOCK_MONOTONIC, ns) and DIR/server.log (mutter's stderr). LATSCOPE names the latscope binary
# (default: latscope in PATH). Exits 0 only if both logs contain wl_surface commit lines; mutter
# and the bus are stopped on exit.
set -euo pipefail

usage() { echo "usage: $0 DIR [FRAMES]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
dir=$1 frames=${2:-120}
[[ $frames =~ ^[1-9][0-9]*$ ]] || usage
latscope=${LATSCOPE:-latscope}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
for c in mutter dbus-daemon "$latscope"; do
    command -v "$c" >/dev/null || lc_die "$c is not installed"
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
lc_setup
bus=$XDG_RUNTIME_DIR/bus
cat >"$LC_WORK_DIR/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$bus</listen>
  <auth>EXTERNAL</auth>
  <limit name="max_completed_connections">64</limit>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
lc_spawn dbus-daemon "$LC_WORK_DIR/dbus.out" "$LC_WORK_DIR/dbus.err" \
    dbus-daemon --nofork --config-file="$LC_WORK_DIR/bus.conf"
lc_wait_socket bus "$LC_LAST_PID" dbus-daemon "$LC_WORK_DIR/dbus.err"
export DBUS_SESSION_BUS_ADDRESS=unix:path=$bus
sock=latscope-mutter-$$
lc_spawn mutter "$LC_WORK_DIR/mutter.out" "$dir/server.log" \
    env WAYLAND_DEBUG=server mutter --headless --wayland --no-x11 \
    --virtual-monitor 1280x720 --wayland-display="$sock"
lc_wait_socket "$sock" "$LC_LAST_PID" mutter "$LC_WORK_DIR/mutter.out" "$dir/server.log"
rc=0
WAYLAND_DEBUG=client timeout --signal=INT --kill-after=5 120 \
    "$latscope" lab wayland frames --display "$sock" --frames "$frames" --max-spans "$frames" -f json \
    </dev/null >"$dir/client.json" 2>"$dir/client.log" || rc=$?
[[ $rc -eq 0 ]] || { tail -5 "$dir/client.log" >&2; lc_die "the client failed ($rc)"; }
for f in client.log server.log; do
    n=$(grep -cE 'wl_surface[@#][0-9]+\.commit\(' "$dir/$f" || true)
    [[ ${n:-0} -gt 0 ]] || lc_die "$dir/$f has no wl_surface commit line"
    lc_log "$dir/$f: $(wc -l <"$dir/$f") lines, $n wl_surface.commit lines"
done
