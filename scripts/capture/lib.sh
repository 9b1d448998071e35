# shellcheck shell=bash disable=SC2034  # WESTON_LOG, MIR_LOG, LC_CLIENT_CMD are outputs for callers
# Helpers to run a real Wayland stack (weston headless, optionally Mir nested
# in it) in a private XDG_RUNTIME_DIR and capture WAYLAND_DEBUG logs.
#
# Source this file from a bash script that uses `set -euo pipefail`, then call
#   lc_setup                       # private runtime dir + work dir + EXIT trap
#   lc_start_weston NAME [DEBUG_LOG]
#   lc_start_mir NAME HOST_NAME [DEBUG_LOG]
#   lc_lttng_session OUT_DIR EVENTS  # an LTTng userspace session of our own
#   ... run clients with WAYLAND_DISPLAY=NAME ...
# Everything started here is stopped by the EXIT trap (lc_cleanup).
#
# Tunables (environment):
#   LC_SOCKET_TIMEOUT   seconds to wait for a compositor socket (default 10)
#   LC_STOP_TIMEOUT     seconds to wait after SIGTERM before SIGKILL (default 5)
#   LC_KEEP_WORK=1      keep the work dir (server stdout/stderr) after exit
#                       (on failure the relevant logs are printed to stderr)
#   LC_MAX_LIFETIME     hard limit in seconds for each background server
#                       (default 600), in case this script is SIGKILLed
#   WESTON_EXTRA_ARGS   extra arguments appended to the weston command line
#   LC_WESTON_RENDERER  pixman (default) or noop: headless weston's own default, which draws
#                       nothing and releases shm buffers after each repaint
#   MIR_EXTRA_ARGS      extra arguments appended to the miral-shell command line
#   MIR_WAYLAND_DEBUG   WAYLAND_DEBUG value for miral-shell when a debug log is
#                       requested (default "server"; "1" also logs Mir's own
#                       client-side traffic to the host weston)

LC_SOCKET_TIMEOUT=${LC_SOCKET_TIMEOUT:-10}
LC_STOP_TIMEOUT=${LC_STOP_TIMEOUT:-5}

# pids (== process-group ids, see lc_spawn) of background servers, in start order
LC_PIDS=()
LC_NAMES=()
LC_RUNTIME_DIR=""
LC_WORK_DIR=""

lc_log() { printf '[capture] %s\n' "$*" >&2; }

lc_die() {
    lc_log "ERROR: $*"
    exit 1
}

# Print the last lines of a log file to stderr (for error messages).
lc_show_log() {
    local f=$1 n=${2:-40}
    if [[ -s $f ]]; then
        lc_log "---- last $n lines of $f ----"
        tail -n "$n" "$f" >&2 || true
        lc_log "---- end of $f ----"
    else
        lc_log "(log $f is empty or missing)"
    fi
}

# (a) Private 0700 XDG_RUNTIME_DIR + a work dir for server output; installs the trap.
lc_setup() {
    # Do not talk to any display the caller may have.
    unset DISPLAY WAYLAND_DISPLAY WAYLAND_SOCKET WAYLAND_DEBUG || true
    local parent=${LC_RUNTIME_PARENT:-/tmp}
    # Unix socket paths are limited to 108 bytes: keep the parent short.
    LC_RUNTIME_DIR=$(mktemp -d "$parent/lsxdg.XXXXXX") || lc_die "mktemp failed in $parent"
    chmod 0700 "$LC_RUNTIME_DIR"
    export XDG_RUNTIME_DIR=$LC_RUNTIME_DIR
    LC_WORK_DIR=$(mktemp -d "$parent/lswork.XXXXXX") || lc_die "mktemp failed in $parent"
    trap lc_cleanup EXIT
    trap 'lc_log "interrupted"; exit 130' INT
    trap 'lc_log "terminated"; exit 143' TERM
    trap 'lc_log "hangup"; exit 129' HUP
    # Software rendering only (no GPU on the test machines).
    export LIBGL_ALWAYS_SOFTWARE=1
    export GALLIUM_DRIVER=${GALLIUM_DRIVER:-llvmpipe}
    export EGL_PLATFORM=wayland
    export NO_COLOR=1       # libwayland >= 1.25 would colour a tty; keep logs plain
    unset FORCE_COLOR || true
}

