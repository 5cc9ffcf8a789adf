"""A run's transcript for reading: each tool call drawn by its kind, model text as Markdown.

Python and shell calls become highlighted code, a written file the file under its name, a
read a collapsed excerpt, any other call its arguments pretty-printed. Arguments are
agent-written JSON: parsed only under `ARGUMENT_CHARS` and shown raw otherwise. All HTML
here comes from Pygments (which escapes its input) or from markdown-it with raw HTML off;
everything else is a plain string the template escapes. Outputs over `LONG_CHARS` or
`LONG_LINES` are collapsed behind their first lines, the full blob one click away.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import BashLexer, PythonLexer, TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from assay_schemas import AgentStepLogged, ToolCallRecord, ToolResultRecord

from .previews import markdown

__all__ = ["CallView", "StepView", "transcript"]

ARGUMENT_CHARS = 1_000_000
CODE_CHARS = 200_000
"""Code past this is shown as plain text (highlighting is linear, but pages stay small)."""
MODEL_CHARS = 200_000
LONG_CHARS = 2_000
LONG_LINES = 30
HEAD_LINES = 8


class ResultView(NamedTuple):
    """A tool result: its record, and whether the output is long enough to collapse."""

    record: ToolResultRecord
    long: bool
    head: str
    """The first lines of a long output (the summary of its collapsed box)."""


class CallView(NamedTuple):
    """A tool call as drawn: kind is code, file, read or args."""

    name: str
    kind: str
    path: str
    """The file a write or read names ('' otherwise)."""
    html: Markup
    """Highlighted code or file content ('' when shown as `text`)."""
    text: str
    results: list[ResultView]


class StepView(NamedTuple):
    """One agent step: its model text as Markdown, its calls, and what it cost."""

    step: int
    model_html: Markup
    model_cut: bool
    calls: list[CallView]
    input_tokens: int
    output_tokens: int
    latency_ms: float
    cost_usd: float


_FORMATTER = HtmlFormatter()
"""One formatter for every call: building one builds its style sheet, most of the cost."""
_PYTHON, _SHELL = PythonLexer(stripnl=False), BashLexer(stripnl=False)


def _code(text: str, lexer: Lexer) -> Markup:
    if len(text) > CODE_CHARS:
        lexer = TextLexer()
    return Markup(highlight(text, lexer, _FORMATTER))


def _arguments(raw: str) -> dict[str, Any] | None:
    if len(raw) > ARGUMENT_CHARS:
        return None
    try:
        got = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return got if isinstance(got, dict) else None


def _text(args: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def _file_lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False)
    except ClassNotFound:
        return TextLexer()


def _call(call: ToolCallRecord, results: list[ResultView]) -> CallView:
    args = _arguments(call.arguments)
    name = call.name
    if args is not None:
        path = _text(args, "path", "file", "filename") or ""
        code = _text(args, "code")
        command = _text(args, "command", "cmd")
        content = _text(args, "content")
        if code is not None and name != "bash":
            return CallView(name, "code", "", _code(code, _PYTHON), "", results)
        if command is not None:
            return CallView(name, "code", "", _code(command, _SHELL), "", results)
        if content is not None and path:
            return CallView(name, "file", path, _code(content, _file_lexer(path)), "", results)
        if name.startswith("read") and path:
            return CallView(name, "read", path, Markup(""), "", results)
        shown = json.dumps(args, indent=2, ensure_ascii=False)
        return CallView(name, "args", path, Markup(""), shown, results)
    return CallView(name, "args", "", Markup(""), call.arguments, results)


def _result(r: ToolResultRecord) -> ResultView:
    lines = r.output.count("\n") + 1
    long = len(r.output) > LONG_CHARS or lines > LONG_LINES
    head = "\n".join(r.output[:LONG_CHARS].splitlines()[:HEAD_LINES]) if long else ""
    return ResultView(r, long, head)


def transcript(steps: list[AgentStepLogged]) -> list[StepView]:
    """The run's steps in order, each call with its results, drawn for reading."""
    out: list[StepView] = []
    for s in steps:
        calls = [
            _call(c, [_result(r) for r in s.tool_results if r.call_id == c.call_id])
            for c in s.tool_calls
        ]
        text = s.model_output[:MODEL_CHARS]
        out.append(
            StepView(
                step=s.step,
                model_html=markdown(text) if text else Markup(""),
                model_cut=len(s.model_output) > MODEL_CHARS,
                calls=calls,
                input_tokens=s.usage.input_tokens,
                output_tokens=s.usage.output_tokens,
                latency_ms=s.latency_ms,
                cost_usd=s.cost_usd,
            )
        )
    return out
