"""No import cycle inside the core, not even one held apart by an import inside a function.

Read from the syntax tree: every import counts wherever it stands (except under
TYPE_CHECKING), and importing ``a.b.c`` counts as importing the packages ``a.b`` and
``a`` too, since Python runs their ``__init__`` first."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "assay"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "assay").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _targets(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ours `module` imports, each with the packages above it."""
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []  # imports for types only
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{up}.{base}" if base else up
            names += [f"{base}.{alias.name}" for alias in node.names] + [base]
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        while name:  # the package's __init__ runs before its module
            if name != module and not module.startswith(f"{name}."):
                found.add(name)
            name = name.rpartition(".")[0]
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {module: _targets(module, path, known) for module, path in known.items()}


def test_the_core_imports_without_a_cycle() -> None:
    try:
        tuple(TopologicalSorter(_graph()).static_order())
    except CycleError as e:
        raise AssertionError(f"import cycle in the core: {' -> '.join(e.args[1])}") from None


def test_the_graph_sees_lazy_imports_and_the_packages_they_run() -> None:
    graph = _graph()
    assert "assay.bus" in graph["assay.store._uploads"]  # inside a function
    assert "assay.security" in graph["assay.bus._bus"]  # the package of security.signing
