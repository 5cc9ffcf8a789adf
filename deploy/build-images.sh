#!/usr/bin/env bash
# Build the Assay images, one per service plus the full one, each cached by a hash of its
# own inputs: skipped when the tag for the current hash exists.
#
#   image (Dockerfile target)          packages                         runs
#   assay-runner (runner)              schemas, assay, runner           assay-runner
#   assay-sandbox-manager (...)        schemas, assay, sandbox-manager  assay-sandbox-manager
#   assay-judge (judge)                schemas, assay, judge            assay-judge (rules: assay-rules)
#   assay-aggregator (aggregator)      schemas, assay, report, aggr.    assay-aggregator
#   assay (assay)                      all of them, and cli             assay CLI, nats-server
#
# Each is tagged IMAGE:<version>-<hash>, IMAGE:<version> and IMAGE:latest.
#
#   deploy/build-images.sh [TARGET...]          # build if needed; print one tag a line
#   deploy/build-images.sh --hash [TARGET...]   # print the input hashes only
#   deploy/build-images.sh --tag [TARGET...]    # print the tags the current inputs get
#
# The build needs no network inside Docker: every package is built as its own wheel on
# the host (uv build, from a clean copy of its tracked files), the dependency wheels
# (pinned to the versions of the local venv) and the bubblewrap .deb are staged under
# $ASSAY_IMAGE_CACHE (default /var/cache/assay/image), and each image installs with
# `pip install --no-index` only its own packages and their dependency closure (resolved
# on the host). Dependency wheels are cached by a hash of the packages' dependency lists
# and the pins, so only a dependency change downloads anything.
# The base is assay-sandbox:latest (deploy/sandbox/build-image.sh builds it if missing).
#
# Env: PYTHON (host python 3.11 with pip; default .venv/bin/python, else python3),
#      ASSAY_IMAGE_CACHE, ASSAY_IMAGE_BASE (default assay-sandbox:latest),
#      ASSAY_IMAGE_KEEP=1 (keep the tags of earlier hashes).
set -euo pipefail
HERE="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
ROOT="$(dirname "$HERE")"
cd "$ROOT"

BASE="${ASSAY_IMAGE_BASE:-assay-sandbox:latest}"
CACHE="${ASSAY_IMAGE_CACHE:-/var/cache/assay/image}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

# Targets in Dockerfile order (the classic builder builds every stage before its target).
TARGETS=(sandbox-manager runner judge aggregator assay)
PACKAGES=(schemas assay report services/runner services/sandbox-manager services/judge services/aggregator viewer testing cli)
RECIPE=(deploy/docker deploy/build-images.sh deploy/sandbox/build-rootfs.sh deploy/sandbox/resident.c deploy/sandbox/spawn.c)

image_of() { if [[ "$1" == assay ]]; then echo assay; else echo "assay-$1"; fi; }

# The Dockerfile stage a target's packages go on: the images that run sandboxes need
# bubblewrap and the rootfs recipe.
stage_of() {
  case "$1" in sandbox-manager | assay) echo sandbox-runtime ;; *) echo runtime ;; esac
}

# The package folders whose wheels go into a target (the aggregator builds its report
# with the report package, one floor below it).
packages_of() {
  case "$1" in
    assay) echo "${PACKAGES[@]}" ;;
    aggregator) echo "schemas assay report services/aggregator" ;;
    *) echo "schemas assay services/$1" ;;
  esac
}

# What pip resolves for a target: its packages with their third-party dependencies.
requirement_of() {
  if [[ "$1" == assay ]]; then
    echo "assay[providers,aws] assay-runner assay-sandbox-manager assay-judge assay-aggregator assay-viewer assay-testing assay-cli"
  else
    echo "assay-$1"
  fi
}

version_of() {
  local folder=.
  [[ "$1" != assay ]] && folder="services/$1"
  sed -nE 's/^version = "([^"]+)"/\1/p' "$folder/pyproject.toml" | head -n1
}

tracked_files() {
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files --cached --others --exclude-standard -- "$@" \
      | while read -r f; do [[ -f "$f" ]] && echo "$f"; done | LC_ALL=C sort -u
  else
    find "$@" -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | LC_ALL=C sort
  fi
}

