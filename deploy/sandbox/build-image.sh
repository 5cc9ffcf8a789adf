#!/usr/bin/env bash
# Build (cached) the runtime rootfs and import it as the Docker image
# assay-sandbox:<recipe-hash>, also tagged assay-sandbox:latest; skipped when the tag exists.
set -euo pipefail
HERE="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
HASH="$("$HERE/build-rootfs.sh" --hash)"
TAG="assay-sandbox:$HASH"
if ! docker image inspect "$TAG" >/dev/null 2>&1; then
  ROOTFS="$("$HERE/build-rootfs.sh")"
  tar -C "$ROOTFS" -c . | docker import - "$TAG" >/dev/null
fi
docker tag "$TAG" assay-sandbox:latest
echo "$TAG"
