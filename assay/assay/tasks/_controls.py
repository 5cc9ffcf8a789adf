"""Control answers of a task: its reference (known-good) and known-bad variants of it.

A task folder may hold ``reference/``: the files a known-good answer leaves in the
workspace, at their workspace paths, and ``message.md``, its final message. Authors add
their own known-bad answers as ``controls/<name>/`` folders of the same layout. Every
folder is read under the task-file rules (no links, nothing outside the folder) and the
caps below; every derivation is deterministic and linear in what it reads (RE2).
"""

from __future__ import annotations

import fnmatch
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


RESULT_FACTOR = 1.5
"""What a reported result is multiplied (or, under 1, divided) by: a plausible
fabrication, not nonsense. A value a number check reads is moved past the check's
window instead (`_moved`), however far that is."""


# Method constants, never altered: a confidence, power or error level written as a
# percentage (or led by its name), a formula's base or exponent (2^-ΔΔCt), a sample size
# (n = 3, 8 vs 8), a number glued to a name (Ctrl-2). Contexts are read a few characters
# around the number, so the scan stays linear.
_LEVEL_AFTER = re.compile(
    r"\s*%\s*(?:CI|confidence|credible|prediction|power|FDR|level|significance)", re.IGNORECASE
)
_LEVEL_BEFORE = re.compile(
    r"(?:confidence|significance|credible|alpha|α|power|FDR|level)\s*(?:level\s*)?(?:of|=|at|:)?\s*$",
    re.IGNORECASE,
)
_SIZE_BEFORE = re.compile(r"(?:\b[nN]\s*=\s*|\bvs\.?\s+|[A-Za-z]-|#|\^\s*-?|[\w)]\*\*-?)$")
# An exponent's `**` has its operand right after it (markdown's bold `**` does not).
_SIZE_AFTER = re.compile(r"\s*(?:\^|\*\*-?[\w(]|vs\.?\s+\d)")
_CONTEXT = 24


def _stated(task: Task) -> frozenset[str]:
    """The numbers the task itself states (its design: sample sizes, levels, doses)."""
    text = " ".join([task.prompt, task.expected_output or "", *task.constraints])
    return frozenset(
        m.group(0).rstrip(".")
        for m in _RUN.finditer(text)
        if _NUMBER.fullmatch(m.group(0).rstrip("."))
    )


def _constant(text: str, start: int, end: int, token: str, stated: frozenset[str]) -> bool:
    before = text[max(0, start - _CONTEXT) : start]
    after = text[end : end + _CONTEXT]
    return (
        token in stated
        or bool(_LEVEL_AFTER.match(after) or _SIZE_AFTER.match(after))
        or bool(_SIZE_BEFORE.search(before) or _LEVEL_BEFORE.search(before))
    )


Window = tuple[float, float]
"""A number check's accepted range: (expected, tolerance)."""


def _checked(task: Task, path: str, text: str) -> dict[int, Window]:
    """Where in a file the task's number checks read their value: the start of each
    check's captured number, with the check's window."""
    out: dict[int, Window] = {}
    for c in task.reference_checks:
        if isinstance(c, NumberNearCheck) and fnmatch.fnmatchcase(path, c.path):
            try:
                m = re2.search(c.pattern, text)
            except re2.error:
                continue
            if m is not None and m.lastindex:
                out[m.start(1) + (text[m.start(1)] in "+-")] = (c.expected, c.tolerance)
    return out


def _moved(magnitude: float, sign: float, factor: float, window: Window | None) -> float:
    """A result's magnitude moved by `factor` and kept plausible: a value under 1 (a
    proportion, a p-value, a fold change down) shrinks, so it stays under 1; larger ones
    grow. The map is increasing, so intervals keep their estimates inside. A value its
    check would still accept (a window reaching 0) is moved just past the window."""
    new = magnitude / factor if magnitude < 1.0 else magnitude * factor
    if window is not None:
        centre, tolerance = sign * window[0], window[1]  # the window on the magnitude's scale
        if abs(new - centre) <= tolerance:  # just past the window, by the nearest way out
            high = centre + tolerance
            ways = [1.2 * high, high + (1.0 - high) / 2, (centre - tolerance) / 1.2]
            ways = [w for w in ways if w > 0 and abs(w - centre) > tolerance]
            if magnitude < 1.0:  # a proportion stays one when it can
                ways = [w for w in ways if w < 1.0] or ways
            new = min(ways, key=lambda w: abs(math.log(w / magnitude)))
    return new


def _altered(
    text: str,
    factor: float,
    stated: frozenset[str] = frozenset(),
    checked: dict[int, Window] | None = None,
) -> str:
    """Every reported result moved out of tolerance, printed as precisely as before;
    method constants (`_constant`) and zeros kept."""

    def one(match: Any) -> str:
        run = str(match.group(0))
        token = run.rstrip(".")  # a full stop after a number ends the sentence
        dots = run[len(token) :]
        if not _NUMBER.fullmatch(token):
            return run
        start = match.start()
        if _constant(text, start, start + len(token), token, stated):
            return run
        value = float(token)
        if value == 0.0:
            return run
        negative = text[start - 1 : start] == "-"
        window = (checked or {}).get(start)
        new = _moved(value, -1.0 if negative else 1.0, factor, window)
        if not math.isfinite(new):
            return run
        if "e" in token.lower():
            return f"{new:.3e}" + dots
        decimals = len(token.split(".", 1)[1]) if "." in token else 0
        shown = f"{new:.{decimals}f}" if decimals else str(round(new))
        # As precise as before, unless that prints the old value or rounds it to 0.
        while (shown == token or float(shown) == 0.0) and decimals < 12:
            decimals += 1
            shown = f"{new:.{decimals}f}"
        return shown + dots

    return str(_RUN.sub(one, text))


def _altered_file(
    task: Task, path: str, data: bytes, factor: float, stated: frozenset[str]
) -> bytes:
    if not _text(path, data):
        return data
    text = data.decode("utf-8")
    return _altered(text, factor, stated, _checked(task, path, text)).encode()


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
        factor, stated = RESULT_FACTOR, _stated(task)
        out = {p: _altered_file(task, p, d, factor, stated) for p, d in files.items()}
        altered = ControlFolder(out, _altered(message, factor, stated))
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
