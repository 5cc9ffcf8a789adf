"""What the example-task generators share: writing a task folder and its truth file,
building reference checks, and byte-stable XLSX/DOCX containers."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import zipfile
from pathlib import Path

import yaml

NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
"""Regex group capturing a plain or scientific-notation number."""

FIXED_DATE = dt.datetime(2024, 3, 12, 9, 30, 0)
ZIP_DATE = (2024, 3, 12, 9, 30, 0)
"""Fixed dates, so that XLSX/DOCX containers come out byte-identical on every run."""


def write_text(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write text with exact bytes (no newline translation), creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))


def write_csv_rows(
    path: Path, rows: list[list[str]], sep: str = ",", encoding: str = "utf-8"
) -> None:
    """Write rows joined by sep, one line each, newline-terminated."""
    write_text(path, "".join(sep.join(r) + "\n" for r in rows), encoding)


def normalize_zip(path: Path) -> None:
    """Rewrite an OOXML container with fixed entry timestamps and fixed document dates."""
    with zipfile.ZipFile(path) as zin:
        entries = [(info.filename, zin.read(info.filename)) for info in zin.infolist()]
    stamp = FIXED_DATE.strftime("%Y-%m-%dT%H:%M:%SZ")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zout:
        for name, data in entries:
            if name == "docProps/core.xml":
                text = data.decode("utf-8")
                for tag in ("created", "modified"):
                    text = re.sub(
                        rf"(<dcterms:{tag}[^>]*>)[^<]*(</dcterms:{tag}>)",
                        rf"\g<1>{stamp}\g<2>",
                        text,
                    )
                data = text.encode("utf-8")
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)
    path.write_bytes(buf.getvalue())


def write_task(
    root: Path,
    task_id: str,
    prompt: str,
    meta: dict,
    truth: dict,
) -> Path:
    """Write prompt.md and task.yaml to tasks/<task_id>/ and the truth to truth/<task_id>.json."""
    folder = root / "tasks" / task_id
    write_text(folder / "prompt.md", prompt.strip() + "\n")
    text = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=4096)
    write_text(folder / "task.yaml", text)
    write_text(
        root / "truth" / f"{task_id}.json",
        json.dumps(truth, indent=2, sort_keys=False, ensure_ascii=False) + "\n",
    )
    return folder


def meta_for(
    domain: str,
    phase: str,
    difficulty: str,
    expected_output: str,
    constraints: list[str],
    checks: list[dict],
) -> dict:
    """The fields of task.yaml, in the order they are written."""
    return {
        "domain": domain,
        "phase": phase,
        "difficulty": difficulty,
        "expected_output": expected_output,
        "constraints": constraints,
        "reference_checks": checks,
        "judge": {"sampling_times": 1},
    }


def near(name: str, path: str, pattern: str, expected: float, tolerance: float) -> dict:
    """A number_near check: the number captured by pattern lies within tolerance."""
    return {
        "kind": "number_near",
        "name": name,
        "path": path,
        "pattern": pattern,
        "expected": float(round(expected, 6)),
        "tolerance": float(round(tolerance, 6)),
    }


def contains(name: str, path: str, pattern: str) -> dict:
    """A contains check: the file matches pattern (case-insensitive)."""
    return {"kind": "contains", "name": name, "path": path, "pattern": pattern}


def exists(name: str, path: str) -> dict:
    """A file_exists check: some file matches the glob path."""
    return {"kind": "file_exists", "name": name, "path": path}


def r6(x: float) -> float:
    """x as a plain float rounded to 6 decimals, as stored in truth and checks."""
    return float(round(float(x), 6))
