"""A task as loaded from disk, before its attachments are in the blob store."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from pydantic import ValidationError

from assay.store import BlobStore, store_file
from assay_schemas import NumberNearCheck, Task, TaskInputError, describe_validation

from ._patterns import PatternError, compile_pattern

__all__ = [
    "LINKS_REFUSED",
    "AttachmentSource",
    "TaskDraft",
    "build_task",
    "check_attachment",
    "check_patterns",
    "check_task",
    "check_task_file",
    "check_unique",
]


class AttachmentSource(NamedTuple):
    """An attachment: where it will sit in /workspace, and where it is on this host."""

    path: str
    source: Path


class TaskDraft(NamedTuple):
    """Validated task fields plus the files to upload."""

    fields: dict[str, Any]
    attachments: list[AttachmentSource]
    warnings: tuple[str, ...] = ()
    """What the source asked for that Assay does not do (logged at load, shown at submit)."""
    folder: Path | None = None
    """The task folder it was read from (where its reference and controls are), if any."""

    @property
    def task_id(self) -> str:
        """The task's id."""
        return str(self.fields["task_id"])

    def to_task(self, store: BlobStore) -> Task:
        """Upload the attachments and return the task with their blob refs."""
        refs = [store_file(store, a.source, a.path) for a in self.attachments]
        return build_task(self.fields, refs)


def build_task(fields: dict[str, Any], attachments: list[Any]) -> Task:
    """Validate task fields; errors name the task and field."""
    task_id = fields.get("task_id", "?")
    try:
        task = Task.model_validate({**fields, "attachments": attachments})
    except ValidationError as e:
        raise TaskInputError(f"task {task_id}: {describe_validation(e)}") from e
    check_patterns(task)
    return task


def check_patterns(task: Task) -> None:
    """Compile every reference check's pattern with RE2 now, as the judge will, so a bad one
    fails the submit (naming task and check) instead of the judge later."""
    for i, check in enumerate(task.reference_checks):
        pattern = getattr(check, "pattern", None)
        if pattern is None:
            continue
        where = f"task {task.task_id}: reference_checks[{i}] ({check.name!r}): pattern"
        try:
            regex = compile_pattern(pattern)
        except PatternError as e:
            raise TaskInputError(f"{where} {pattern!r} is {e}") from e
        if isinstance(check, NumberNearCheck) and regex.groups < 1:
            raise TaskInputError(f"{where} {pattern!r} needs a group capturing the number")


def check_task(task: Task, *, max_bytes: int | None = None) -> None:
    """Every check `assay submit` makes on a task, for a task that arrives built (a
    publisher's TaskSubmitted): patterns RE2 can run, attachment paths inside /workspace,
    no two names that differ only in case, and (given `max_bytes`) no attachment over it.
    Raises TaskInputError naming the task and field."""
    check_patterns(task)
    seen: dict[str, str] = {}
    for i, ref in enumerate(task.attachments):
        field = f"attachments[{i}]"
        if check_workspace_path(task.task_id, field, ref.path) != ref.path:
            raise TaskInputError(
                f"task {task.task_id}: {field}: path {ref.path!r} is not in normal form"
            )
        if max_bytes is not None and ref.size > max_bytes:
            raise TaskInputError(
                f"task {task.task_id}: {field}: attachment {ref.path!r} is {ref.size} bytes, "
                f"over the limit of {max_bytes}"
            )
        key = ref.path.lower()
        if key in seen:
            raise TaskInputError(
                f"task {task.task_id}: attachments: duplicate name {ref.path!r} (also {seen[key]!r})"
            )
        seen[key] = ref.path


def check_workspace_path(task_id: str, field: str, path: str) -> str:
    """A relative, normalized POSIX path that cannot leave /workspace."""
    if not path or "\x00" in path:
        raise TaskInputError(f"task {task_id}: {field}: empty or NUL in path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        raise TaskInputError(f"task {task_id}: {field}: absolute path {path!r} is not allowed")
    if ".." in pure.parts:
        raise TaskInputError(f"task {task_id}: {field}: path {path!r} escapes the task with '..'")
    return str(pure)


LINKS_REFUSED = "links are not allowed in a task; copy the file into the task folder"


def check_task_file(where: str, name: str, source: Path, root: Path) -> os.stat_result:
    """The one rule for every file a task is read from (prompt, task file, attachment): a
    regular file with one name, no symbolic link at it or at any folder between `root` and
    it, and resolving under `root`. `where` starts the error ("task t1: attachments[0]:"),
    `name` names the file in it."""
    try:
        parts = source.relative_to(root).parts
    except ValueError as e:
        raise TaskInputError(f"{where} {name} is outside the task folder {root}") from e
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            rel = folder.relative_to(root).as_posix()
            raise TaskInputError(
                f"{where} {name}: folder {rel!r} is a symbolic link; {LINKS_REFUSED}"
            )
    try:
        st = os.lstat(source)
    except FileNotFoundError as e:
        raise TaskInputError(f"{where} {name} not found at {source}") from e
    if stat.S_ISLNK(st.st_mode):
        raise TaskInputError(f"{where} {name} is a symbolic link; {LINKS_REFUSED}")
    if not Path(os.path.realpath(source)).is_relative_to(os.path.realpath(root)):
        raise TaskInputError(
            f"{where} {name} resolves outside the task folder (a linked parent directory?); "
            + LINKS_REFUSED
        )
    if not stat.S_ISREG(st.st_mode):
        raise TaskInputError(f"{where} {name} is not a regular file")
    if st.st_nlink > 1:
        # A second name may sit anywhere on the filesystem: a host file, hard-linked in.
        raise TaskInputError(
            f"{where} {name} is a hard link (the file has {st.st_nlink} names); {LINKS_REFUSED}"
        )
    return st


def check_attachment(
    task_id: str, field: str, workspace_path: str, source: Path, max_bytes: int, root: Path
) -> AttachmentSource:
    """Validate one attachment file on the host (`check_task_file`), and not too big."""
    rel = check_workspace_path(task_id, field, workspace_path)
    st = check_task_file(f"task {task_id}: {field}:", f"attachment {rel!r}", source, root)
    if st.st_size > max_bytes:
        raise TaskInputError(
            f"task {task_id}: {field}: attachment {rel!r} is {st.st_size} bytes, over the limit of {max_bytes}"
        )
    return AttachmentSource(rel, source)


def check_unique(task_id: str, attachments: list[AttachmentSource]) -> list[AttachmentSource]:
    """Reject two attachments with the same workspace name (case-insensitive, like many filesystems)."""
    seen: dict[str, str] = {}
    for a in attachments:
        key = a.path.lower()
        if key in seen:
            raise TaskInputError(
                f"task {task_id}: attachments: duplicate name {a.path!r} (also {seen[key]!r})"
            )
        seen[key] = a.path
    return attachments
