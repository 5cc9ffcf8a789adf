"""Control answers of a task: its reference (known-good) and known-bad variants of it.

A task folder may hold ``reference/``: the files a known-good answer leaves in the
workspace, at their workspace paths, and ``message.md``, its final message. Authors add
their own known-bad answers as ``controls/<name>/`` folders of the same layout. Every
folder is read under the task-file rules (no links, nothing outside the folder) and the
caps below; every derivation is deterministic and linear in what it reads (RE2).
"""

from __future__ import annotations

import math
import re
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import re2

from assay_schemas import (
    CONTROL_MESSAGE_CHARS,
    KNOWN_GOOD,
    NumberNearCheck,
    Task,
    TaskInputError,
)

from ._draft import check_attachment, check_task_file

__all__ = [
    "CODE_SUFFIXES",
    "CONTROL_FOLDERS",
    "MAX_CONTROL_BYTES",
    "MAX_CONTROL_FILES",
    "MESSAGE_FILE",
    "ControlAnswer",
    "ControlFolder",
    "control_answers",
    "read_control_folder",
    "utf8_text",
]

MESSAGE_FILE = "message.md"
"""The final message of a reference or control folder."""
CONTROL_FOLDERS = ("reference", "controls")
"""Folders of a task folder that hold controls, never attachments."""
MAX_CONTROL_FILES = 64
MAX_CONTROL_BYTES = 4_000_000
"""Most bytes of one control folder's files (each file is under the attachment cap too)."""
CODE_SUFFIXES = frozenset({".py", ".r", ".R", ".sh", ".jl", ".m", ".ipynb", ".do", ".sas", ".sql"})
"""Files a "not executed" control keeps: code, never outputs."""
_TEXT_SUFFIXES = frozenset({".md", ".txt", ".csv", ".tsv", ".json", ".html", ".tex", ".log"})
# Maximal runs of word characters and dots (an exponent's sign included): a run that is a
# number is one, a run with a number inside (IL6, log2FC, 1km, MAR24, v1.2) is a name.
# The run is found first and judged whole; a minus before it stays where it is (the
# magnitude changes, the sign does not). Both patterns are linear in Python's `re` (no
# nested quantifier; a run is consumed whole; the number's fullmatch backtracks over one
# token's digits once), and `re` is far faster than RE2's wrapper with one callback per
# match, which grows quadratically with the number of matches.
_RUN = re.compile(r"[\w.]+(?:[eE][-+]\d+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_CLAIM = re2.compile(r"[\w./-]+\.[A-Za-z0-9]{1,8}")


class ControlFolder(NamedTuple):
    """A control's answer as read: files by workspace path, and its final message."""

    files: dict[str, bytes]
    message: str


class ControlAnswer(NamedTuple):
    """One control to run: what it is (``variant``, or ``folder`` for an author's), the
    verdict it deserves, and its answer."""

    variant: str | None
    folder: str | None
    expected: str
    answer: ControlFolder


def read_control_folder(task_id: str, folder: Path, *, max_bytes: int) -> ControlFolder:
    """Read one reference/control folder; :class:`TaskInputError` names what is refused."""
    where = f"task {task_id}: {folder.parent.name}/{folder.name}:"
    if folder.is_symlink() or not folder.is_dir():
        raise TaskInputError(f"{where} not a folder (links are refused)")
    message_path = folder / MESSAGE_FILE
    check_task_file(where, MESSAGE_FILE, message_path, folder)
    raw = message_path.read_bytes()
    if len(raw) > CONTROL_MESSAGE_CHARS * 4:
        raise TaskInputError(f"{where} {MESSAGE_FILE} is {len(raw)} bytes, over the cap")
    message = raw.decode("utf-8", "replace")
    if len(message) > CONTROL_MESSAGE_CHARS:
        raise TaskInputError(f"{where} {MESSAGE_FILE} is over {CONTROL_MESSAGE_CHARS} characters")
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel == MESSAGE_FILE or (path.is_dir() and not path.is_symlink()):
            continue
        if len(files) >= MAX_CONTROL_FILES:
            raise TaskInputError(f"{where} more than {MAX_CONTROL_FILES} files")
        source = check_attachment(task_id, folder.name, rel, path, max_bytes, root=folder)
        data = source.source.read_bytes()
        total += len(data)
        if total > MAX_CONTROL_BYTES:
            raise TaskInputError(f"{where} files over {MAX_CONTROL_BYTES} bytes in all")
        files[source.path] = data
    return ControlFolder(files, message)


def _factor(task: Task) -> float:
    """A multiplier that moves any value a number check could accept out of its tolerance:
    for expected e and tolerance t, |f·x − e| > t whenever |x − e| ≤ t and f − 1 is over
    2t/(|e| − t) (the check's value range kept away from 0); 3 when no check bounds it."""
    ratio = 0.0
    for check in task.reference_checks:
        if isinstance(check, NumberNearCheck) and abs(check.expected) > check.tolerance:
            ratio = max(ratio, 2 * check.tolerance / (abs(check.expected) - check.tolerance))
    return 1.0 + max(2.0, 1.5 * ratio)


def _shift(task: Task) -> float:
    """What a number inside a check's tolerance of 0 is moved by: beyond every tolerance."""
    tolerances = [c.tolerance for c in task.reference_checks if isinstance(c, NumberNearCheck)]
    return 3.0 * max([*tolerances, 0.5]) + 1.0


def _altered(text: str, factor: float, shift: float) -> str:
    """Every free-standing number moved out of tolerance, printed as precisely as before."""

    def one(match: Any) -> str:
        run = str(match.group(0))
        token = run.rstrip(".")  # a full stop after a number ends the sentence
        dots = run[len(token) :]
        if not _NUMBER.fullmatch(token):
            return run
        value = float(token)
        new = value * factor if abs(value) > 2 * shift else value + shift
        if not math.isfinite(new):
            return run
        if "e" in token.lower():
            return f"{new:.3e}" + dots
        decimals = len(token.split(".", 1)[1]) if "." in token else 0
        shown = f"{new:.{decimals}f}" if decimals else str(round(new))
        return (shown if shown != token else f"{new:.{decimals + 3}f}") + dots

    return str(_RUN.sub(one, text))


def _claimed(files: dict[str, bytes], message: str) -> set[str]:
    """Files the message names, by path or by bare name."""
    named = set(_CLAIM.findall(message))
    return {p for p in files if p in named or PurePosixPath(p).name in named}


def derive(task: Task, reference: ControlFolder, variant: str) -> ControlFolder | None:
    """One derived variant of the reference, or None when the reference cannot make it
    (no file the message names, no code, nothing to alter)."""
    files, message = reference
    if variant == KNOWN_GOOD:
        return reference
    if variant == "prose_only":
        return ControlFolder({}, message) if files else None
    if variant == "not_executed":
        code = {p: d for p, d in files.items() if PurePosixPath(p).suffix in CODE_SUFFIXES}
        return ControlFolder(code, message) if code and len(code) < len(files) else None
    if variant == "files_removed":
        claimed = _claimed(files, message)
        kept = {p: d for p, d in files.items() if p not in claimed}
        return ControlFolder(kept, message) if claimed else None
    if variant == "altered_numbers":
        factor, shift = _factor(task), _shift(task)
        out = {
            p: _altered(d.decode("utf-8"), factor, shift).encode() if _text(p, d) else d
            for p, d in files.items()
        }
        altered = ControlFolder(out, _altered(message, factor, shift))
        return altered if altered != reference else None
    raise ValueError(f"unknown control variant {variant!r}")


def utf8_text(data: bytes) -> bool:
    """Whether bytes are UTF-8 text without NULs (a control writes them as text)."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text(path: str, data: bytes) -> bool:
    return PurePosixPath(path).suffix.lower() in _TEXT_SUFFIXES and utf8_text(data)


def control_answers(
    task: Task,
    variants: list[str],
    *,
    reference: Path | None,
    authors: Path | None,
    max_bytes: int,
) -> list[ControlAnswer]:
    """Every control of a task: the variants derived from its ``reference`` folder (those
    it can make), then each author folder under ``authors`` (known-bad), in name order."""
    out: list[ControlAnswer] = []
    if reference is not None and (reference.exists() or reference.is_symlink()):
        ref = read_control_folder(task.task_id, reference, max_bytes=max_bytes)
        for variant in variants:
            answer = derive(task, ref, variant)
            if answer is not None:
                expected = "pass" if variant == KNOWN_GOOD else "fail"
                out.append(ControlAnswer(variant, None, expected, answer))
    if authors is not None and authors.is_symlink():
        raise TaskInputError(f"task {task.task_id}: controls/ is a symbolic link")
    if authors is not None and authors.is_dir():
        for sub in sorted(authors.iterdir()):
            if not _FOLDER.fullmatch(sub.name):
                raise TaskInputError(f"task {task.task_id}: controls/{sub.name!r}: bad name")
            answer = read_control_folder(task.task_id, sub, max_bytes=max_bytes)
            out.append(ControlAnswer(None, sub.name, "fail", answer))
    return out
