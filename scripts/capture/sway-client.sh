#!/usr/bin/env bash
# Usage: sway-client.sh DIR [SECONDS]
# Captures the two sides of one run on sway (wlroots) for `latscope frames`: sway headless
# (WLR_BACKENDS=headless, WLR_RENDERER=pixman) with WAYLAND_DEBUG=server, run as the user
# nobody (sway refuses root), and weston-presentation-shm -f with WAYLAND_DEBUG=1 for SECONDS
# (default 2). Writes DIR/client.log and DIR/server.log. The runtime directory is private
# (0700, owned by nobody) and removed at the end; sway is stopped before the logs are checked.
set -euo pipefail

usage() { echo "usage: $0 DIR [SECONDS]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
dir=$1 secs=${2:-2}
[[ $secs =~ ^[1-9][0-9]*$ ]] || usage
for c in sway setpriv weston-presentation-shm; do
    command -v "$c" >/dev/null || { echo "sway-client.sh: $c is not installed" >&2; exit 1; }
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rt=$(mktemp -d)
sway_pid=
cleanup() {
    [[ -n $sway_pid ]] && kill -TERM "$sway_pid" 2>/dev/null && sleep 0.5
    [[ -n $sway_pid ]] && kill -KILL "$sway_pid" 2>/dev/null
    rm -rf -- "$rt"
}
trap cleanup EXIT
chmod 0700 "$rt"
chown nobody "$rt"
printf 'output HEADLESS-1 resolution 1280x720\n' >"$rt/config"
chmod 0644 "$rt/config"
setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env -i PATH=/usr/bin:/bin XDG_RUNTIME_DIR="$rt" WLR_BACKENDS=headless WLR_RENDERER=pixman \
    WLR_LIBINPUT_NO_DEVICES=1 WAYLAND_DEBUG=server \
    sway -c "$rt/config" >"$rt/sway.stdout" 2>"$dir/server.log" &
sway_pid=$!
for _ in $(seq 100); do
    sock=$(find "$rt" -maxdepth 1 -name 'wayland-*' -type s -printf '%f\n' | head -1)
    [[ -n $sock ]] && break
    kill -0 "$sway_pid" 2>/dev/null || { cat "$rt/sway.stdout" >&2; echo "sway-client.sh: sway exited" >&2; exit 1; }
    sleep 0.1
done
[[ -n ${sock:-} ]] || { echo "sway-client.sh: no sway socket after 10 s" >&2; exit 1; }
rc=0
XDG_RUNTIME_DIR=$rt WAYLAND_DISPLAY=$sock WAYLAND_DEBUG=1 \
    timeout --signal=INT --kill-after=5 "$secs" weston-presentation-shm -f \
    </dev/null >/dev/null 2>"$dir/client.log" || rc=$?
[[ $rc -eq 0 || $rc -eq 124 ]] || { echo "sway-client.sh: the client failed ($rc)" >&2; exit 1; }
kill -TERM "$sway_pid" 2>/dev/null || true
wait "$sway_pid" 2>/dev/null || true
sway_pid=
for f in client.log server.log; do
    n=$(grep -cE 'wl_surface[@#][0-9]+\.commit\(' "$dir/$f" || true)
    [[ ${n:-0} -gt 0 ]] || { echo "sway-client.sh: $dir/$f has no wl_surface commit line" >&2; exit 1; }
    echo "[capture] $dir/$f: $(wc -l <"$dir/$f") lines, $n wl_surface.commit lines" >&2
done
