#!/usr/bin/env bash
# The X11 lab before and after its own request path, beside x11perf and a C XCB client, on one
# private Xvfb with server and clients pinned apart: the figures in the README's X11 section
# (issue 23). Runs from a bundle directory so that it can run on a machine without X packages:
#
#   B=.x11; mkdir -p $B/bin $B/lib
#   cp /usr/bin/{Xvfb,x11perf,xkbcomp} $B/bin; cp -r /usr/share/X11/xkb $B/xkb
#   for b in $B/bin/*; do ldd $b | awk '$3 ~ /^\// {print $3}'; done | sort -u |
#       grep -v -E 'libc.so|libm.so|ld-linux' | xargs -I{} cp -L {} $B/lib/
#   cc -O2 -o $B/bin/xcb_round_trip tests/targets/xcb_round_trip.c -lxcb
#   cp <release latscope at 577cfb0> $B/bin/latscope-before; cp target/release/latscope $B/bin/latscope-after
#   cp scripts/bench/x11_before_after.sh $B/run.sh; OUT=/tmp/out $B/run.sh
set -u
cd "$(dirname "$0")"
X=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$X/lib
export PATH=$X/bin:$PATH
[ -x /usr/bin/xkbcomp ] || cp $X/bin/xkbcomp /usr/bin/xkbcomp
{
nproc; uname -r; cat /etc/os-release | head -2; uptime
SC=2; CC=6; [ "$(nproc)" -lt 8 ] && { SC=0; CC=1; }
taskset -c $SC Xvfb :7 -nolisten tcp -noreset -xkbdir $X/xkb -extension GLX -screen 0 1280x1024x24 \
    2> $OUT/xvfb.log &
XPID=$!
sleep 2
export DISPLAY=:7
PY=python3; [ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python
C="taskset -c $CC"
xp() { $C x11perf -repeat 3 -time 2 -putimage10 -shmput10 -putimage100 -shmput100 2>&1 | grep -E 'reps|trep' ; }
echo "== x11perf (before the labs)"; xp
for v in before after; do
    L="$C $X/bin/latscope-$v lab x11"
    echo "== $v: pipelined uploads, depth 24"
    $L upload --pipelined --size 10x10,100x100 --method put,shm --depth 24 -n 100000000 --max-time 2s --warmup 20000 --display :7 -f json > $OUT/pipelined-$v.json 2>$OUT/pipelined-$v.err
    echo "rc=$?"
    $PY -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]: print("pipelined", r["method"], r["size"], "%.0f/s" % r["ops_per_s"], "client+X CPU/op %.0f ns" % r["cpu_ns_per_op"])' $OUT/pipelined-$v.json
    echo "== $v: K segments 32x32x8"
    $L upload --method put,shm --segments 1,4,16,64 -n 20000 --display :7 2>&1 | head -40
    echo "== $v: round trip beside C, 5 rounds"
    for r in 1 2 3 4 5; do
        $C xcb_round_trip -n 20000 -w 2000
        $L round-trip -n 20000 --warmup 2000 --display :7 -f json 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print("latscope p50_ns=%d n=%d" % (d["results"][0]["p50"], d["results"][0]["count"]))' 2>&1
    done
done
echo "== x11perf (after the labs)"; xp
echo "== after with --compare-x11perf"
$C $X/bin/latscope-after lab x11 upload --pipelined --size 10x10,100x100 --method put,shm --depth 24 -n 100000000 --max-time 2s --warmup 20000 --display :7 --compare-x11perf 2>&1 | tail -30
kill $XPID
} > $OUT/x11.txt 2>&1
cat $OUT/x11.txt | tail -150
