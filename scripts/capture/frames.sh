#!/usr/bin/env bash
# Usage: frames.sh DIR [SECONDS] [--second-client]
# (FRAMES_TIMELINE=1: weston also writes its `timeline` log scope, with its other logging, to
# DIR/timeline.log: `--logger-scopes=timeline,log --log=DIR/timeline.log`)
# Captures the two sides of one run for `latscope frames`: weston headless (pixman) with
# WAYLAND_DEBUG=server, and weston-presentation-shm -f with WAYLAND_DEBUG=1, for SECONDS
# (default 2). Writes DIR/client.log (the client's stderr), DIR/client.stdout (its own per-frame
# figures: c2p is its commit -> presentation, read on the presentation clock) and DIR/server.log
# (weston's stderr: every client's connection, weston's own shell clients included). With
# --second-client, weston-simple-shm runs at the same time on the same weston, its log in
# DIR/second.log. Exits 0 only if the logs contain wl_surface commit lines.
set -euo pipefail

usage() { echo "usage: $0 DIR [SECONDS] [--second-client]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 3 ]] || usage
dir=$1 secs=${2:-2} second=${3:-}
[[ $secs =~ ^[1-9][0-9]*$ ]] || usage
[[ -z $second || $second == --second-client ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
lc_setup
sock=latscope-frames-$$
if [[ ${FRAMES_TIMELINE:-} == 1 ]]; then
    export WESTON_EXTRA_ARGS="--logger-scopes=timeline,log --log=$dir/timeline.log"
fi
lc_start_weston "$sock" "$dir/server.log"
second_pid=
if [[ -n $second ]]; then
    lc_need weston-simple-shm
    WAYLAND_DISPLAY=$sock WAYLAND_DEBUG=1 \
        timeout --signal=INT --kill-after=5 "$((secs + 1))" weston-simple-shm \
        </dev/null >/dev/null 2>"$dir/second.log" &
    second_pid=$!
fi
lc_client_cmd presentation-shm "$secs"
# line-buffered, so that what it printed is in the file when the timeout stops it
lc_run_client "$sock" "$dir/client.log" "$secs" stdbuf -oL "${LC_CLIENT_CMD[@]}"
cp "$LC_WORK_DIR/client.stdout" "$dir/client.stdout"
[[ -n $second_pid ]] && { wait "$second_pid" || true; }
# Stop weston so that its log is complete before it is checked.
lc_stop_pid "$WESTON_PID" weston
lc_check_log "$dir/client.log"
lc_check_log "$dir/server.log"
[[ -n $second_pid ]] && lc_check_log "$dir/second.log"
exit 0
