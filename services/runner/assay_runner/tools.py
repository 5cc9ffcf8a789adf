"""The agent's tools: run code and touch files in its sandbox, the web, and submit."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import JsonValue

from assay.providers import ToolCall, ToolDefinition
from assay.sandbox_client import SandboxClient, SandboxGone
from assay.store import BlobStore
from assay_schemas import (
    FileRef,
    InvalidInput,
    Limits,
    SandboxError,
    ToolResultRecord,
    WebSource,
    unb64,
)

from .web import WebProvider

__all__ = ["TOOLS", "ToolBox", "ToolOutcome"]


def _tool(name: str, description: str, *arguments: str) -> ToolDefinition:
    """A tool whose arguments are all required strings (every agent tool is)."""
    properties: dict[str, JsonValue] = {a: {"type": "string"} for a in arguments}
    return ToolDefinition(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": list(arguments)},
    )


_TOOL_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "bash": ("command",),
    "python": ("code",),
    "python_reset": (),
    "read_file": ("path",),
    "write_file": ("path", "content"),
    "list_files": (),
    "web_search": ("query",),
    "web_fetch": ("url",),
    "submit": ("answer",),
}
_DESCRIPTIONS = {
    "bash": "Run a shell command in /workspace (no network). Returns exit code, stdout and stderr.",
    "python": "Run Python 3 code in /workspace in a persistent session: variables, imports and loaded data stay between calls; a last bare expression is printed; open matplotlib figures are saved under figures/ (numpy, pandas, scipy, statsmodels, scikit-learn, matplotlib available).",
    "python_reset": "Restart the Python session: every variable, import and loaded dataset is cleared.",
    "read_file": "Read a text file under /workspace.",
    "write_file": "Write a text file under /workspace (parent folders are created).",
    "list_files": "List every file under /workspace with its size.",
    "web_search": "Search the web: a numbered list of results (title, URL, snippet).",
    "web_fetch": "Fetch a web page (http/https) as readable text; HTML as Markdown, PDFs as page text.",
    "submit": "Finish: submit your final answer to the scientist. Call once, at the end.",
}
TOOLS: list[ToolDefinition] = [
    _tool(name, _DESCRIPTIONS[name], *arguments) for name, arguments in _TOOL_ARGUMENTS.items()
]
_REQUIRED = {name: list(arguments) for name, arguments in _TOOL_ARGUMENTS.items()}


class ToolOutcome(NamedTuple):
    """A tool call's logged result, and the answer if it was `submit`."""

    record: ToolResultRecord
    submitted: str | None = None


class ToolArgumentError(InvalidInput):
    """The model called a tool with arguments that do not fit it."""


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        args = call.parsed_arguments()
    except (ValueError, json.JSONDecodeError) as e:
        raise ToolArgumentError(f"arguments are not a JSON object: {e}") from e
    if call.name not in _REQUIRED:
        raise ToolArgumentError(f"unknown tool {call.name!r}; available: {', '.join(_REQUIRED)}")
    missing = [k for k in _REQUIRED[call.name] if not isinstance(args.get(k), str)]
    if missing:
        raise ToolArgumentError(f"{call.name} needs string argument(s) {missing}")
    return args


def _format_exec(
    exit_code: int, stdout: bytes, stderr: bytes, timed_out: bool, limit: str | None
) -> str:
    parts = [f"exit code: {exit_code}"]
    if timed_out:
        parts.append("(killed: timeout)")
    elif limit:
        parts.append(f"(stopped by the {limit} limit)")
    out = stdout.decode("utf-8", "replace")
    err = stderr.decode("utf-8", "replace")
    return "\n".join([" ".join(parts), "--- stdout ---", out, "--- stderr ---", err])


def _restart_notice(why: str, had_state: bool) -> str:
    """What the agent must know when its cell ran in a fresh kernel it did not ask for."""
    if not why or (why == "new" and not had_state):
        return ""
    cause = {
        "timeout": "the previous cell hit its timeout and the kernel was killed",
        "crashed": "the kernel crashed",
        "killed": "the kernel was killed (a command's timeout or a resource limit)",
    }.get(why, "the run was interrupted and resumed")
    return (
        f"[note: the Python session was restarted: {cause}. Variables, imports and data "
        "from earlier python calls are gone; files in /workspace remain.]\n"
    )


