#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (Debian packages as
# root via apt-get, cargo-fuzz), then formatting, lints, every test (unit, golden, end-to-end
# against real weston/Mir/glmark2), and a bounded fuzz run of every parser.
#
#   scripts/test.sh              everything
#   FUZZ_SECONDS=0 scripts/test.sh   skip the fuzz run (e.g. while iterating)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each step says when it starts and how long the one before took, so that a CI log shows
# where the time goes (the budget is 30 minutes for a fresh clone on 2 cores).
last=$SECONDS
# With the disk space left, since a full disk fails in odd ways: a linker writing its output
# through a mapping dies of SIGBUS ("ld terminated with signal 7"), as a fuzz build did on a CI
# host with little space.
step() {
    printf '\n==> [%dm%02ds, previous step %ds, %s free on disk] %s\n' $((SECONDS / 60)) \
        $((SECONDS % 60)) $((SECONDS - last)) "$(df -Ph . | awk 'NR == 2 { print $4 }')" "$*" >&2
    last=$SECONDS
}

# CI builds everything once from nothing: incremental compilation only adds work there, and
# full debug info made the two ~6-minute builds of this crate (lib and lib tests, opt-level 1)
# longer; line tables keep file:line in panics and backtraces. Clippy and the tests share the
# profile (the build scripts and proc-macros are built once).
if [[ ${CI:-} == true ]]; then
    export CARGO_INCREMENTAL=0
    export CARGO_PROFILE_DEV_DEBUG=line-tables-only
fi

step "installing Debian packages the tests need (only those missing)"
scripts/capture/install-deps.sh

step "the tests' private Python venv (PyPI packages, only those missing)"
# One venv (target/latscope-venv): Perfetto's own protobuf schema, to decode
# `export --to perfetto` independently, DuckDB for the Parquet test, and NumPy, SciPy and
# Matplotlib for hyperfine's own scripts run on `bench --export-json` (tests/bench.rs).
scripts/capture/venv.sh perfetto==0.59.1 protobuf==7.36.2 duckdb==2.0.0 \
    numpy==2.2.6 scipy==1.15.3 matplotlib==3.10.3 >/dev/null

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

step "cargo test (unit, golden, end-to-end)"
# LATSCOPE_REQUIRE_STACK makes the end-to-end tests fail, not skip, when weston & co. are
# missing: after the install step above they must be there.
results=$(mktemp)
trap 'rm -f "$results"' EXIT
LATSCOPE_REQUIRE_STACK=1 cargo test --locked --all-targets 2>&1 | tee "$results"

step "cargo build --release: the binary the timing ratios measure"
# What users run. In a debug build the X11 lab's client costs ~250 ns per pipelined request and
# ~1 us per round trip more than in release (generic x11rb-protocol code is compiled at this
# crate's opt-level 1), so beside x11perf on an idle server it measured itself (0.70x for
# PutImage 10x10; release 1.23x). About 3.5 minutes from nothing on 2 cores without debug info
# (5.5 on a slow host), and without the release profile's whole-program optimisation (`lto =
# "fat"`, for the readers' few percent: these ratios were measured without it, and it adds
# half a minute: 364 s against 333 s on the same host).
CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_LTO=false cargo build --release --locked --bin latscope

step "cargo test: the timing ratios, alone (latscope beside x11perf, perf, a C client)"
# A ratio of two rates measured on a 2-core machine is only meaningful with nothing else
# running: these tests are #[ignore]d in the parallel run above and run one at a time here,
# against the release binary (LATSCOPE_BIN: tests/util.rs).
LATSCOPE_BIN="$PWD/target/release/latscope" LATSCOPE_REQUIRE_STACK=1 \
    cargo test --locked --test integration -- --ignored --test-threads=1 2>&1 | tee -a "$results"

if [[ ${CI:-} == true ]]; then
    step "removing the test and release builds (CI only: the fuzz build needs the space)"
    # About 2.3 GB that nothing below reads: the fuzz targets build apart (fuzz/target), and on a
    # host short of space their link failed (SIGBUS) with these still on disk.
    du -sh target/debug target/release 2>/dev/null || true
    rm -rf target/debug target/release
fi

step "fuzzing the parsers (bounded)"
scripts/fuzz.sh "${FUZZ_SECONDS:-30}"

step "done"
# One closing line with the totals of every cargo test binary above.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$results"
