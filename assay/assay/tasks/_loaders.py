"""Task loaders: a folder per task, JSONL, and ASI-Bench-style JSON.

No link is followed inside a task: the prompt, the task file and every attachment pass
`check_task_file` (no symbolic link at the file or a folder above it, no hard link), and a
linked task folder or task file inside a folder of tasks is refused. Only the path the
submitter names on the command line may itself be a link.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from assay_schemas import TaskInputError, read_structured_file, safe_token

from ._asi import is_asi_task, load_asi_task
from ._controls import CONTROL_FOLDERS, MESSAGE_FILE
from ._draft import (
    LINKS_REFUSED,
    AttachmentSource,
    TaskDraft,
    check_attachment,
    check_task_file,
    check_unique,
)

__all__ = ["load_asi_task", "load_jsonl", "load_task_dir", "load_tasks"]

PROMPT_FILES = ("prompt.md", "prompt.txt", "PROMPT.md")
META_FILES = ("task.yaml", "task.yml", "task.toml", "task.json")


def _present(folder: Path, names: tuple[str, ...], what: str) -> Path | None:
    """The one file of ``names`` in the folder (a dangling link is found, then refused);
    two of them is an ambiguity no user could guess the answer to, so it is refused."""
    found = [folder / n for n in names if os.path.lexists(folder / n)]
    if len(found) > 1:
        both = " and ".join(p.name for p in found)
        raise TaskInputError(f"task folder {folder.name}: {both} are each a {what}; keep one")
    return found[0] if found else None


def _read_meta(folder: Path) -> dict[str, Any]:
    path = _present(folder, META_FILES, "task file")
    if path is not None:
        name = path.name
        check_task_file(f"task {folder.name}:", name, path, folder)
        data = read_structured_file(path, what=f"task folder {folder.name}:", error=TaskInputError)
        if not isinstance(data, dict):
            raise TaskInputError(f"task folder {folder.name}: {name} must be a mapping")
        return data
    return {}


def _control_folders(folder: Path) -> set[str]:
    """``reference/`` and ``controls/`` when they hold control answers (a ``message.md``);
    a task whose data lives in a folder of that name keeps it as attachments."""
    found = set()
    for name in CONTROL_FOLDERS:
        sub = folder / name
        if sub.is_symlink() or not sub.is_dir():
            continue
        answers = [sub] if name == "reference" else [c for c in sub.iterdir() if c.is_dir()]
        if any(os.path.lexists(a / MESSAGE_FILE) for a in answers):
            found.add(name)
    return found


def load_task_dir(folder: Path, *, max_bytes: int) -> TaskDraft:
    """A folder holding a prompt file, optional task.yaml/toml, and attachments."""
    meta = _read_meta(folder)
    task_id = str(meta.get("task_id") or safe_token(folder.name))
    prompt_file = _present(folder, PROMPT_FILES, "prompt")
    prompt = meta.get("prompt")
    if prompt_file is not None and prompt is not None:
        meta_file = _present(folder, META_FILES, "task file")
        raise TaskInputError(
            f"task {task_id}: the prompt is given twice, in {prompt_file.name} and as prompt: "
            f"in {meta_file.name if meta_file else 'the task file'}; keep one"
        )
    if prompt_file is not None:
        check_task_file(f"task {task_id}:", prompt_file.name, prompt_file, folder)
        prompt = prompt_file.read_text(encoding="utf-8")
    if prompt is not None and not isinstance(prompt, str):
        raise TaskInputError(
            f"task {task_id}: prompt: expected text, got {type(prompt).__name__} {prompt!r:.40}"
        )
    if not prompt:
        raise TaskInputError(f"task {task_id}: prompt: no {'/'.join(PROMPT_FILES)} in {folder}")
    skip = {*PROMPT_FILES, *META_FILES}
    controls = _control_folders(folder)
    attachments: list[AttachmentSource] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if rel in skip or (path.is_dir() and not path.is_symlink()):
            continue
        if rel.split("/", 1)[0] in controls:  # answers of judges' controls, not inputs
            continue
        attachments.append(
            check_attachment(task_id, "attachments", rel, path, max_bytes, root=folder)
        )
    fields = {k: v for k, v in meta.items() if k not in {"attachments", "prompt"}}
    fields.update(task_id=task_id, prompt=prompt.strip(), source=f"folder:{folder.name}")
    return TaskDraft(fields, check_unique(task_id, attachments), folder=folder)


def _from_record(record: dict[str, Any], base: Path, *, source: str, max_bytes: int) -> TaskDraft:
    task_id = str(record.get("task_id") or "")
    if not task_id:
        raise TaskInputError(f"{source}: task_id is missing")
    raw = record.get("attachments", [])
    if not isinstance(raw, list):
        raise TaskInputError(f"task {task_id}: attachments must be a list of paths")
    attachments = []
    for i, item in enumerate(raw):
        path = item.get("path") if isinstance(item, dict) else item
        if not isinstance(path, str):
            raise TaskInputError(f"task {task_id}: attachments[{i}]: expected a path string")
        attachments.append(
            check_attachment(task_id, f"attachments[{i}]", path, base / path, max_bytes, root=base)
        )
    fields = {k: v for k, v in record.items() if k != "attachments"}
    fields.setdefault("source", source)
    return TaskDraft(fields, check_unique(task_id, attachments))


def load_jsonl(path: Path, *, max_bytes: int) -> list[TaskDraft]:
    """One task per line; attachment paths are relative to the file's folder."""
    drafts = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise TaskInputError(f"{path.name} line {n}: not valid JSON: {e}") from e
        if not isinstance(record, dict):
            raise TaskInputError(f"{path.name} line {n}: expected a JSON object")
        drafts.append(
            _from_record(record, path.parent, source=f"jsonl:{path.name}:{n}", max_bytes=max_bytes)
        )
    return drafts


