"""The floor plan: every import runs down, never up or sideways.

schemas imports nothing of ours; the core (assay) only the schemas; each service only the
core and the schemas, never another service; the CLI (assay_cli) may import them all. Read
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
    "assay_runner": ("services/runner", frozenset({"assay_schemas", "assay"})),
    "assay_sandbox_manager": ("services/sandbox-manager", frozenset({"assay_schemas", "assay"})),
    "assay_judge": ("services/judge", frozenset({"assay_schemas", "assay"})),
    "assay_aggregator": ("services/aggregator", frozenset({"assay_schemas", "assay"})),
    "assay_cli": ("cli", frozenset({"assay_schemas", "assay", *SERVICES})),
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
