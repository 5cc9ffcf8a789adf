"""Loading tasks from folders, JSONL and ASI-Bench JSON, with hostile input refused."""

from ._controls import (
    CONTROL_FOLDERS,
    MESSAGE_FILE,
    ControlAnswer,
    ControlFolder,
    control_answers,
    read_control_folder,
    utf8_text,
)
from ._draft import AttachmentSource, TaskDraft, build_task, check_attachment, check_task
from ._loaders import load_asi_task, load_jsonl, load_task_dir, load_tasks
from ._patterns import PatternError, TaskPattern, compile_pattern
from ._style import answer_opening, answer_substance, restyled

__all__ = [
    "CONTROL_FOLDERS",
    "MESSAGE_FILE",
    "AttachmentSource",
    "ControlAnswer",
    "ControlFolder",
    "PatternError",
    "TaskDraft",
    "TaskPattern",
    "answer_opening",
    "answer_substance",
    "build_task",
    "check_attachment",
    "check_task",
    "compile_pattern",
    "control_answers",
    "load_asi_task",
    "load_jsonl",
    "load_task_dir",
    "load_tasks",
    "read_control_folder",
    "restyled",
    "utf8_text",
]
