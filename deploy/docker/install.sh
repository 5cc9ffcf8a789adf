#!/bin/sh
# Installs one image target's Python packages, offline, from the staged build context.
#   install.sh deps TARGET     a venv at /opt/assay/venv with TARGET's pinned dependencies
#   install.sh project TARGET  the wheels in /tmp/project/ into that venv, then `pip check`
#                              and a check that TARGET's entry point and nats-server run
# Debian's python3 has no ensurepip: the venv is made without pip, which is then run
# straight from its wheel (a wheel is an importable zip) and installs itself too.
set -eu
case "$1" in
  deps)
    python3 -m venv --without-pip /opt/assay/venv
    /opt/assay/venv/bin/python "$(ls /wheels/deps/pip-*.whl)/pip" install --no-cache-dir \
      --no-index --disable-pip-version-check --find-links /wheels/deps \
      -r "/wheels/requirements/$2.txt"
    ;;
  project)
    pip install --no-cache-dir --no-index --no-deps --disable-pip-version-check /tmp/project/*.whl
    rm -rf /tmp/project
    pip check
    if [ "$2" = assay ]; then
      assay --help >/dev/null
    else
      test -x "/opt/assay/venv/bin/assay-$2"
      python -c "import assay_$(echo "$2" | tr - _).__main__"
    fi
    nats-server --version
    ;;
  *)
    echo "usage: install.sh deps TARGET | install.sh project TARGET" >&2
    exit 2
    ;;
esac
