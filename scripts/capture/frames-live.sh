#!/usr/bin/env bash
# Usage: frames-live.sh DIR SECONDS LATSCOPE [--no-debug]
# One run of weston-presentation-shm -f on weston headless (pixman), seen two ways at once:
# `latscope frames --live` over weston and the client for SECONDS (DIR/live.json, the -f json
# document; DIR/live.stderr, latscope's standard error, which also holds the client's own
# per-frame figures: its c2p is commit -> presentation on the presentation clock), and both
# sides' WAYLAND_DEBUG logs of the same frames (DIR/client.log, DIR/server.log), so that the
# probes can be checked against the logs frame by frame. With --no-debug neither side logs
# (the cost of WAYLAND_DEBUG left out). With --attach neither logs either, the client is started
# first (its output in DIR/client.stdout) and latscope attaches to it (--client-pid) without
# --duration, and is interrupted (SIGINT, as Ctrl-C) after SECONDS. With --mir neither logs,
# and the compositor traced is Mir (miral-shell) nested in the weston. Needs root and bpftrace.
# Exits with latscope's status.
set -euo pipefail

usage() { echo "usage: $0 DIR SECONDS LATSCOPE [--no-debug|--attach|--mir]" >&2; exit 2; }
[[ $# -ge 3 && $# -le 4 ]] || usage
dir=$1 secs=$2 latscope=$3 debug=${4:-}
[[ $secs =~ ^[1-9][0-9]*$ ]] || usage
[[ -z $debug || $debug =~ ^--(no-debug|attach|mir)$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
lc_setup
lc_need weston-presentation-shm stdbuf
sock=latscope-live-$$
if [[ -z $debug ]]; then
    lc_start_weston "$sock" "$dir/server.log"
    client=(sh -c 'WAYLAND_DEBUG=1 exec stdbuf -oL weston-presentation-shm -f 2>"$0"' "$dir/client.log")
else
    lc_start_weston "$sock"
    client=(stdbuf -oL weston-presentation-shm -f)
fi
# lc_spawn runs weston under `timeout`: the compositor is its child
weston=$(pgrep -P "$WESTON_PID" -x weston) || lc_die "no weston under pid $WESTON_PID"
if [[ $debug == --mir ]]; then
    lc_start_mir "mir-$$" "$sock"
    weston=$(pgrep -P "$MIR_PID" -x miral-shell) || lc_die "no miral-shell under pid $MIR_PID"
    sock=mir-$$
fi
rc=0
if [[ $debug == --attach ]]; then
    WAYLAND_DISPLAY=$sock "${client[@]}" </dev/null >"$dir/client.stdout" 2>&1 &
    client_pid=$!
    sleep 1
    "$latscope" frames --live --compositor-pid "$weston" --client-pid "$client_pid" \
        -f json >"$dir/live.json" 2>"$dir/live.stderr" &
    live_pid=$!
    sleep "$secs"
    kill -INT "$live_pid"
    wait "$live_pid" || rc=$?
    kill "$client_pid" 2>/dev/null || true
    wait "$client_pid" 2>/dev/null || true
else
    WAYLAND_DISPLAY=$sock "$latscope" frames --live --compositor-pid "$weston" --duration "$secs" \
        -f json -- "${client[@]}" >"$dir/live.json" 2>"$dir/live.stderr" || rc=$?
fi
# Stop weston so that its log is complete before it is read.
[[ $debug == --mir ]] && lc_stop_pid "$MIR_PID" miral-shell
lc_stop_pid "$WESTON_PID" weston
[[ $rc -eq 0 ]] || lc_show_log "$dir/live.stderr" 20
exit "$rc"
