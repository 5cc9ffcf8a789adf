"""Every repository file the README and the docs name exists where they say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(ROOT.glob("*/*/README.md")),
]
TOP = "assay|schemas|services|tests|docs|deploy|examples|scripts|bench"
PATH = re.compile(rf"`((?:{TOP})/[\w./-]+\.(?:py|md|yaml|yml|json|sh|toml|mjs))`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_files_exist(doc: Path) -> None:
    named = set(PATH.findall(doc.read_text(encoding="utf-8")))
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{doc.relative_to(ROOT)} names files that do not exist: {missing}"
