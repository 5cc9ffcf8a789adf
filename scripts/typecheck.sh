#!/usr/bin/env bash
# mypy (strict) over the whole `assay` package as it is installed. The repository maps
# folders onto packages (schemas/ -> assay.schemas, services/sandbox-manager/ ->
# assay.sandbox_manager, ...; see setup.py), which a static checker cannot follow, so this
# builds a tree of symlinks with the installed layout and checks that.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
tree=.cache/typecheck
rm -rf "$tree"
mkdir -p "$tree/assay"
for entry in assay/*; do ln -s "../../../$entry" "$tree/assay/$(basename "$entry")"; done
ln -s ../../../schemas "$tree/assay/schemas"
ln -s ../../../services/runner "$tree/assay/runner"
ln -s ../../../services/sandbox-manager "$tree/assay/sandbox_manager"
ln -s ../../../services/judge "$tree/assay/judge"
ln -s ../../../services/aggregator "$tree/assay/aggregator"
cd "$tree"
exec "../../$VENV/bin/mypy" --config-file ../../pyproject.toml -p assay
