#!/usr/bin/env bash
# Usage: mir-client.sh CLIENT_OUT.log SERVER_OUT.log [SECONDS] [CLIENT]
# Starts weston headless, miral-shell nested in it (mir:wayland platform) with
# WAYLAND_DEBUG=server (override with MIR_WAYLAND_DEBUG, e.g. 1 to also log
# Mir's own client traffic to weston), then runs CLIENT (default glmark2:
# glmark2-es2-wayland --benchmark=build:use-vbo=true:duration=SECONDS) against
# Mir with WAYLAND_DEBUG=1.
# CLIENT_OUT.log gets the client's stderr; SERVER_OUT.log gets miral-shell's
# stderr (protocol lines plus Mir's warnings, which are not protocol lines).
# With MIR_TRACE=FILE, Mir's own compositor events are recorded too: an LTTng userspace
# session of our own lttng-sessiond (LTTNG_HOME in the private work dir), started before Mir
# so that Mir registers with it, records mir_server_wayland:* (each commit's buffer) and,
# with --compositor-report=lttng (libmirserverlttng.so, package mir-test-tools),
# mir_server_compositor:* (each composition); FILE gets babeltrace2's text of the trace, the
# input of `latscope frames CLIENT SERVER FILE`.
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
if [[ -n ${MIR_TRACE:-} ]]; then
    mir_trace=$(abspath "$MIR_TRACE")
    lc_need babeltrace2
    ls /usr/lib/*/mir/tools/libmirserverlttng.so >/dev/null 2>&1 ||
        lc_die "libmirserverlttng.so not found (Debian package mir-test-tools)"
    export MIR_EXTRA_ARGS="${MIR_EXTRA_ARGS:-} --compositor-report=lttng"
    lttng_dir=$LC_WORK_DIR/lttng-trace
    lc_lttng_session "$lttng_dir" 'mir_server_compositor:*,mir_server_wayland:*'
    lttng start >&2
fi
lc_start_mir "$nested" "$host" "$sout"
lc_run_client "$nested" "$cout" "$secs" "${LC_CLIENT_CMD[@]}"
# Stop Mir (then weston) so the server log is complete before checking it.
lc_stop_pid "$MIR_PID" miral-shell
lc_stop_pid "$WESTON_PID" weston
if [[ -n ${MIR_TRACE:-} ]]; then
    lttng stop >&2
    lttng destroy "$LC_LTTNG_SESSION" >&2
    babeltrace2 "$lttng_dir" >"$mir_trace"
    grep -q "mir_server_compositor:began_frame" "$mir_trace" ||
        lc_die "$mir_trace: no mir_server_compositor event (did Mir load libmirserverlttng.so?)"
fi
lc_check_log "$cout"
lc_check_log "$sout"
exit 0
