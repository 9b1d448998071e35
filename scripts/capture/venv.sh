#!/usr/bin/env bash
# Usage: venv.sh PACKAGE[==VERSION]...
# One private Python virtual environment for every PyPI package the tests use (the system
# Python is left alone): creates it if missing, installs the packages it lacks, and prints the
# path of its python on standard output (everything else goes to stderr). Idempotent and quick
# when all is installed; safe to run from parallel tests (a lock beside the venv).
#
#   $(scripts/capture/venv.sh perfetto==0.59.1) tests/independent/perfetto_slices.py t.pftrace
#
# The venv is $LATSCOPE_VENV, default target/latscope-venv in the repository (private to the
# build, never a shared directory). Callers that need more packages just name them.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${LATSCOPE_VENV:-$root/target/latscope-venv}
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" >&2
fi
# The packages (name==version) not installed at that version.
mapfile -t missing < <("$venv/bin/python" - "$@" <<'PY'
import sys
from importlib import metadata
for spec in sys.argv[1:]:
    name, _, version = spec.partition("==")
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have is None or (version and have != version):
        print(spec)
PY
)
if ((${#missing[@]})); then
    echo "venv.sh: installing ${missing[*]} into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}" >&2
fi
echo "$venv/bin/python"
