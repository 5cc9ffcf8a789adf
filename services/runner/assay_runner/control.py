"""The control agent: carries out a stored control plan through the agent's own tools.

No model is called, but the run reads like an agent's (issue #47), and like the one
agent of the campaign it looks like most of all (its `like`): it writes the plan's code
with ``write_file``, runs its commands with ``bash`` in the sandbox (the last one also
removes what the plan says must be absent and lists and hashes the outputs), writes only
the outputs the commands did not make as planned (text with ``write_file``, other bytes
with ``bash`` in base64 chunks), and submits the plan's message.

How many steps that takes, how long each thinks, what it says beside its calls and the
token counts it reports are drawn from the turns, in this runner's :class:`AgentBook`, of
the campaign's runs that did the plan's kind of work (ran code or not, wrote files or not;
its look-alike's where it has such runs, else another agent's, see
:meth:`AgentBook.profile_for`): its work is packed into fewer steps (several calls in one) or preceded
by looks at the workspace (with the tool that agent looks with) to take as many steps as
one of that agent's runs. Before the book knows the agent, the plan's scripted estimate
holds (one look, then one call a step; its median think time; four characters a token).
What is done is read from the conversation (the calls made, the check's output), so a
resumed run goes on where its logged steps end, like any model run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
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
    UserMessage,
)
from assay.store import BlobStore
from assay_schemas import CONTROL_CHUNK_BYTES, ControlFile, ControlPlan, ProviderError, Usage

from .book import AgentBook, Profile, Work, request_chars, seeded, tokens

__all__ = ["ControlProvider", "control_call"]

_HEREDOC = "EOF"
_HASHED = re.compile(r"^([0-9a-f]{64})\s+\*?(.+)$", re.MULTILINE)
_ATTACHED = re.compile(r"^- /workspace/(\S+) \(", re.MULTILINE)
"""An attachment line of the runner's first user message (conversation.py)."""


@dataclass(frozen=True)
class _Act:
    """One tool call of the plan (or a look around), and the line said when it leads a step."""

    name: str
    arguments: str
    line: str | None = None


def _act(name: str, arguments: dict[str, str], line: str | None = None) -> _Act:
    return _Act(name, json.dumps(arguments), line)


def _write(path: str, data: bytes, *, text: bool, append: bool) -> _Act:
    if text:
        return _act("write_file", {"path": path, "content": data.decode("utf-8")})
    folder = str(PurePosixPath(path).parent)
    encoded = base64.b64encode(data).decode()
    into = ">>" if append else ">"
    command = (
        f"mkdir -p {shlex.quote(folder)} && base64 -d {into} {shlex.quote(path)} "
        f"<<'{_HEREDOC}'\n{encoded}\n{_HEREDOC}"
    )
    return _act("bash", {"command": command})


def control_call(turn: int, path: str, data: bytes, *, text: bool, append: bool) -> ToolCall:
    """The tool call that writes one file of a plan (or, for bytes, one chunk of it)."""
    act = _write(path, data, text=text, append=append)
    return ToolCall(id=f"call_{turn}_0", name=act.name, arguments=act.arguments)


def _last_command(plan: ControlPlan, command: str) -> str:
    """The plan's last command, then what an agent does after running its code: remove
    what must be absent, list the outputs and hash them (what the next steps read)."""
    out = command
    if plan.absent:
        out += "; rm -f -- " + " ".join(shlex.quote(p) for p in plan.absent)
    if plan.files:
        folders = sorted({str(PurePosixPath(f.path).parent) for f in plan.files})
        out += "; ls -R " + " ".join(shlex.quote(d) for d in folders) + " 2>/dev/null | head -50"
        paths = " ".join(shlex.quote(f.path) for f in plan.files)
        out += f"; sha256sum -- {paths} 2>/dev/null; true"
    return out


def _result_text(messages: Sequence[Message], call_id: str) -> str | None:
    for m in messages:
        if isinstance(m, ToolResultMessage) and m.call_id == call_id:
            return "".join(p.text for p in m.content if isinstance(p, TextPart))
    return None


