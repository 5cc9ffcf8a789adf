"""The control agent: carries out a stored control plan through the agent's own tools.

No model is called, but the run reads like an agent's (issue #47): it writes the plan's
code with ``write_file``, runs its commands with ``bash`` in the sandbox, checks what they
left (``sha256sum``), writes only the outputs the commands did not make as planned (text
with ``write_file``, other bytes with ``bash`` in base64 chunks), removes what the plan
says must be absent, and submits the plan's message. Each step takes the plan's think
time and reports the token counts a model would (about four characters a token, as the
scripted model server estimates them). Every choice is read from the conversation (the
turn number, the check's output), so a resumed run goes on where its logged steps end,
like any model run.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import random
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from assay.providers import (
    AssistantMessage,
    Completion,
    GenerationParams,
    Message,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
)
from assay.store import BlobStore
from assay_schemas import CONTROL_CHUNK_BYTES, ControlFile, ControlPlan, ProviderError, Usage

__all__ = ["ControlProvider", "control_call"]

_HEREDOC = "EOF"
_HASHED = re.compile(r"^([0-9a-f]{64})\s+\*?(.+)$", re.MULTILINE)
_CHECK = "ls -la {folders}; sha256sum -- {paths} 2>/dev/null; true"


def _call(turn: int, name: str, arguments: dict[str, str]) -> ToolCall:
    return ToolCall(id=f"call_{turn}", name=name, arguments=json.dumps(arguments))


def control_call(turn: int, path: str, data: bytes, *, text: bool, append: bool) -> ToolCall:
    """The tool call that writes one file of a plan (or, for bytes, one chunk of it)."""
    if text:
        return _call(turn, "write_file", {"path": path, "content": data.decode("utf-8")})
    folder = str(PurePosixPath(path).parent)
    encoded = base64.b64encode(data).decode()
    into = ">>" if append else ">"
    command = (
        f"mkdir -p {shlex.quote(folder)} && base64 -d {into} {shlex.quote(path)} "
        f"<<'{_HEREDOC}'\n{encoded}\n{_HEREDOC}"
    )
    return _call(turn, "bash", {"command": command})


def _check_command(files: Sequence[ControlFile]) -> str:
    folders = sorted({str(PurePosixPath(f.path).parent) for f in files})
    return _CHECK.format(
        folders=" ".join(shlex.quote(d) for d in folders),
        paths=" ".join(shlex.quote(f.path) for f in files),
    )


def _result_text(messages: Sequence[Message], call_id: str) -> str | None:
    for m in messages:
        if isinstance(m, ToolResultMessage) and m.call_id == call_id:
            return "".join(p.text for p in m.content if isinstance(p, TextPart))
    return None


def _chars(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> int:
    """The size of the request a model would be sent (messages and tool schemas)."""
    return sum(len(m.model_dump_json()) for m in messages) + sum(
        len(t.model_dump_json()) for t in tools
    )


@dataclass(frozen=True)
class _Write:
    file: ControlFile
    offset: int
    size: int


@dataclass(kw_only=True)
class ControlProvider:
    """A ModelProvider that plays a control plan (see the module docstring)."""

    plan_sha256: str
    store: BlobStore
    model_name: str = "control"
    """The model name the run's request names (reported back like any endpoint's)."""
    _plan: ControlPlan | None = field(default=None, init=False)

    @property
    def kind(self) -> str:
        """The API family: none."""
        return "control"

    @property
    def model(self) -> str:
        """The model name of the run's request."""
        return self.model_name

    async def _load(self) -> ControlPlan:
        if self._plan is None:
            try:
                data = await asyncio.to_thread(self.store.get_bytes, self.plan_sha256)
                self._plan = ControlPlan.model_validate_json(data)
            except Exception as e:  # a lost or bad plan: the platform's failure, not a verdict
                raise ProviderError(
                    f"control plan {self.plan_sha256[:12]}: {e}",
                    provider="control",
                    model=self.model_name,
                ) from e
        return self._plan

    async def _bytes(self, ref: ControlFile) -> bytes:
        return await asyncio.to_thread(self.store.get_bytes, ref.sha256)

    def _writes(self, plan: ControlPlan, made: dict[str, str] | None) -> list[_Write]:
        """The outputs still to write: every one when nothing ran (`made` None), else
        those the commands did not make: text not as planned (its numbers are the
        answer), bytes not at all (a figure the code drew is the code's figure, whatever
        the plotting library's bytes)."""
        out = []
        for f in plan.files:
            if made is not None and f.path in made and (made[f.path] == f.sha256 or not f.text):
                continue
            if f.text or f.size == 0:
                out.append(_Write(f, 0, f.size))
                continue
            for offset in range(0, f.size, CONTROL_CHUNK_BYTES):
                out.append(_Write(f, offset, min(CONTROL_CHUNK_BYTES, f.size - offset)))
        return out

    async def _next(self, plan: ControlPlan, messages: Sequence[Message], turn: int) -> ToolCall:
        step = turn
        if step < len(plan.code):
            ref = plan.code[step]
            return control_call(turn, ref.path, await self._bytes(ref), text=True, append=False)
        step -= len(plan.code)
        if step < len(plan.commands):
            return _call(turn, "bash", {"command": plan.commands[step]})
        step -= len(plan.commands)
        made: dict[str, str] | None = None
        if plan.commands and plan.files:
            check_turn = len(plan.code) + len(plan.commands)
            if step == 0:
                return _call(turn, "bash", {"command": _check_command(plan.files)})
            step -= 1
            said = _result_text(messages, f"call_{check_turn}") or ""
            made = {path.strip(): sha for sha, path in _HASHED.findall(said)}
        writes = self._writes(plan, made)
        if step < len(writes):
            w = writes[step]
            data = (await self._bytes(w.file))[w.offset : w.offset + w.size]
            return control_call(turn, w.file.path, data, text=w.file.text, append=w.offset > 0)
        step -= len(writes)
        if plan.absent and step == 0:
            paths = " ".join(shlex.quote(p) for p in plan.absent)
            return _call(turn, "bash", {"command": f"rm -f -- {paths}"})
        return _call(turn, "submit", {"answer": plan.message})

    @staticmethod
    def _say(plan: ControlPlan, turn: int) -> str | None:
        """What an agent's model says beside a call, as the agents do: a line when it
        writes its code and when it first runs it, nothing on the steps after."""
        if turn < len(plan.code):
            return "Writing the analysis script." if turn == 0 else "Writing the next script."
        if plan.commands and turn == len(plan.code):
            return "Running the analysis."
        return None

    async def _think(self, plan: ControlPlan, turn: int) -> None:
        """A model's time to answer: the plan's median, spread like real steps'."""
        if plan.step_ms <= 0:
            return
        seed = hashlib.sha256(f"{self.plan_sha256}:{turn}".encode()).digest()
        draw = random.Random(seed).lognormvariate(0.0, 0.5)
        await asyncio.sleep(plan.step_ms * draw / 1000)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The plan's next tool call."""
        plan = await self._load()
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        call = await self._next(plan, messages, turn)
        said = self._say(plan, turn)
        await self._think(plan, turn)
        written = len(said or "") + len(call.name) + len(call.arguments)
        usage = Usage(
            input_tokens=max(1, math.ceil(_chars(messages, tools) / 4)),
            output_tokens=max(1, math.ceil(written / 4)),
        )
        return Completion(
            provider="control",
            model=self.model_name,
            text=said,
            tool_calls=(call,),
            stop_reason="tool_use",
            finish_reason="tool_calls",
            usage=usage,
        )

    async def aclose(self) -> None:
        """Nothing to release."""
