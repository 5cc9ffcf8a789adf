"""The floor plan: every import runs down, never up or sideways.

schemas imports nothing of ours; the core (assay) only the schemas; the report
(assay_report: the state, statistics and renderers, no bus) only those two; each service
only the core, the schemas and the report, never another service; the viewer
(assay_viewer: the web app and the review desk) those and the aggregator, whose log
reading and counting rule it shows; the testing parts (assay_testing: the scripted model
server, the synthetic log, pipeline helpers) the services and what they stand on, so a
service test needs neither the CLI nor the benches; the CLI (assay_cli) may import them
all. Read
from the source's syntax tree, so an import inside a function counts as much as one at the
top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVICES = ("assay_runner", "assay_sandbox_manager", "assay_judge", "assay_aggregator")
# package -> (its folder, the packages of ours it may import besides itself)
FLOORS: dict[str, tuple[str, frozenset[str]]] = {
    "assay_schemas": ("schemas", frozenset()),
    "assay": ("assay", frozenset({"assay_schemas"})),
    "assay_report": ("report", frozenset({"assay_schemas", "assay"})),
    "assay_runner": ("services/runner", frozenset({"assay_schemas", "assay"})),
    "assay_sandbox_manager": ("services/sandbox-manager", frozenset({"assay_schemas", "assay"})),
    "assay_judge": ("services/judge", frozenset({"assay_schemas", "assay"})),
    "assay_aggregator": (
        "services/aggregator",
        frozenset({"assay_schemas", "assay", "assay_report"}),
    ),
    "assay_viewer": (
        "viewer",
        frozenset({"assay_schemas", "assay", "assay_report", "assay_aggregator"}),
    ),
    "assay_testing": (
        "testing",
        frozenset({"assay_schemas", "assay", "assay_report", *SERVICES}),
    ),
    "assay_cli": (
        "cli",
        frozenset(
            {"assay_schemas", "assay", "assay_report", "assay_viewer", "assay_testing", *SERVICES}
        ),
    ),
}
OURS = frozenset(FLOORS)


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in the tree, at any depth."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def _offences(package: str) -> list[str]:
    folder, allowed = FLOORS[package]
    root = ROOT / folder
    offences = []
    for path in sorted((root / package).rglob("*.py")):
        for line, name in _imported(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if name in OURS and name != package and name not in allowed:
                offences.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return offences


@pytest.mark.parametrize("package", FLOORS)
def test_imports_run_down_only(package: str) -> None:
    offences = _offences(package)
    assert not offences, f"{package} imports up or sideways:\n" + "\n".join(offences)


def test_the_walk_sees_imports_inside_functions() -> None:
    tree = ast.parse("def f():\n    from assay_judge import build\n    import assay_runner.x\n")
    assert _imported(tree) == [(2, "assay_judge"), (3, "assay_runner")]


def test_every_package_of_ours_has_a_floor() -> None:
    """A new package gets a floor here before it can hide from this test."""
    found = {p.parent.name for p in ROOT.glob("*/assay*/__init__.py")}
    found |= {p.parent.name for p in ROOT.glob("services/*/assay*/__init__.py")}
    assert found == set(FLOORS)


# What the report must never import: it is read off a state, never off the bus, so
# `assay report`, the viewer and a notebook can build one without a NATS connection.
BUS_MODULES = ("nats", "faststream", "assay.bus", "assay.store", "assay.embedded")


def _bus_imports(package: str) -> list[str]:
    folder, _ = FLOORS[package]
    found = []
    for path in sorted((ROOT / folder / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if any(name == m or name.startswith(m + ".") for m in BUS_MODULES):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    return found


def test_the_report_needs_no_bus() -> None:
    found = _bus_imports("assay_report")
    assert not found, "assay_report reaches the bus:\n" + "\n".join(found)


def test_the_bus_check_sees_a_bus_import() -> None:
    assert _bus_imports("assay_aggregator"), "the aggregator reads the log over the bus"