# Is the process (group) still alive?
lc_alive() { kill -0 "$1" 2>/dev/null; }

# Stop one background server: SIGTERM the server itself (so that it shuts its
# helper clients down in order), wait, then SIGKILL; finally SIGKILL whatever is
# left in its process group (helpers such as weston-desktop-shell).
lc_stop_pid() {
    local pid=$1 name=${2:-process} i
    if ! lc_alive "$pid"; then
        wait "$pid" 2>/dev/null || true
        kill -KILL -- "-$pid" 2>/dev/null || true
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < LC_STOP_TIMEOUT * 10; i++)); do
        lc_alive "$pid" || break
        sleep 0.1
    done
    if lc_alive "$pid"; then
        lc_log "$name (pid $pid) did not stop after ${LC_STOP_TIMEOUT}s, killing"
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    # Helper clients (e.g. weston-desktop-shell) live in the same process group.
    kill -KILL -- "-$pid" 2>/dev/null || true
}

# (c) Stop everything, newest first, and remove the temp dirs.
lc_cleanup() {
    local rc=$? i
    trap - EXIT
    for ((i = ${#LC_PIDS[@]} - 1; i >= 0; i--)); do
        lc_stop_pid "${LC_PIDS[i]}" "${LC_NAMES[i]}"
    done
    LC_PIDS=()
    LC_NAMES=()
    if [[ -n $LC_RUNTIME_DIR && -d $LC_RUNTIME_DIR ]]; then
        rm -rf -- "$LC_RUNTIME_DIR"
    fi
    if [[ -n $LC_WORK_DIR && -d $LC_WORK_DIR ]]; then
        if [[ ${LC_KEEP_WORK:-0} == 1 ]]; then
            lc_log "server output kept in $LC_WORK_DIR"
        else
            rm -rf -- "$LC_WORK_DIR"
        fi
    fi
    exit "$rc"
}

# lc_spawn NAME STDOUT STDERR CMD...  — start CMD in the background in its own
# process group (setsid without fork: a background job of a non-interactive
# shell is not a group leader, so setsid execs in place and $! is the pgid).
# CMD runs under `timeout LC_MAX_LIFETIME` so that it cannot outlive a capture
# script that was SIGKILLed (the EXIT trap cannot run then). SIGTERM to the
# pid is forwarded by timeout to CMD. Sets LC_LAST_PID.
lc_spawn() {
    local name=$1 out=$2 err=$3
    shift 3
    setsid timeout --kill-after=5 "${LC_MAX_LIFETIME:-600}" "$@" </dev/null >"$out" 2>"$err" &
    LC_LAST_PID=$!
    LC_PIDS+=("$LC_LAST_PID")
    LC_NAMES+=("$name")
}

# lc_wait_socket NAME PID WHAT LOGFILE... — bounded wait for $XDG_RUNTIME_DIR/NAME.
lc_wait_socket() {
    local name=$1 sock=$XDG_RUNTIME_DIR/$1 pid=$2 what=$3 i f
    shift 3
    local start=$SECONDS
    for ((i = 0; i < LC_SOCKET_TIMEOUT * 20; i++)); do
        if [[ -S $sock ]]; then
            lc_log "$what socket $name ready after $((SECONDS - start))s"
            return 0
        fi
        if ! lc_alive "$pid"; then
            local rc=0
            wait "$pid" 2>/dev/null || rc=$?
            for f in "$@"; do lc_show_log "$f"; done
            lc_die "$what exited (status $rc) before creating socket $sock"
        fi
        sleep 0.05
    done
    for f in "$@"; do lc_show_log "$f"; done
    lc_die "$what did not create socket $sock within ${LC_SOCKET_TIMEOUT}s"
}

lc_need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 ||
            lc_die "'$c' not found; run scripts/capture/install-deps.sh"
    done
}

# (b) lc_start_weston NAME [DEBUG_LOG]
# Starts weston headless (pixman renderer) listening on $XDG_RUNTIME_DIR/NAME.
# With DEBUG_LOG, weston runs with WAYLAND_DEBUG=server and its stderr (which
# also carries weston's own log lines) goes to DEBUG_LOG.
# Sets WESTON_PID and WESTON_LOG.
lc_start_weston() {
    local name=$1 dbg=${2:-}
    lc_need weston
    local args=(--backend=headless-backend.so --socket="$name" --idle-time=0 --no-config)
    # weston >= 10 headless: --use-pixman (older weston: --use-pixman too;
    # weston >= 12 also accepts --renderer=pixman). Probe the help text.
    if [[ ${LC_WESTON_RENDERER:-pixman} == noop ]]; then
        :
    elif weston --help 2>&1 | grep -q -- '--renderer='; then
        args+=(--renderer=pixman)
    elif weston --help 2>&1 | grep -q -- '--use-pixman'; then
        args+=(--use-pixman)
    fi
    # shellcheck disable=SC2206
    [[ -n ${WESTON_EXTRA_ARGS:-} ]] && args+=($WESTON_EXTRA_ARGS)
    local out=$LC_WORK_DIR/weston.stdout err=${dbg:-$LC_WORK_DIR/weston.stderr}
    if [[ -n $dbg ]]; then
        lc_spawn weston "$out" "$err" env WAYLAND_DEBUG=server weston "${args[@]}"
    else
        lc_spawn weston "$out" "$err" weston "${args[@]}"
    fi
    WESTON_PID=$LC_LAST_PID
    WESTON_LOG=$err
    lc_log "started weston (pid $WESTON_PID): weston ${args[*]}"
    lc_wait_socket "$name" "$WESTON_PID" weston "$err" "$out"
}

# (d) lc_start_mir NAME HOST_NAME [DEBUG_LOG]
# Starts miral-shell nested in the compositor at HOST_NAME (mir:wayland
# platform), listening on $XDG_RUNTIME_DIR/NAME (Mir binds $WAYLAND_DISPLAY as
# its own socket; there is no command-line flag for it in Mir 2.12).
# With DEBUG_LOG, WAYLAND_DEBUG=${MIR_WAYLAND_DEBUG:-server} and its stderr
# (protocol lines plus Mir's warnings) goes to DEBUG_LOG. Mir's informational
# log goes to stdout, kept in the work dir.
# Sets MIR_PID and MIR_LOG.
lc_start_mir() {
    local name=$1 host=$2 dbg=${3:-}
    lc_need miral-shell
    local args=(--wayland-host="$host" --platform-display-libs=mir:wayland
        --console-provider=none --idle-timeout=0)
    # shellcheck disable=SC2206
    [[ -n ${MIR_EXTRA_ARGS:-} ]] && args+=($MIR_EXTRA_ARGS)
    local out=$LC_WORK_DIR/mir.stdout err=${dbg:-$LC_WORK_DIR/mir.stderr}
    local envs=(WAYLAND_DISPLAY="$name")
    [[ -n $dbg ]] && envs+=(WAYLAND_DEBUG="${MIR_WAYLAND_DEBUG:-server}")
    lc_spawn miral-shell "$out" "$err" env "${envs[@]}" miral-shell "${args[@]}"
    MIR_PID=$LC_LAST_PID
    MIR_LOG=$err
    lc_log "started miral-shell (pid $MIR_PID): ${envs[*]} miral-shell ${args[*]}"
    lc_wait_socket "$name" "$MIR_PID" miral-shell "$err" "$out"
}

# lc_client_cmd CLIENT SECONDS — fills the array LC_CLIENT_CMD for a named client.
lc_client_cmd() {
    local client=$1 secs=$2
    case $client in
        simple-shm | weston-simple-shm)
            lc_need weston-simple-shm
            LC_CLIENT_CMD=(weston-simple-shm)
            ;;
        presentation-shm | weston-presentation-shm)
            lc_need weston-presentation-shm
            LC_CLIENT_CMD=(weston-presentation-shm -f)
            ;;
        glmark2 | glmark2-build | glmark2-es2-wayland)
            lc_need glmark2-es2-wayland
            LC_CLIENT_CMD=(glmark2-es2-wayland "--benchmark=build:use-vbo=true:duration=$secs")
            ;;
        *)
            lc_die "unknown client '$client' (expected simple-shm, presentation-shm or glmark2)"
            ;;
    esac
}

