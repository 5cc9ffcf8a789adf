"""Every exception Assay raises on purpose is in the AssayError tree, once per name."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from assay.providers import ProviderError
from assay_sandbox_manager.backends import SandboxError
from assay_schemas import AssayError, JudgingError
from assay_schemas import ProviderError as TreeProviderError
from assay_schemas import SandboxError as TreeSandboxError

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _outside_the_tree() -> list[str]:
    """Classes whose only exception bases are builtins (the root itself excepted)."""
    found = []
    for folder in ("schemas", "assay", "services"):
        for path in (ROOT / folder).rglob("*.py"):
            if ".venv" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef) or node.name == "AssayError":
                    continue
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                if any(b in BUILTIN_ERRORS for b in bases) and all(
                    b in BUILTIN_ERRORS for b in bases
                ):
                    found.append(f"{path.relative_to(ROOT)}: {node.name}({', '.join(bases)})")
    return found


def test_no_exception_class_subclasses_only_builtins() -> None:
    assert _outside_the_tree() == []


def test_the_sandbox_and_provider_errors_are_the_trees_own_not_namesakes() -> None:
    assert SandboxError is TreeSandboxError
    assert ProviderError is TreeProviderError
    assert issubclass(ProviderError, AssayError)


def test_a_failed_rule_check_is_a_judging_error() -> None:
    from assay_judge.rules.worker import CheckFailed

    assert issubclass(CheckFailed, JudgingError)
