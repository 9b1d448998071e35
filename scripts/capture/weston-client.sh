#!/usr/bin/env bash
# Usage: weston-client.sh OUT.log CLIENT [SECONDS]
#   CLIENT: simple-shm | glmark2 | presentation-shm
# Starts weston headless (pixman renderer) in a private XDG_RUNTIME_DIR, runs
# CLIENT with WAYLAND_DEBUG=1 for SECONDS (default 3) and writes the client's
# stderr (the WAYLAND_DEBUG log) to OUT.log. Exits 0 only if OUT.log contains
# wl_surface commit lines.
# Optional: WESTON_SERVER_LOG=FILE also captures weston's own WAYLAND_DEBUG=server
# log (weston's stderr, including weston's non-protocol log lines) into FILE.
set -euo pipefail

usage() { echo "usage: $0 OUT.log CLIENT [SECONDS]   (CLIENT: simple-shm | glmark2 | presentation-shm)" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
out=$1 client=$2 secs=${3:-3}
[[ $secs =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
server_log=${WESTON_SERVER_LOG:-}
if [[ -n $server_log ]]; then
    mkdir -p "$(dirname "$server_log")"
    server_log=$(cd "$(dirname "$server_log")" && pwd)/$(basename "$server_log")
fi

lc_setup
lc_client_cmd "$client" "$secs"
sock=latscope-weston-$$
lc_start_weston "$sock" "$server_log"
lc_run_client "$sock" "$out" "$secs" "${LC_CLIENT_CMD[@]}"
# Stop weston now so that its server log is complete before we check it.
lc_stop_pid "$WESTON_PID" weston
lc_check_log "$out"
[[ -n $server_log ]] && lc_check_log "$server_log"
exit 0