# lc_run_client DISPLAY_NAME OUT.log SECONDS CMD... — run CMD with WAYLAND_DEBUG=1
# for at most SECONDS (+ a grace period for clients that stop by themselves),
# stderr -> OUT.log. Returns 0 when the client exited by itself or was stopped
# by the timeout; non-zero on a crash.
lc_run_client() {
    local disp=$1 outlog=$2 secs=$3
    shift 3
    local limit=$secs
    # glmark2 stops by itself after its duration; allow time for EGL setup.
    [[ $1 == glmark2* ]] && limit=$((secs + 20))
    local rc=0
    lc_log "running WAYLAND_DEBUG=1 $* (limit ${limit}s)"
    WAYLAND_DISPLAY=$disp WAYLAND_DEBUG=1 \
        timeout --signal=INT --kill-after=5 "$limit" "$@" \
        </dev/null >"$LC_WORK_DIR/client.stdout" 2>"$outlog" || rc=$?
    # 124: stopped by timeout (expected for endless clients such as simple-shm)
    if [[ $rc -ne 0 && $rc -ne 124 ]]; then
        lc_show_log "$LC_WORK_DIR/client.stdout" 20
        lc_show_log "$outlog" 20
        lc_log "client $1 failed with status $rc"
        return "$rc"
    fi
    return 0
}

