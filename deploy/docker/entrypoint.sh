#!/bin/sh
# Entry point of the assay image: `docker run assay:TAG runner` runs `assay serve runner`;
# a first argument that is a command on PATH (assay, nats-server, sh, ...) runs as given.
set -e
if [ "$#" -eq 0 ]; then
  exec assay serve --help
fi
case "$1" in
  -*) exec assay serve "$@" ;;
esac
if command -v "$1" >/dev/null 2>&1; then
  exec "$@"
fi
exec assay serve "$@"
