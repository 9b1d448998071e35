#!/bin/sh
# The on-device check of `latscope lab gpu` (issue #57), run on the GPU machine from the
# repository root; every result goes under $OUT.
#
# UNTESTED: written in a session without a GPU; the session that first runs it checks it.
#
# Needs: a latscope binary built on the development machine (`cargo build --release`, copied to
# .gpu/latscope, a folder listed in .git/info/exclude that travels with the working tree; or
# LATSCOPE=path), nvcc (/usr/local/cuda/bin, or NVCC=path), python3.
#
# 1. The independent C program (scripts/gpu/stages.cu) and the lab, interleaved, three rounds
#    of each spacing: each stage's p50 is compared, within 10% or 300 ns (compare.txt).
# 2. The sweeps for the closing note: spacing (the default), streams x burst, kernels x sync,
#    graph launches.
set -eu
OUT=${OUT:?set OUT to the folder the results go to}
L=${LATSCOPE:-.gpu/latscope}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
N=${REQUESTS:-2000}

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
"$L" --version > "$OUT/latscope-version.txt"
"$NVCC" -O2 -o "$OUT/stages" scripts/gpu/stages.cu > "$OUT/nvcc.log" 2>&1

for round in 1 2 3; do
    for spacing in 0 4000 16000; do
        "$L" lab gpu --requests "$N" --spacing "${spacing}ns" --format json \
            > "$OUT/lab-$round-$spacing.json" 2> "$OUT/lab-$round-$spacing.err" \
            || echo "lab gpu failed: round $round, spacing $spacing ns" >> "$OUT/failures.txt"
        "$OUT/stages" "$N" "$spacing" > "$OUT/c-$round-$spacing.txt" 2>&1 \
            || echo "stages failed: round $round, spacing $spacing ns" >> "$OUT/failures.txt"
    done
done

python3 - "$OUT" > "$OUT/compare.txt" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("round spacing_ns stage lab_p50_ns c_p50_ns diff_ns within")
for lab in sorted(out.glob("lab-*.json")):
    _, rnd, spacing = lab.stem.split("-")
    c = out / f"c-{rnd}-{spacing}.txt"
    try:
        doc = json.loads(lab.read_text())
        lines = [l.split() for l in c.read_text().splitlines() if l and not l.startswith("#")]
    except (OSError, ValueError) as e:
        print(rnd, spacing, "unreadable:", e)
        continue
    theirs = {l[0]: int(l[3]) for l in lines if len(l) == 7}
    for s in doc["rows"][0]["stages"]:
        ours, other = s.get("p50"), theirs.get(s["name"])
        if ours is None or other is None:
            print(rnd, spacing, s["name"], ours, other, "-", "missing")
            continue
        diff = ours - other
        ok = abs(diff) <= max(300, 0.10 * other)
        print(rnd, spacing, s["name"], ours, other, diff, "yes" if ok else "NO")
PY

"$L" lab gpu --requests "$N" --format json > "$OUT/sweep-spacing.json" 2> "$OUT/sweep-spacing.err" || true
"$L" lab gpu --requests "$N" --pattern back-to-back --spacing 0 --streams 1,2,4 --burst 1,16 \
    --format json > "$OUT/streams-burst.json" 2> "$OUT/streams-burst.err" || true
"$L" lab gpu --requests "$N" --kernel nop,spin:2us,grid:64 --sync spin,yield,blocking --spacing 16 \
    --format json > "$OUT/kernels-sync.json" 2> "$OUT/kernels-sync.err" || true
"$L" lab gpu --requests "$N" --pattern back-to-back,isolated --launch stream,graph:8 --spacing 0 \
    --format json > "$OUT/graphs.json" 2> "$OUT/graphs.err" || true
for f in sweep-spacing streams-burst kernels-sync graphs; do
    "$L" report "$OUT/$f.json" -o "$OUT/$f.html" 2>> "$OUT/report.err" || true
done