def _has_prompt(folder: Path) -> bool:
    return any(os.path.lexists(folder / n) for n in PROMPT_FILES)


def _has_meta(folder: Path) -> bool:
    return any(os.path.lexists(folder / n) for n in META_FILES)


def _is_asi_file(path: Path) -> bool:
    try:
        return is_asi_task(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def _load_folder(folder: Path, *, max_bytes: int) -> TaskDraft:
    """A task folder, or an ASI-Bench `task.json` beside its resources."""
    asi = folder / "task.json"
    if os.path.lexists(asi) and not _has_prompt(folder):
        check_task_file(f"task {folder.name}:", asi.name, asi, folder)
        if _is_asi_file(asi):
            return load_asi_task(asi, max_bytes=max_bytes)
    return load_task_dir(folder, max_bytes=max_bytes)


def load_tasks(path: Path, *, max_bytes: int) -> list[TaskDraft]:
    """Load tasks from a task folder, a folder of task folders/JSON files, a JSONL or a JSON file."""
    if path.is_file():
        if path.suffix == ".jsonl":
            return load_jsonl(path, max_bytes=max_bytes)
        if path.suffix == ".json":
            return [load_asi_task(path, max_bytes=max_bytes)]
        raise TaskInputError(f"{path}: expected a folder, .jsonl or .json task file")
    if not path.is_dir():
        raise TaskInputError(f"{path}: no such task file or folder")
    if _has_prompt(path) or _has_meta(path):
        return [_load_folder(path, max_bytes=max_bytes)]
    files = [c for c in sorted(path.iterdir()) if c.suffix in {".json", ".jsonl"} and c.is_file()]
    drafts: list[TaskDraft] = []
    for child in sorted(path.iterdir()):
        if child.is_symlink() and (child.is_dir() or child.suffix in {".json", ".jsonl"}):
            raise TaskInputError(f"{path}: {child.name} is a symbolic link; {LINKS_REFUSED}")
        if child.is_dir() and not child.is_symlink():
            # Beside task JSON files, a folder without a prompt holds their resources.
            if files and not _has_prompt(child) and not _has_meta(child):
                continue
            drafts.append(_load_folder(child, max_bytes=max_bytes))
        elif child in files:
            drafts.extend(load_tasks(child, max_bytes=max_bytes))
    ids = [d.task_id for d in drafts]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskInputError(f"{path}: duplicate task ids {dupes}")
    return drafts