def _calls(messages: Sequence[Message]) -> list[ToolCall]:
    return [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def _attachments(messages: Sequence[Message]) -> list[str]:
    for m in messages:
        if isinstance(m, UserMessage):
            text = "".join(p.text for p in m.content if isinstance(p, TextPart))
            if found := _ATTACHED.findall(text):
                return found
    return []


def _look(tool: str | None, attachment: str | None) -> _Act:
    """A look at the workspace, as the look-alike agent looks (default: list and head)."""
    line = "Let me look at the data first."
    if attachment is None or tool == "list_files":
        return _act("list_files", {}, line)
    if tool == "read_file":
        return _act("read_file", {"path": attachment}, line)
    # The listing the demo's careful agent makes (testing/assay_testing/demo/_agents.py).
    command = f"ls -l --time-style=+ && head -n 8 {shlex.quote(attachment)}"
    return _act("bash", {"command": command}, line)


STEP_CHARS = 320_000
"""Most characters of calls packed into one step beyond its first call: a step is one
event (at most 1 MiB, JSON-escaped), and a file's chunk is some 80,000 characters."""


def _share(rest: Sequence[_Act], steps: int) -> list[_Act]:
    """This step's share of `rest` spread evenly over `steps` steps (all when none left),
    no more than one event carries."""
    out: list[_Act] = []
    size = 0
    for act in rest[: math.ceil(len(rest) / max(1, steps))]:
        size += len(act.arguments)
        if out and size > STEP_CHARS:
            break
        out.append(act)
    return out


def _work(plan: ControlPlan) -> Work:
    """The kind of work the plan does, as an agent's transcript would show it."""
    return Work(ran=bool(plan.commands), wrote=bool(plan.code or plan.files))


@dataclass(kw_only=True)
class ControlProvider:
    """A ModelProvider that plays a control plan (see the module docstring)."""

    plan_sha256: str
    store: BlobStore
    model_name: str = "control"
    """The model name the run's request names (reported back like any endpoint's)."""
    book: AgentBook | None = None
    """Where the campaign's agents' turns are counted (None: the scripted estimate)."""
    campaign_id: str = ""
    like: str | None = None
    """The campaign agent the control looks like (whose turns it imitates)."""
    run_id: str = ""
    max_steps: int | None = None
    """The most steps the run may take (default: the plan's most)."""
    _plan: ControlPlan | None = field(default=None, init=False)
    _blobs: dict[str, bytes] = field(default_factory=dict, init=False)
    _profile: Profile | None = field(default=None, init=False)
    _steps: int | None = field(default=None, init=False)
    """The steps this run takes, drawn from the look-alike's runs once it has answered
    one (None until then: the estimate)."""

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
        if ref.sha256 not in self._blobs:
            self._blobs[ref.sha256] = await asyncio.to_thread(self.store.get_bytes, ref.sha256)
        return self._blobs[ref.sha256]

    async def _before_check(self, plan: ControlPlan) -> list[_Act]:
        """The code written, then the commands run (the last one also checks)."""
        out = []
        for i, ref in enumerate(plan.code):
            line = "Writing the analysis script." if i == 0 else "Writing the next script."
            act = _write(ref.path, await self._bytes(ref), text=True, append=False)
            out.append(_Act(act.name, act.arguments, line))
        for i, command in enumerate(plan.commands):
            last = i == len(plan.commands) - 1
            said = "Running the analysis." if i == 0 else None
            out.append(
                _act("bash", {"command": _last_command(plan, command) if last else command}, said)
            )
        return out

    async def _after_check(self, plan: ControlPlan, made: dict[str, str] | None) -> list[_Act]:
        """The outputs still to write, then the answer: every output when nothing ran
        (`made` None), else those the commands did not make: text not as planned (its
        numbers are the answer), bytes not at all (a figure the code drew is the code's
        figure, whatever the plotting library's bytes)."""
        out = []
        for f in plan.files:
            if made is not None and f.path in made and (made[f.path] == f.sha256 or not f.text):
                continue
            data = await self._bytes(f)
            if f.text or f.size == 0:
                out.append(_write(f.path, data, text=f.text, append=False))
                continue
            for offset in range(0, f.size, CONTROL_CHUNK_BYTES):
                chunk = data[offset : offset + CONTROL_CHUNK_BYTES]
                out.append(_write(f.path, chunk, text=False, append=offset > 0))
        return [*out, _act("submit", {"answer": plan.message})]

    @staticmethod
    def _made(messages: Sequence[Message], check: _Act) -> dict[str, str]:
        """The outputs the check found, path to hash, from its call's result."""
        for c in _calls(messages):
            if (c.name, c.arguments) == (check.name, check.arguments):
                said = _result_text(messages, c.id) or ""
                return {path.strip(): sha for sha, path in _HASHED.findall(said)}
        return {}

    def _draw_steps(self, plan: ControlPlan, least: int) -> int | None:
        """The run's steps: one of the look-alike's runs', within what the work left
        needs (`least`) and the run may take (None: no run of it known yet)."""
        if self._profile is None or not self._profile.steps:
            return None
        most = max(least, self.max_steps or plan.max_steps())
        wanted = seeded(self.plan_sha256, self.run_id, "steps").choice(self._profile.steps)
        return min(most, max(least, wanted))

    def _left(self, turn: int, work: int) -> int:
        """Steps left for `work` calls (before the look-alike's runs are known: one a
        step, after one look at the data)."""
        if self._steps is None:
            return work + (1 if turn == 0 else 0)
        return self._steps - turn

    async def _next(self, plan: ControlPlan, messages: Sequence[Message], turn: int) -> list[_Act]:
        """This step's calls: the work left, spread over the steps left, after looks at
        the workspace while there are more steps than work."""
        done = {(c.name, c.arguments) for c in _calls(messages)}
        before = await self._before_check(plan)
        checks = bool(plan.commands)
        rest = [a for a in before if (a.name, a.arguments) not in done]
        if self._steps is None:  # drawn once the look-alike has answered a run, from here on
            self._steps = self._draw_steps(plan, turn + (2 if checks and rest else 1))
        if rest:  # one step at least stays for what follows the check
            left = self._left(turn, len(rest) + 1) - 1
            if len(rest) == len(before) and left > len(rest):
                return [self._look(turn, messages)]
            return _share(rest, left)
        after = await self._after_check(plan, self._made(messages, before[-1]) if checks else None)
        rest = [a for a in after if (a.name, a.arguments) not in done]
        left = self._left(turn, len(rest))
        if not checks and len(rest) == len(after) and left > len(rest):
            return [self._look(turn, messages)]
        return _share(rest, left)

    def _look(self, turn: int, messages: Sequence[Message]) -> _Act:
        """The look of this turn: the look-alike's tool, at the next attached file."""
        tool = self._profile.looks_with(turn) if self._profile is not None else None
        attached = _attachments(messages)
        return _look(tool, attached[turn % len(attached)] if attached else None)

    def _say(self, acts: Sequence[_Act], turn: int) -> str | None:
        """A line beside the step's calls where the look-alike says one at this turn
        (unknown: where an agent would, writing and first running its code)."""
        says = self._profile.says(turn) if self._profile is not None else None
        if says is False:
            return None
        return acts[0].line or ("Next." if says else None)

    async def _think(self, plan: ControlPlan, turn: int) -> None:
        """A model's time to answer: one of the look-alike's at this turn, else the
        plan's median spread like real steps'."""
        draw = seeded(self.plan_sha256, self.run_id, turn)
        if self._profile is not None:
            ms = draw.choice(self._profile.think_ms(turn))
        else:
            ms = plan.step_ms * draw.lognormvariate(0.0, 0.5)
        if ms > 0:
            await asyncio.sleep(ms / 1000)

    def _usage(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], written: int
    ) -> Usage:
        """Tokens as the look-alike reports them for as many characters (else four
        characters a token, as the scripted model server estimates them)."""
        p, asked = self._profile, request_chars(messages, tools)
        return Usage(
            input_tokens=tokens(asked, p.input_tokens(asked) if p else None),
            output_tokens=tokens(written, p.output_tokens(written) if p else None),
        )

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The plan's next tool calls."""
        plan = await self._load()
        if self._steps is None and self.book is not None:
            self._profile = self.book.profile_for(self.campaign_id, self.like, _work(plan))
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        acts = await self._next(plan, messages, turn)
        calls = tuple(
            ToolCall(id=f"call_{turn}_{i}", name=a.name, arguments=a.arguments)
            for i, a in enumerate(acts)
        )
        said = self._say(acts, turn)
        await self._think(plan, turn)
        written = len(said or "") + sum(len(c.name) + len(c.arguments) for c in calls)
        return Completion(
            provider="control",
            model=self.model_name,
            text=said,
            tool_calls=calls,
            stop_reason="tool_use",
            finish_reason="tool_calls",
            usage=self._usage(messages, tools, written),
        )

    async def aclose(self) -> None:
        """Nothing to release."""