# lc_check_log FILE — the log must contain wl_surface commit lines.
lc_check_log() {
    local f=$1 n
    n=$(grep -cE 'wl_surface[@#][0-9]+\.commit\(' "$f" || true)
    if [[ ${n:-0} -eq 0 ]]; then
        lc_show_log "$f" 20
        lc_die "$f contains no wl_surface commit lines"
    fi
    lc_log "$f: $(wc -l <"$f") lines, $n wl_surface.commit lines"
}

# (e) lc_lttng_session OUT_DIR EVENTS
# Starts an lttng-sessiond of our own (userspace only; LTTNG_HOME in the private work dir, so
# that nothing of the machine's own sessions is touched) and creates a session recording
# EVENTS (e.g. 'mir_server_compositor:*') with the vtid context into OUT_DIR. Start it before
# the traced program, so that the program registers with it; `lttng start` and `lttng stop`
# then bracket what is recorded. Sets LC_LTTNG_SESSION.
lc_lttng_session() {
    local dir=$1 events=$2 i
    lc_need lttng-sessiond
    lc_need lttng
    export LTTNG_HOME=$LC_WORK_DIR/lttng-home
    mkdir -m 0700 "$LTTNG_HOME"
    lc_spawn lttng-sessiond "$LC_WORK_DIR/lttng.stdout" "$LC_WORK_DIR/lttng.stderr" lttng-sessiond --no-kernel
    for ((i = 0; i < 100; i++)); do
        lttng list >/dev/null 2>&1 && break
        sleep 0.1
    done
    LC_LTTNG_SESSION=latscope-$$
    lttng create "$LC_LTTNG_SESSION" --output="$dir" >&2
    lttng enable-event -u "$events" >&2
    lttng add-context -u -t vtid >&2
}
