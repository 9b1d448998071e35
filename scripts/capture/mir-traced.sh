#!/usr/bin/env bash
# Usage: mir-traced.sh CLIENT_OUT.log TRACE.json SECONDS -- LATSCOPE [LIVE ARGS...]
# Starts weston headless and miral-shell nested in it (with --compositor-report=lttng
# --scene-report=lttng, so that Mir's compositor probes fire: needs mir-test-tools), attaches
# `LATSCOPE live --pid <miral-shell> --save TRACE.json -q LIVE ARGS...`, waits until it is
# tracing, runs glmark2-es2-wayland --benchmark=build for SECONDS with WAYLAND_DEBUG=1
# (stderr -> CLIENT_OUT.log), then stops latscope with SIGINT (it prints and saves its totals).
# In LIVE ARGS, the word MIRSERVER is replaced by the path of libmirserver.so.
# With LATSCOPE_LTTNG_TRACE=DIR, Mir's LTTng tracepoints (mir_server_compositor:*, vtid context)
# are also recorded into the CTF trace DIR by an LTTng userspace session of our own
# lttng-sessiond (LTTNG_HOME in the private work dir), started before Mir so that Mir
# registers with it, and tracing from just before latscope attaches to just after it stops.
set -euo pipefail

usage() { echo "usage: $0 CLIENT_OUT.log TRACE.json SECONDS -- LATSCOPE [ARGS...]" >&2; exit 2; }
[[ $# -ge 5 && $4 == -- ]] || usage
cout=$1 trace=$2 secs=$3
shift 4
latscope=$1
shift

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

abspath() { mkdir -p "$(dirname "$1")" && echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
cout=$(abspath "$cout")
trace=$(abspath "$trace")
mirserver=$(ls /usr/lib/*/libmirserver.so.* 2>/dev/null | head -n 1)
[[ -n $mirserver ]] || lc_die "libmirserver.so not found (Debian package libmirserver*)"
args=()
for a in "$@"; do args+=("${a//MIRSERVER/$mirserver}"); done

lc_setup
lc_client_cmd glmark2 "$secs"
host=latscope-weston-$$
nested=latscope-mir-$$
if ls /usr/lib/*/mir/tools/libmirserverlttng.so >/dev/null 2>&1; then
    export MIR_EXTRA_ARGS="--compositor-report=lttng --scene-report=lttng"
fi
lc_start_weston "$host"
if [[ -n ${LATSCOPE_LTTNG_TRACE:-} ]]; then
    lc_lttng_session "$(abspath "$LATSCOPE_LTTNG_TRACE")" 'mir_server_compositor:*'
fi
lc_start_mir "$nested" "$host"
[[ -z ${LATSCOPE_LTTNG_TRACE:-} ]] || lttng start >&2
# MIR_PID is the `timeout` wrapper; miral-shell is its child.
mir_pid=$(pgrep -P "$MIR_PID" | head -n 1)
[[ -n $mir_pid ]] || lc_die "cannot find the miral-shell process under $MIR_PID"

err=$LC_WORK_DIR/latscope.stderr
lc_log "attaching: $latscope live --pid $mir_pid --save $trace -q ${args[*]}"
"$latscope" live --pid "$mir_pid" --save "$trace" -q "${args[@]}" >"$LC_WORK_DIR/latscope.stdout" 2>"$err" &
lat=$!
for ((i = 0; i < 300; i++)); do
    grep -q "tracing .* probes" "$err" 2>/dev/null && break
    lc_alive "$lat" || { lc_show_log "$err"; lc_die "latscope live exited before tracing"; }
    sleep 0.1
done
grep -q "tracing .* probes" "$err" || { lc_show_log "$err"; kill -INT "$lat"; lc_die "latscope live did not start tracing within 30 s"; }

lc_run_client "$nested" "$cout" "$secs" "${LC_CLIENT_CMD[@]}"
sleep 0.5
kill -INT "$lat"
rc=0
wait "$lat" || rc=$?
if [[ -n ${LATSCOPE_LTTNG_TRACE:-} ]]; then
    lttng stop >&2
    lttng destroy "$LC_LTTNG_SESSION" >&2
fi
cat "$LC_WORK_DIR/latscope.stdout"
[[ $rc -eq 0 ]] || { lc_show_log "$err"; lc_die "latscope live failed with status $rc"; }
lc_stop_pid "$MIR_PID" miral-shell
lc_stop_pid "$WESTON_PID" weston
lc_check_log "$cout"
[[ -s $trace ]] || lc_die "latscope saved nothing to $trace"
exit 0