# The local venv's versions of the packages' dependency closure (never the workspace's
# own packages), plus pip itself: only what the images install, so that an unrelated
# package installed into the venv changes no key.
write_pins() {
  "$PYTHON" - "${PACKAGES[@]}" >"$1" <<'PY'
import sys, tomllib
from importlib.metadata import PackageNotFoundError, distribution
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement

todo, seen, pins = [], set(), {"pip"}
for folder in sys.argv[1:]:
    project = tomllib.load(open(f"{folder}/pyproject.toml", "rb"))["project"]
    todo += [(r, "") for r in project.get("dependencies", [])]
    todo += [(r, e) for e, rs in project.get("optional-dependencies", {}).items() for r in rs]
while todo:
    text, extra = todo.pop()
    req = Requirement(text)
    if req.marker and not req.marker.evaluate({"extra": extra}):
        continue
    name = req.name.lower().replace("_", "-")
    for wanted in ("", *sorted(req.extras)):
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        if not name.startswith("assay"):
            pins.add(name)
        todo += [(r, wanted) for r in dist.requires or []]
for name in sorted(pins):
    print(f"{name}=={distribution(name).version}")
PY
}

# Key of the dependency wheels: every package's dependency lists and the pins.
deps_key() {
  { "$PYTHON" - "${PACKAGES[@]}" <<'PY'
import sys, tomllib
for folder in sys.argv[1:]:
    project = tomllib.load(open(f"{folder}/pyproject.toml", "rb"))["project"]
    print(folder, sorted(project.get("dependencies", [])), project.get("optional-dependencies", {}))
PY
    cat "$1"; } | sha256sum | cut -c1-12
}

# A target's hash: base image id, dependency key, recipe and its packages' files.
target_hash() {
  local target="$1" files
  # shellcheck disable=SC2046
  files="$(tracked_files "${RECIPE[@]}" $(packages_of "$target"))"
  { echo "base $BASE_ID"; echo "deps $DEPS_KEY"; echo "$files" | while read -r f; do sha256sum "$f"; done; } \
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
  BASE_ID="$(docker image inspect --format '{{.Id}}' "$BASE")"
}

