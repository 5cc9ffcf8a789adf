#!/usr/bin/env bash
# What `make run` and `make test` need from this machine, set up when missing; quick when
# everything is already there (each step checks first and says what it does).
#
#   scripts/setup-host.sh run    # python3-venv, bubblewrap, gcc + static libc, the sandbox runtime (cached by recipe hash)
#   scripts/setup-host.sh test   # + Docker engine and compose, chromium, kubectl, node and npm, the sandbox image
#
# As root, missing Debian packages are installed; otherwise the exact command is printed and
# the script stops. The local model (for tests) is `make local-model`, run by `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-run}"
export DEBIAN_FRONTEND=noninteractive

say() { printf '== setup (%s): %s\n' "$MODE" "$*" >&2; }

# command -> Debian package, for the commands this mode needs.
# The rootfs build compiles the sandbox's resident and the sandbox-manager's start helper
# (deploy/sandbox/resident.c and spawn.c) static.
declare -A NEED=([bwrap]=bubblewrap [debootstrap]=debootstrap [cc]=gcc)
if [[ "$MODE" == test ]]; then
  # The local model (llama.cpp) is compiled once: cmake and a C++ compiler. Node.js and npm
  # run the publisher example of examples/clients/node.
  NEED+=([docker]=docker.io [docker-compose]=docker-compose [chromium]=chromium [kubectl]=kubernetes-client
        [cmake]=cmake [g++]=g++ [node]=nodejs [npm]=npm)
  # A Docker client on the PATH says nothing about an engine: many machines have only the
  # client (or a remote context that is down). The tests need an engine that answers here,
  # so without one the engine's package is wanted too, whatever `docker` already is.
  if ! docker info >/dev/null 2>&1 && ! command -v dockerd >/dev/null 2>&1; then
    NEED+=([dockerd]=docker.io)
  fi
elif [[ "$MODE" != run ]]; then
  echo "usage: $0 run|test" >&2; exit 2
fi

missing=()
for cmd in "${!NEED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
done
# Debian splits venv support out of python3; `make install` needs it.
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
# A static libc for `cc -static` (no command names it: its archive does).
dpkg -s libc6-dev >/dev/null 2>&1 || missing+=(libc6-dev)
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ "$(id -u)" != 0 ]]; then
    say "missing system packages; run:  sudo apt-get update && sudo $cmd"; exit 1
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  # shellcheck disable=SC2086
  $cmd -qq >/dev/null
fi

if [[ "$MODE" == test ]] && ! docker info >/dev/null 2>&1; then
  say "starting the Docker engine"
  # overlay2 where the kernel allows; vfs is the slow but universal fallback.
  for driver in overlay2 vfs; do
    # Its own session: stopping the command that started it (Ctrl-C on `make test`)
    # must not take the engine, and every container on it, down too.
    (setsid dockerd --storage-driver="$driver" >/var/log/dockerd-assay.log 2>&1 < /dev/null &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 && break
    pkill -x dockerd || true; sleep 1
  done
  docker info >/dev/null 2>&1 || { say "dockerd did not start (see /var/log/dockerd-assay.log)"; exit 1; }
fi

ROOTFS_DONE="${ASSAY_SANDBOX_CACHE:-/var/cache/assay}/rootfs-$(bash deploy/sandbox/build-rootfs.sh --hash)/.assay-rootfs-complete"
if [[ ! -f "$ROOTFS_DONE" ]]; then
  say "building the sandbox runtime (Debian + scientific Python; a few minutes, once per recipe)"
  # debootstrap's and apt's lines are the progress display: one line each, as they come.
  bash deploy/sandbox/build-rootfs.sh 2> >(grep --line-buffered -E '^(I: (Retrieving|Extracting|Installing|Configuring)|Get:|Setting up|build-rootfs)' | awk '{ print substr($0, 1, 100); fflush() }' >&2)
fi
if [[ "$MODE" == test ]]; then
  bash deploy/sandbox/build-image.sh >/dev/null
fi
say "ready"
