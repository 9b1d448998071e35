#!/usr/bin/env bash
# spans_throughput.py at 2, 4, 8 and 16 threads (and an older latscope on one core) from a bundle
# directory .par/: latscope, latscope-before and the 100 MB inputs as NAME.xz + NAME.events (made
# by spans_throughput.py --mb 100 under --dir, then xz -6): how the README's spans figures were taken
# on an idle 16-core machine. OUT=DIR receives par.txt.
# beside; and the latscope before this stop's parallel reader, one core, same files.
set -u
cd "$(dirname "$0")/.."
P=${PAR:-$PWD/.par}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PY=python3; command -v python3 >/dev/null || PY=/opt/torch/.venv/bin/python
D=/tmp/bench/100MB; mkdir -p $D
for f in b.txt c.json f.txt j.jsonl p.txt w.log; do
  $PY -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"), 1<<20)' $P/$f.xz $D/$f &
  cp $P/$f.events $D/
done; wait
{
nproc; uptime; ls -la $D
for n in 2 4 8 16; do
  echo "== threads $n on CPUs 0-$((n-1))"
  $PY scripts/bench/spans_throughput.py $P/latscope --dir /tmp/bench --mb 100 --runs 5 --cpu 1 \
      --threads $n --cpus 0-$((n-1)) --no-tools
done
echo "== before (main at 06:00, no --threads), one core pinned, median of 5"
$PY - $P/latscope-before $D <<'PYEOF'
import subprocess, sys, time, statistics, os
b, d = sys.argv[1], sys.argv[2]
wake = ["--start", "sched:sched_wakeup", "--end", "sched:sched_switch", "--key", "pid=next_pid"]
cases = [("perf", "p.txt", wake), ("ftrace", "f.txt", wake),
         ("babeltrace", "b.txt", ["--span", "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit", "--key", "addr,vtid"]),
         ("chrome", "c.json", []), ("jsonl", "j.jsonl", ["--span", "r=request_start..request_done", "--key", "id"]), ("wayland", "w.log", None)]
for name, f, rule in cases:
    p = os.path.join(d, f)
    cmd = [b, "wayland", "--format", "json", p] if rule is None else [b, "spans", "-f", "json", *rule, p]
    ts = []
    for _ in range(5):
        t = time.perf_counter(); subprocess.run(["taskset", "-c", "1"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True); ts.append(time.perf_counter() - t)
    m = statistics.median(ts); print(f"| {name} before | {os.path.getsize(p)/1e6:.0f} MB | {m:.3f} s | {os.path.getsize(p)/1e6/m:.0f} MB/s |", flush=True)
PYEOF
} > $OUT/par.txt 2>&1
cat $OUT/par.txt
