#!/usr/bin/env bash
# Bounded fuzz run of every parser target: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 30; 0 skips).
# Uses cargo-fuzz (installed here when missing) with the nightly toolchain when there is one,
# else the stable one with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs nightly-only compiler flags).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-30}
[[ $seconds == 0 ]] && { echo "fuzz: skipped (0 seconds)" >&2; exit 0; }

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked --quiet
fi
toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    export RUSTC_BOOTSTRAP=1
fi

# Seed the line and log targets with the real captured logs.
corpus=fuzz/corpus/wayland_line
mkdir -p "$corpus" fuzz/corpus/wayland_log fuzz/corpus/linear_spec
for log in tests/data/wayland/*.log; do
    head -c 4096 "$log" > "fuzz/corpus/wayland_log/$(basename "$log")"
    head -n 50 "$log" | split -l 1 - "$corpus/$(basename "$log" .log)-"
done
# and the lines past the wrap of the 32-bit clock, whose stamps libwayland pads with spaces
grep -m 50 '^\[ ' tests/data/wayland/weston-simple-shm-wrap.client.log | split -l 1 - "$corpus/padded-"
# and lines of the other dialects (queues and `#` ids, thread ids, the time of day), which the
# line reader's short path reads too
for dialect in 1.23 1.26; do
    head -n 50 tests/data/wayland/weston-simple-shm.client.log \
        | python3 tests/independent/dialect.py "$dialect" /dev/stdin \
        | split -l 1 - "$corpus/simple-shm-$dialect-"
done
printf '0,2000,100' > fuzz/corpus/linear_spec/seed
# The document reader: every committed document, truncated ones, and absurd numbers.
mkdir -p fuzz/corpus/doc_reader
for d in tests/data/docs/*.json; do
    cp "$d" "fuzz/corpus/doc_reader/$(basename "$d")"
    head -c 300 "$d" > "fuzz/corpus/doc_reader/truncated-$(basename "$d")"
done
printf '%s' '{"kind":"spans","version":1,"unit":"ns","source":"live","input":{},"live":null,"warnings":[],"spans":[{"name":"x","side":null,"by":null,"group":null,"count":-5,"p50":"NaN"}],"rates":[],"values":[]}' > fuzz/corpus/doc_reader/nan
printf '%s' '{"kind":"bench","version":1e300}' > fuzz/corpus/doc_reader/huge
# What crashed it before (kept as seeds, so every run reads them first): bpftrace counts summed
# past 2^64, an HdrHistogram varint that hdrhistogram negated past i64.
printf '%s\n' '{"type": "hist", "data": {"@ns": [{"min": 0, "max": 1, "count": 18446744073709551615}, {"min": 2, "max": 3, "count": 5}]}}' \
    > fuzz/corpus/doc_reader/bpftrace-count-overflow
printf '#\nTag=t,0.0,1.0,1.0,HISTEwAAAAkAAAAAAAAAAwAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAP///////////w==\n' \
    > fuzz/corpus/doc_reader/hlog-negated-varint

# The join of two logs: the head of each committed pair, split by a 0xff byte.
mkdir -p fuzz/corpus/frames_join
for c in tests/data/frames/*.client.log; do
    name=$(basename "$c" .client.log)
    server=tests/data/frames/$name.server.log          # a run with its own server log
    [[ -f $server ]] || server=tests/data/frames/${name%%-*}.server.log   # weston-..., mir-...
    { head -c 8192 "$c"; printf '\xff'; head -c 8192 "$server"; } > "fuzz/corpus/frames_join/$name"
done
# ... and with the compositor's own trace: weston's timeline, Mir's LTTng text.
mkdir -p fuzz/corpus/frames_trace
for pair in weston-timeline:timeline.log mir-traced:trace.txt; do
    run=${pair%%:*} trace=tests/data/frames/${pair%%:*}.${pair#*:}
    { head -c 8192 "tests/data/frames/$run.client.log"; printf '\xff'
      head -c 8192 "tests/data/frames/$run.server.log"; printf '\xff'
      head -c 8192 "$trace"; } > "fuzz/corpus/frames_trace/$run"
done

# The trace reader: every committed trace (first 4 KiB), behind each format's selector byte,
# with the two rules split by pid (0x0N) and with one rule alone (0x4N: the workers pair it).
mkdir -p fuzz/corpus/trace_reader
for t in tests/data/traces/*.*; do
    [[ $t == *.md ]] && continue
    for pick in 0 1 2 3 4 5 6 7 8 9; do
        { printf "\\x0$pick"; head -c 4096 "$t"; } > "fuzz/corpus/trace_reader/$pick-$(basename "$t")"
        { printf "\\x4$pick"; head -c 4096 "$t"; } > "fuzz/corpus/trace_reader/alone-$pick-$(basename "$t")"
    done
done
# What crashed it before: an strace clock stamp of hour 179558191 (its sum overflowed).
base64 -d > fuzz/corpus/trace_reader/strace-clock-overflow <<'SEED'
CDkzMTEgIDE3OTU1ODE5/////////////////////////////////zA5LjcxMzgxOf///wAAAAAAAACX//////////////////8w
OS43MTMwMDYxIGV4PDAuMDowMDIzPgo5MzEzICAxNzk1NTgxOTE6OTA6OTcgKCswMTAwMDAwMDMxMSkgdm0gbHR0bmdfOiBzLi4+
Cg==
SEED

# What crashed it before: an ftrace `sched_switch:` whose payload is tabs and a vertical tab
# (white space to `trim_end`, a token to the token search: the line was sliced backwards).
base64 -d > fuzz/corpus/trace_reader/sched-payload-vertical-tab <<'SEED'
UAkJCgkJaWVudAkJ/wgJCQkJd2EJCQkNCQkJCQkJCQkJCQkJDQkJCSsJCQkJd2EJCQkNCQkJCQkJICAgICAgICAgICAgICAgXy0t
LS0tLzA6MSBwaWQ9MTEgcHJpbz0xMjAgdGFyZ2V0X2NwdT0wMDAKICAgICAgICAgIDxpZGxlPi0wICAgICAgIFswMDBdIGROczQu
IDE0NDEwLjIxMjAyNzogc2NoZWRfd2FrZXVwOiBjb21tPWtzb2Z0aXJxZC8wIHBpZT0xNCBwcmlvPTEyMCB0YXJnZXRfY3B1PTAw
MAogICAgICAgICAgPGlkbGU+LTAgICAgICAgWzAwMF0gZC4uMi4gMTQ0MTAuMjEyMDI5OiBzY2hlZF9zd2l0Y2g6IHByZXZfY29t
bT1zd2FwcGVyLzAgcHJldl9waWQ9MCBwcmV2X3ByaW89MTIwIHByZXZfAAAqAdKpXdBzdGF0ZT1SID09PiBuZXh0X2NvbW09a3Nv
ZnRpcnFkLzAgbmV4dF9waWQ9MTQgbmV4dF9wcmlvPTEyMAogICAgIGtzb2Z0aXJxZC8wLTE0ICAgICAgWzAwMF0gZC4uMi4gMTQA
AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA0MTAuMjEyMDM0OiBzY2hlZF9zd2l0Y2g6IHByZXZfY29tbT1r
c29mdG1tPXN3YXBwZXIvMCBuZXh0X3BpZC89MCBuZXh0X3ByaW89MTIwCiAgICAgICAgIHB5dGhvbjMtMjU3OTMgICBbMDAxXSBk
TnM0LiAxNDQxMC4yMTIwNDY6IHNjaGVkX3dha2V1cDogY29tbT1rd29ya2VyLzE6MSBwaWQ9MTA2NDYgcHJpbz0xMjAgdGFyZ2V0
X2NwdT0wMDEKICAgICAgICAgcHl0aG9uMy0yNTc5MyAgIFswMDFdIGROczMuIDE0NDEwLjIxMjA0OTogc2NoZWRfd2FrZXVwOiBj
b21tPWtzb2Z0aXJxZC8xIHBpZD0yMiBwcmlvPTEyMCB0YXJnZXRfY3B1PTAwMQogICAgICAgICBweXRob240LTI1NzkzICAgWzAw
MV0gZC4uMi4gMTQ0MTAuMjEyMDUxOiBzY2hlZF9zd2l0Y2g6CQkJCQkJCQkJCQkJCwk=
SEED

# Files read in place: the committed logs and traces (first 4 KiB), behind a byte that picks a
# buffer of 16 to 71 bytes (lines past it are too long), the UTF-8 check and two threads or
# three.
mkdir -p fuzz/corpus/mapped_reader
for f in tests/data/wayland/*.log tests/data/traces/*.*; do
    [[ $f == *.md ]] && continue
    for pick in 08 4b c1; do
        { printf "\\x$pick"; head -c 4096 "$f"; } > "fuzz/corpus/mapped_reader/$pick-$(basename "$f")"
    done
done

# Merge and the native-histogram mapping: two committed spans documents, and bucket bytes.
mkdir -p fuzz/corpus/fleet
for d in tests/data/docs/*.json; do
    { printf '\x01'; cat "$d"; printf '\n---\n'; cat "$d"; } > "fuzz/corpus/fleet/$(basename "$d")"
done
printf '\x00\x18\x00\x64\x00\x20\x00\x05\x00\x21\x22' > fuzz/corpus/fleet/buckets

# live's rules: a span, a key, a rate, a value, then a tracefs format file (real ones).
mkdir -p fuzz/corpus/live_spec
{ printf '%s\n' 'runq=tracepoint:sched:sched_wakeup:comm==app..tracepoint:sched:sched_switch:next_comm^=a' \
    'pid=next_pid' 'tracepoint:sched:sched_switch:prev_state!=0' 'v=tracepoint:sched:sched_wakeup:prio';
  printf 'format:\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] driver;\toffset:8;\tsize:4;\tsigned:0;\n'; } \
    > fuzz/corpus/live_spec/sched
printf '%s\n' 'w=uprobe:/bin/x:work..uretprobe:/bin/x:work' 'tid' 'usdt:/bin/x:p:n:arg0==3' 'r=kretprobe:vfs_read:retval' \
    > fuzz/corpus/live_spec/user

# No sanitizer: the fuzzed code (ingest, doc, report, span, stats, rule, live::output,
# fleet::merge/native) has no `unsafe` but ingest::words' SIMD searches (loads within the
# slice, held to byte loops by their unit tests) and the UTF-8 those searches found ASCII in
# ingest::lines, so AddressSanitizer finds little there that a panic or an overflow check
# (debug assertions stay on) would not, while it slowed the build and halved the executions
# per second. Every target is built once, before the runs, with the same flags as the runs
# (other flags would build them again).
# cargo-fuzz compiles every crate as one codegen unit (for ThinLTO's inlining across crates):
# the build is the longer for it, and the runs the faster, and the runs are what find things.
# With 16 units, a fresh build took 349 s on the 2-core VM where one unit took 392 s, but
# wayland_line ran 70,000 inputs a second where it ran 104,000, fleet 3,100 where 3,700
# (20-second runs); opt-level 1 built in 281 s, its runs not measured.
build=(--sanitizer none)
targets=(wayland_line wayland_log linear_spec doc_reader trace_reader live_output fleet live_spec mapped_reader frames_join frames_trace)
echo "fuzz: building ${#targets[@]} targets" >&2
cargo "${toolchain[@]}" fuzz build "${build[@]}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# One bounded run of a target, its output in $scratch/TARGET.log; the inputs saved before it
# are listed in $scratch/TARGET.saved (a crash's is the one not among them).
run() {
    local target=$1
    ls fuzz/artifacts/"$target" > "$scratch/$target.saved" 2>/dev/null || true
    cargo "${toolchain[@]}" fuzz run "${build[@]}" "$target" -- -max_total_time="$seconds" \
        -max_len=65536 -print_final_stats=1 > "$scratch/$target.log" 2>&1
}

# A failure: what libFuzzer and the panic said (not only cargo-fuzz's own backtrace, which
# says nothing), and each input it saved, in base64, so that a CI log alone reproduces it:
#   base64 -d > crash; cargo fuzz run TARGET crash
report() {
    local target=$1 log=$scratch/$1.log
    echo "fuzz: $target failed" >&2
    grep -m 1 -A 1 'panicked at' "$log" || true
    grep -v -E '^#[0-9]+|Uses: |^"|^ +at ' "$log" | tail -n 80 || true
    for name in $(ls fuzz/artifacts/"$target" 2>/dev/null || true); do
        grep -qxF "$name" "$scratch/$target.saved" && continue
        artifact=fuzz/artifacts/$target/$name
        echo "fuzz: $artifact ($(stat -c %s "$artifact") bytes), base64:"
        head -c 65536 "$artifact" | base64 -w 100
    done
}

# As many targets at once as there are CPUs (each is one process on one core, for the same
# time as alone): on 2 cores the runs take half the time, at the same rate (wayland_line and
# fleet beside each other ran 101,700 and 4,500 inputs a second, alone 104,100 and 3,700).
at_once=$(nproc 2>/dev/null || echo 1)
failed=0
for ((i = 0; i < ${#targets[@]}; i += at_once)); do
    batch=("${targets[@]:i:at_once}")
    echo "fuzz: ${batch[*]} for ${seconds}s" >&2
    pids=()
    for target in "${batch[@]}"; do
        run "$target" &
        pids+=($!)
    done
    for j in "${!batch[@]}"; do
        target=${batch[j]}
        if wait "${pids[j]}"; then
            echo "fuzz: $target:"
            tail -n 6 "$scratch/$target.log"
        else
            report "$target"
            failed=1
        fi
    done
    [[ $failed == 0 ]] || exit 1
done
echo "fuzz: no crash in ${seconds}s per target" >&2