# Stage the build context: wheels per target, dependency wheels, requirements, bubblewrap.
stage_context() {
  local ctx="$1" src folder target
  src="$(mktemp -d "$CACHE/src.XXXXXX")"
  mkdir -p "$ctx/wheels" "$ctx/deps" "$ctx/requirements" "$ctx/debs"
  # 1. One wheel per package, built from a clean copy of its tracked files (a stale
  #    build/ in the work tree must not leak deleted modules into a wheel).
  for folder in "${PACKAGES[@]}"; do
    tracked_files "$folder" | while read -r f; do
      mkdir -p "$src/$(dirname "$f")"; cp -p "$f" "$src/$f"
    done
    build_wheel "$src/$folder" "$ctx/wheels"
  done
  rm -rf "$src"
  for target in "${TARGETS[@]}"; do
    mkdir -p "$ctx/project/$target"
    for folder in $(packages_of "$target"); do
      cp "$ctx/wheels/$(wheel_name "$folder")"-*.whl "$ctx/project/$target/"
    done
  done

  # 2. Dependency wheels (+ pip's own), pinned to the local venv's versions, cached.
  local deps="$CACHE/deps-$DEPS_KEY"
  if [[ ! -f "$deps/.complete" ]]; then
    echo "build-images: collecting dependency wheels into $deps" >&2
    rm -rf "$deps.tmp"; mkdir -p "$deps.tmp"
    local wheels=() wheel
    for wheel in "$ctx"/wheels/*.whl; do
      # The core with its optional model providers (runner, judge and the full image) and
      # boto3 (the full image's `assay keys s3-publisher` on AWS).
      [[ "$(basename "$wheel")" == assay-[0-9]* ]] && wheel="$wheel[providers,aws]"
      wheels+=("$wheel")
    done
    "$PYTHON" -m pip wheel --quiet --prefer-binary -c "$PINS" -w "$deps.tmp" "${wheels[@]}" pip >&2
    rm -f "$deps.tmp"/assay-*.whl "$deps.tmp"/assay_*.whl
    touch "$deps.tmp/.complete"
    rm -rf "$deps"; mv "$deps.tmp" "$deps"
  fi
  cp "$deps"/*.whl "$ctx/deps/"

  # 3. Each target's dependency closure, resolved offline from those wheels.
  for target in "${TARGETS[@]}"; do
    # shellcheck disable=SC2046
    "$PYTHON" -m pip install --quiet --dry-run --ignore-installed --no-index \
      --find-links "$ctx/deps" --find-links "$ctx/wheels" -c "$PINS" \
      --report "$ctx/report.json" $(requirement_of "$target") >&2
    "$PYTHON" - "$ctx/report.json" >"$ctx/requirements/$target.txt" <<'PY'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if not name.lower().replace("_", "-").startswith("assay"):
        print(f"{name}=={version}")
PY
    grep '^pip==' "$PINS" >>"$ctx/requirements/$target.txt"
  done
  rm -f "$ctx/report.json"

  # 4. bubblewrap for the bubblewrap backend (its libraries are already in the base).
  local debs="$CACHE/debs"
  if ! ls "$debs"/bubblewrap_*.deb >/dev/null 2>&1; then
    mkdir -p "$debs"
    (cd "$debs" && apt-get -o APT::Sandbox::User=root download bubblewrap >&2)
  fi
  cp "$debs"/bubblewrap_*.deb "$ctx/debs/"
  cp deploy/docker/Dockerfile deploy/docker/entrypoint.sh deploy/docker/install.sh \
    deploy/sandbox/build-rootfs.sh deploy/sandbox/resident.c deploy/sandbox/spawn.c "$ctx/"
}

# Wheel file names use underscores: services/sandbox-manager -> assay_sandbox_manager.
wheel_name() {
  local name
  name="$(sed -nE 's/^name = "([^"]+)"/\1/p' "$1/pyproject.toml" | head -n1)"
  echo "${name//-/_}"
}

build_wheel() {
  local uv
  uv="$(dirname "$(command -v "$PYTHON")")/uv"
  [[ -x "$uv" ]] || uv="$(command -v uv || true)"
  if [[ -n "$uv" ]]; then
    "$uv" build --quiet --wheel -o "$2" "$1" >&2
  else
    "$PYTHON" -m pip wheel --quiet --no-deps -w "$2" "$1" >&2
  fi
}

drop_old_tags() {
  local image="$1" version="$2" tag="$3"
  docker image ls --format '{{.Repository}}:{{.Tag}}' "$image" \
    | grep -E "^$image:$version-[0-9a-f]{12}\$" | grep -vx "$tag" \
    | xargs -r docker rmi >/dev/null 2>&1 || true
}

MODE=build
case "${1:-}" in
  --hash) MODE=hash; shift ;;
  --tag) MODE=tag; shift ;;
  -*) echo "usage: $0 [--hash|--tag] [TARGET...]" >&2; exit 2 ;;
esac
WANTED=("$@")
[[ ${#WANTED[@]} -eq 0 ]] && WANTED=("${TARGETS[@]}")
for target in "${WANTED[@]}"; do
  [[ " ${TARGETS[*]} " == *" $target "* ]] || { echo "build-images: no target $target (${TARGETS[*]})" >&2; exit 2; }
done

ensure_base
mkdir -p "$CACHE"
PINS="$(mktemp "$CACHE/pins.XXXXXX")"
CTX=""
trap 'rm -rf "$PINS" ${CTX:+"$CTX"}' EXIT
write_pins "$PINS"
DEPS_KEY="$(deps_key "$PINS")"

declare -A TAG
MISSING=()
for target in "${TARGETS[@]}"; do
  [[ " ${WANTED[*]} " == *" $target "* ]] || continue
  hash="$(target_hash "$target")"
  TAG[$target]="$(image_of "$target"):$(version_of "$target")-$hash"
  case "$MODE" in
    hash) echo "$target $hash" ;;
    tag) echo "${TAG[$target]}" ;;
  esac
  if docker image inspect "${TAG[$target]}" >/dev/null 2>&1; then
    [[ "$MODE" == build ]] && echo "build-images: ${TAG[$target]} exists (cached)" >&2
  else
    MISSING+=("$target")
  fi
done
[[ "$MODE" != build ]] && exit 0

if [[ ${#MISSING[@]} -gt 0 ]]; then
  t0=$SECONDS
  CTX="$(mktemp -d "$CACHE/ctx.XXXXXX")"
  stage_context "$CTX"
  for target in "${MISSING[@]}"; do
    tag="${TAG[$target]}"
    echo "build-images: docker build --target $target $tag" >&2
    DOCKER_BUILDKIT=0 docker build --quiet --target "$target" \
      --build-arg "BASE=$BASE" --build-arg "SERVICE=$target" \
      --build-arg "SERVICE_BASE=$(stage_of "$target")" \
      --label "org.opencontainers.image.title=$(image_of "$target")" \
      --label "assay.source-hash=${tag##*-}" \
      --label "org.opencontainers.image.version=$(version_of "$target")" \
      --label "org.opencontainers.image.revision=${tag##*-}" \
      -t "$tag" "$CTX" >&2
  done
  echo "build-images: built ${MISSING[*]} in $((SECONDS - t0))s" >&2
fi

for target in "${TARGETS[@]}"; do
  [[ -n "${TAG[$target]:-}" ]] || continue
  tag="${TAG[$target]}" image="$(image_of "$target")" version="$(version_of "$target")"
  docker tag "$tag" "$image:$version"
  docker tag "$tag" "$image:latest"
  # Earlier hashes' tags go (their layers too, unless something else uses them).
  [[ -z "${ASSAY_IMAGE_KEEP:-}" ]] && drop_old_tags "$image" "$version" "$tag"
  echo "$tag"
done
