#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (Debian packages as
# root via apt-get, cargo-fuzz), then formatting, lints, every test (unit, golden, end-to-end
# against real weston/Mir/glmark2), and a bounded fuzz run of every parser.
#
#   scripts/test.sh              everything
#   FUZZ_SECONDS=0 scripts/test.sh   skip the fuzz run (e.g. while iterating)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "installing Debian packages the tests need (only those missing)"
scripts/capture/install-deps.sh

step "the tests' private Python venv (PyPI packages, only those missing)"
# One venv (target/latscope-venv): Perfetto's own protobuf schema, to decode
# `export --to perfetto` independently, and DuckDB for the Parquet test.
scripts/capture/venv.sh perfetto==0.59.1 protobuf==7.36.2 duckdb==2.0.0 >/dev/null

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

step "fuzzing the parsers (bounded)"
scripts/fuzz.sh "${FUZZ_SECONDS:-30}"

# One closing line with the totals of every cargo test binary above.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$results"
