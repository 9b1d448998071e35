#!/usr/bin/env bash
# Usage: mir-client.sh CLIENT_OUT.log SERVER_OUT.log [SECONDS] [CLIENT]
# Starts weston headless, miral-shell nested in it (mir:wayland platform) with
# WAYLAND_DEBUG=server (override with MIR_WAYLAND_DEBUG, e.g. 1 to also log
# Mir's own client traffic to weston), then runs CLIENT (default glmark2:
# glmark2-es2-wayland --benchmark=build:use-vbo=true:duration=SECONDS) against
# Mir with WAYLAND_DEBUG=1.
# CLIENT_OUT.log gets the client's stderr; SERVER_OUT.log gets miral-shell's
# stderr (protocol lines plus Mir's warnings, which are not protocol lines).
# Exits 0 only if both logs contain wl_surface commit lines.
set -euo pipefail

usage() { echo "usage: $0 CLIENT_OUT.log SERVER_OUT.log [SECONDS] [CLIENT]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 4 ]] || usage
cout=$1 sout=$2 secs=${3:-3} client=${4:-glmark2}
[[ $secs =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

abspath() { mkdir -p "$(dirname "$1")" && echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
cout=$(abspath "$cout")
sout=$(abspath "$sout")

lc_setup
lc_client_cmd "$client" "$secs"
host=latscope-weston-$$
nested=latscope-mir-$$
lc_start_weston "$host"
lc_start_mir "$nested" "$host" "$sout"
lc_run_client "$nested" "$cout" "$secs" "${LC_CLIENT_CMD[@]}"
# Stop Mir (then weston) so the server log is complete before checking it.
lc_stop_pid "$MIR_PID" miral-shell
lc_stop_pid "$WESTON_PID" weston
lc_check_log "$cout"
lc_check_log "$sout"
exit 0
