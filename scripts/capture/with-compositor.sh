#!/usr/bin/env bash
# Usage: with-compositor.sh weston|mir CMD [ARGS...]
# Starts weston headless (pixman renderer) in a private XDG_RUNTIME_DIR — and, for `mir`,
# miral-shell nested in it as mir-client.sh does — then runs CMD with WAYLAND_DISPLAY set to
# that compositor (stdin, stdout and stderr are CMD's), stops everything and exits with CMD's
# status. Used by the Wayland lab's tests (tests/wayland_lab.rs) to measure a compositor that
# latscope did not start.
set -euo pipefail

usage() { echo "usage: $0 weston|mir CMD [ARGS...]" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
which=$1
shift
[[ $which == weston || $which == mir ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

lc_setup
host=latscope-weston-$$
lc_start_weston "$host"
disp=$host
if [[ $which == mir ]]; then
    disp=latscope-mir-$$
    lc_start_mir "$disp" "$host"
fi
rc=0
WAYLAND_DISPLAY=$disp "$@" || rc=$?
exit "$rc"
