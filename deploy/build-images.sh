#!/usr/bin/env bash
# Build the Assay service image assay:<version>-<source hash> (also tagged assay:<version>
# and assay:latest), cached: skipped when the tag for the current source hash exists.
#
#   deploy/build-images.sh            # build if needed, print the image tag
#   deploy/build-images.sh --hash     # print the source hash only
#   deploy/build-images.sh --tag      # print the tag the current sources would get
#
# The build needs no network inside Docker: wheels (the project's and every dependency's,
# pinned to the versions of the local venv when there is one) and the bubblewrap .deb are
# staged on the host under $ASSAY_IMAGE_CACHE (default /var/cache/assay/image) and the
# image installs them with `pip install --no-index`. The dependency wheels are cached by
# a hash of pyproject.toml and the pins, so only a dependency change downloads anything.
# The base is assay-sandbox:latest (deploy/sandbox/build-image.sh builds it if missing).
#
# Env: PYTHON (host python 3.11 with pip; default .venv/bin/python, else python3),
#      ASSAY_IMAGE_CACHE, ASSAY_IMAGE_BASE (default assay-sandbox:latest),
#      ASSAY_IMAGE_KEEP=1 (keep the tags of earlier source hashes).
set -euo pipefail
HERE="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
ROOT="$(dirname "$HERE")"
cd "$ROOT"

BASE="${ASSAY_IMAGE_BASE:-assay-sandbox:latest}"
CACHE="${ASSAY_IMAGE_CACHE:-/var/cache/assay/image}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
VERSION="$(sed -nE 's/^version = "([^"]+)"/\1/p' pyproject.toml | head -n1)"

# Files that end up in the image: the package sources and the image recipe.
source_files() {
  local paths=(pyproject.toml setup.py assay schemas services deploy/docker deploy/build-images.sh
               deploy/sandbox/build-rootfs.sh)
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files --cached --others --exclude-standard -- "${paths[@]}" \
      | while read -r f; do [[ -f "$f" ]] && echo "$f"; done | LC_ALL=C sort -u
  else
    find "${paths[@]}" -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | LC_ALL=C sort
  fi
}

source_hash() {
  # The base image id is part of the key: a rebuilt base rebuilds the service image.
  local base_id
  base_id="$(docker image inspect --format '{{.Id}}' "$BASE" 2>/dev/null || echo "missing")"
  { echo "base $base_id"; source_files | while read -r f; do sha256sum "$f"; done; } \
    | sha256sum | cut -c1-12
}

ensure_base() {
  if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    if [[ "$BASE" == assay-sandbox:latest ]]; then
      echo "build-images: base $BASE missing, building it (deploy/sandbox/build-image.sh)" >&2
      bash "$ROOT/deploy/sandbox/build-image.sh" >&2
    else
      echo "build-images: base image $BASE not found" >&2; exit 1
    fi
  fi
}

case "${1:-}" in
  --hash) ensure_base; source_hash; exit 0 ;;
  --tag) ensure_base; echo "assay:$VERSION-$(source_hash)"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--hash|--tag]" >&2; exit 2 ;;
esac

ensure_base
HASH="$(source_hash)"
TAG="assay:$VERSION-$HASH"
if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "build-images: $TAG exists (cached)" >&2
else
  t0=$SECONDS
  mkdir -p "$CACHE"
  CTX="$(mktemp -d "$CACHE/ctx-$HASH.XXXXXX")"
  SRC="$(mktemp -d "$CACHE/src-$HASH.XXXXXX")"
  trap 'rm -rf "$CTX" "$SRC"' EXIT
  mkdir -p "$CTX/project" "$CTX/deps" "$CTX/debs"

  # 1. The project wheel, built from a clean copy of the sources (a stale build/ in the
  #    work tree must not leak deleted modules into the wheel).
  source_files | grep -v '^deploy/' | while read -r f; do
    mkdir -p "$SRC/$(dirname "$f")"; cp -p "$f" "$SRC/$f"
  done
  [[ -f README.md ]] && cp README.md "$SRC/" || touch "$SRC/README.md"
  "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation -w "$CTX/project" "$SRC" >&2

  # 2. Dependency wheels (+ pip's own), pinned to the local venv's versions, cached.
  PINS="$CACHE/pins.txt"
  "$PYTHON" -m pip freeze --exclude-editable 2>/dev/null | grep -v -iE '^(assay)[= @]' >"$PINS.new" || true
  "$PYTHON" -m pip --version | awk '{print "pip==" $2}' >>"$PINS.new"
  DEPS_KEY="$({ sed -n '/^dependencies = \[/,/^\]/p' pyproject.toml; cat "$PINS.new"; } | sha256sum | cut -c1-12)"
  DEPS="$CACHE/deps-$DEPS_KEY"
  if [[ ! -f "$DEPS/.complete" ]]; then
    echo "build-images: collecting dependency wheels into $DEPS" >&2
    rm -rf "$DEPS.tmp"; mkdir -p "$DEPS.tmp"
    "$PYTHON" -m pip wheel --quiet --prefer-binary -c "$PINS.new" -w "$DEPS.tmp" \
      "$CTX"/project/assay-*.whl pip >&2
    rm -f "$DEPS.tmp"/assay-*.whl
    touch "$DEPS.tmp/.complete"
    rm -rf "$DEPS"; mv "$DEPS.tmp" "$DEPS"
  fi
  cp "$DEPS"/*.whl "$CTX/deps/"

  # 3. bubblewrap for the bubblewrap backend (its libraries are already in the base).
  DEBS="$CACHE/debs"
  if ! ls "$DEBS"/bubblewrap_*.deb >/dev/null 2>&1; then
    mkdir -p "$DEBS"
    (cd "$DEBS" && apt-get -o APT::Sandbox::User=root download bubblewrap >&2)
  fi
  cp "$DEBS"/bubblewrap_*.deb "$CTX/debs/"

  cp deploy/docker/Dockerfile deploy/docker/entrypoint.sh deploy/sandbox/build-rootfs.sh "$CTX/"
  echo "build-images: docker build $TAG" >&2
  DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}" docker build --quiet \
    --build-arg "BASE=$BASE" --build-arg "ASSAY_VERSION=$VERSION" \
    --build-arg "ASSAY_SOURCE_HASH=$HASH" --label "assay.source-hash=$HASH" \
    -t "$TAG" "$CTX" >&2
  echo "build-images: built $TAG in $((SECONDS - t0))s" >&2
fi
docker tag "$TAG" "assay:$VERSION"
docker tag "$TAG" assay:latest
# Drop the tags of earlier source hashes (their layers go with them unless a container or
# another tag still uses them); ASSAY_IMAGE_KEEP=1 keeps them.
if [[ -z "${ASSAY_IMAGE_KEEP:-}" ]]; then
  docker image ls --format '{{.Repository}}:{{.Tag}}' assay \
    | grep -E "^assay:$VERSION-[0-9a-f]{12}\$" | grep -vx "$TAG" \
    | xargs -r docker rmi >/dev/null 2>&1 || true
fi
echo "$TAG"
