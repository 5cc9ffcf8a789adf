#!/usr/bin/env bash
# The venv Inspect AI runs in for `make bench-peer`, built once and kept in a cache.
#
#   scripts/peer-venv.sh        prints the venv's python
#
# The cache key is a hash of scripts/peer/requirements.txt and the interpreter's version,
# so a changed pin builds a fresh venv beside the old one; later runs take a second.
#
# Environment:
#   ASSAY_CACHE   cache dir (default /var/cache/assay, else ~/.cache/assay when not writable)
#   PEER_PYTHON   interpreter to build the venv from (default python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
reqs="$here/peer/requirements.txt"
python="${PEER_PYTHON:-python3}"

cache="${ASSAY_CACHE:-/var/cache/assay}"
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    cache="$HOME/.cache/assay"
    mkdir -p "$cache"
fi

key="$( { cat "$reqs"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)"
venv="$cache/peer-inspect-$key"

# One build at a time; the marker is written last, so a half-built venv is rebuilt.
exec 9>"$venv.lock"
flock 9
if [ ! -f "$venv/.installed" ]; then
    printf 'peer-venv: building %s (once; a minute or two)\n' "$venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip >&2
    "$venv/bin/python" -m pip install -q -r "$reqs" >&2
    touch "$venv/.installed"
fi
printf '%s\n' "$venv/bin/python"
