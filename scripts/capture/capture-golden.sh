#!/usr/bin/env bash
# Re-capture the golden WAYLAND_DEBUG logs in tests/data/wayland/ (or DIR).
# Usage: capture-golden.sh [--wrap] [DIR]
#   --wrap  only capture weston-simple-shm-wrap.client.log: waits until 3 s
#           before libwayland's 32-bit microsecond counter wraps (this can take
#           up to ~72 minutes), then runs weston-simple-shm for 6 s.
# Logs are trimmed to MAX_LINES complete lines from the start (default 20000)
# so each stays well under 1 MB. Update tests/data/wayland/README.md after.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
wrap=0
if [[ ${1:-} == --wrap ]]; then wrap=1; shift; fi
dir=${1:-$here/../../tests/data/wayland}
max=${MAX_LINES:-20000}
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

if [[ $wrap == 1 ]]; then
    wait_s=$(python3 -c 'import time; m=(time.time_ns()//1000)%(1<<32); print(max(0.0, ((1<<32)-m)/1e6-3.0))')
    echo "capture-golden: waiting ${wait_s}s for the 2^32 us wrap" >&2
    sleep "$wait_s"
    "$here/weston-client.sh" "$tmp/weston-simple-shm-wrap.client.log" simple-shm 6
else
    "$here/weston-client.sh" "$tmp/weston-simple-shm.client.log" simple-shm 3
    WESTON_SERVER_LOG="$tmp/weston-glmark2-build.server.log" \
        "$here/weston-client.sh" "$tmp/weston-glmark2-build.client.log" glmark2 1
    "$here/weston-client.sh" "$tmp/weston-presentation-shm.client.log" presentation-shm 2
    "$here/mir-client.sh" "$tmp/mir-glmark2-build.client.log" "$tmp/mir-glmark2-build.server.log" 1
    MIR_WAYLAND_DEBUG=1 "$here/mir-client.sh" "$tmp/unused.client.log" \
        "$tmp/mir-glmark2-build.server-and-host-client.log" 1
    rm -f "$tmp/unused.client.log"
fi

for f in "$tmp"/*.log; do
    head -n "$max" "$f" >"$dir/$(basename "$f")"
    echo "$(basename "$f"): $(wc -l <"$dir/$(basename "$f")") lines, $(wc -c <"$dir/$(basename "$f")") bytes" >&2
done