@dataclass(kw_only=True)
class ToolBox:
    """Executes tool calls for one run."""

    sandbox: SandboxClient
    web: WebProvider
    store: BlobStore
    limits: Limits
    exec_timeout_s: float | None = None
    """The sandbox's own command timeout: a tool's command never runs longer than it, nor
    longer than the run's `tool_timeout_s`."""
    resumed_python: bool = False
    """The run's logged steps already used python: the kernel this ToolBox finds (if any)
    may hold state the log does not explain, so it starts a fresh one and says so."""
    _kernel_id: str | None = field(default=None, init=False)

    async def run(self, call: ToolCall) -> ToolOutcome:
        """Run one call; bad arguments and tool failures go back to the model as errors."""
        started = time.perf_counter()
        exit_code: int | None = None
        submitted: str | None = None
        sources: list[WebSource] = []
        try:
            args = _arguments(call)
            if call.name == "submit":
                submitted = str(args["answer"])
                text, is_error = "answer submitted", False
            elif call.name in ("web_search", "web_fetch"):
                answer = await (
                    self.web.search(args["query"])
                    if call.name == "web_search"
                    else self.web.fetch(args["url"])
                )
                text, sources, is_error = answer.text, list(answer.sources), False
            else:
                text, exit_code = await self._dispatch(call.name, args)
                is_error = False
        except ToolArgumentError as e:
            text, is_error = f"error: {e}", True
        except SandboxError as e:
            if isinstance(e, SandboxGone):
                raise
            text, is_error = f"error: {e}", True
        shown, blob = await self._cap(text)
        record = ToolResultRecord(
            call_id=call.id,
            name=call.name,
            output=shown,
            is_error=is_error,
            truncated=blob is not None,
            output_blob=blob,
            exit_code=exit_code,
            duration_ms=(time.perf_counter() - started) * 1000,
            sources=sources,
        )
        return ToolOutcome(record, submitted)

    @property
    def command_timeout_s(self) -> float:
        """How long one bash command or Python cell may run."""
        timeout = self.limits.tool_timeout_s
        return timeout if self.exec_timeout_s is None else min(timeout, self.exec_timeout_s)

    async def _dispatch(self, name: str, args: dict[str, Any]) -> tuple[str, int | None]:
        timeout = self.command_timeout_s
        if name == "bash":
            r = await self.sandbox.exec(args["command"], timeout_s=timeout, cwd="/workspace")
            return _format_exec(
                r.exit_code, unb64(r.stdout_b64), unb64(r.stderr_b64), r.timed_out, r.limit
            ), r.exit_code
        if name in ("python", "python_reset"):
            return await self._python(args.get("code", ""), reset=name == "python_reset")
        if name == "read_file":
            data = await self.sandbox.read_file(args["path"])
            if b"\x00" in data[:8192]:
                return (
                    f"{args['path']} is a binary file ({len(data)} bytes); use python to inspect it",
                    None,
                )
            return data.decode("utf-8", "replace"), None
        if name == "write_file":
            data = args["content"].encode()
            await self.sandbox.write_file(args["path"], data)
            return f"wrote {len(data)} bytes to {args['path']}", None
        if name == "list_files":
            files = await self.sandbox.list_files()
            return "\n".join(
                f"{f.kind:<7} {f.size:>10}  {f.path}" for f in files
            ) or "(empty)", None
        raise ToolArgumentError(f"unknown tool {name!r}")

    async def _python(self, code: str, *, reset: bool) -> tuple[str, int | None]:
        known = self._kernel_id
        p = await self.sandbox.python(
            code, timeout_s=self.command_timeout_s, kernel_id=known, reset=reset
        )
        self._kernel_id = p.kernel_id or None
        if reset:
            return "Python session reset: every variable and import is cleared.", None
        text = _format_exec(
            p.exit_code, unb64(p.stdout_b64), unb64(p.stderr_b64), p.timed_out, p.limit
        )
        if p.figures:
            text += "\n--- figures saved ---\n" + "\n".join(p.figures)
        notice = _restart_notice(p.restarted, known is not None or self.resumed_python)
        return notice + text, p.exit_code

    async def _cap(self, text: str) -> tuple[str, FileRef | None]:
        """Truncate for the model with a marker; keep the whole output as a blob."""
        cap = self.limits.tool_output_chars
        if len(text) <= cap:
            return text, None
        data = text.encode()
        info = await asyncio.to_thread(self.store.put_bytes, data)
        ref = FileRef(
            path="tool-output.txt", sha256=info.sha256, size=info.size, media_type="text/plain"
        )
        marker = f"\n[... truncated: {len(text) - cap} of {len(text)} characters not shown; full output kept as blob {info.sha256[:12]} ...]"
        return text[:cap] + marker, ref
