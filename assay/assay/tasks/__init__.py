"""Loading tasks from folders, JSONL and ASI-Bench JSON, with hostile input refused."""

from ._draft import AttachmentSource, TaskDraft, build_task, check_attachment
from ._loaders import load_asi_task, load_jsonl, load_task_dir, load_tasks

__all__ = [
    "AttachmentSource",
    "TaskDraft",
    "build_task",
    "check_attachment",
    "load_asi_task",
    "load_jsonl",
    "load_task_dir",
    "load_tasks",
]
