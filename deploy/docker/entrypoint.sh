#!/bin/sh
# Entry point of the assay images. A first argument that is a command on PATH (assay,
# assay-runner, nats-server, sh, ...) runs as given. Anything else names a service:
# `docker run assay:TAG runner` runs `assay serve runner` in the full image, the only one
# with the `assay` CLI (it sits above the services); a service image runs that service's
# own console script (`docker run assay-judge:TAG rules` runs `assay-rules`).
set -e
if [ "$#" -gt 0 ] && command -v "$1" >/dev/null 2>&1; then
  exec "$@"
fi
if command -v assay >/dev/null 2>&1; then
  if [ "$#" -eq 0 ]; then
    exec assay serve --help
  fi
  exec assay serve "$@"
fi
case "${1:-}" in
  "" | -*)
    echo "this image runs one service by its own command: $(cd /opt/assay/venv/bin && ls assay-* | tr '\n' ' ')" >&2
    exit 2
    ;;
esac
if command -v "assay-$1" >/dev/null 2>&1; then
  name="$1"
  shift
  exec "assay-$name" "$@"
fi
echo "no service $1 in this image: $(cd /opt/assay/venv/bin && ls assay-* | tr '\n' ' ')" >&2
exit 2
