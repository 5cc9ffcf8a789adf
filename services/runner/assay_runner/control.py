"""The control agent: carries out a stored control plan through the agent's own tools.

No model is called, but the run reads like an agent's (issue #47): it opens with looks at
the workspace, writes the plan's code with ``write_file``, runs its commands with ``bash``
in the sandbox, chained with ``&&`` as an agent chains them (the last one also removes
what the plan says must be absent and lists the outputs), writes the outputs the commands
do not make as planned (the plan's ``made`` says which they do: text with
``write_file``, other bytes with ``bash`` in base64 chunks), and submits the plan's
message, one tool call a step.

Its habits are those of the campaign's runs that did the plan's kind of work (ran code or
not, wrote files or not) on tasks like its own (files attached or not): its look-alike's
own such runs where it has any, else every agent's alike, as this runner's
:class:`AgentBook` saw them (:meth:`AgentBook.profile_for`): how many looks open a run
and with which tool, how long each turn thinks, at which turns it says something beside
its calls. Its token counts follow its look-alike's turns (a
model's own rate), and its answer opens as its look-alike's answers do (a model's house
style: the reference's ``Summary:`` label kept, dropped or put in its place, the answer's
substance unchanged). Before any run of its kind has answered, its kind's default habits
hold (`_DEFAULT_LOOKS`: an agent that runs code looks at the data first and says so; one
that only drafts code writes it at once; one that writes nothing glances at a file; the
plan's median think time; four characters a token).
What is done is read from the conversation (the calls made), so a resumed run goes on
where its logged steps end, like any model run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import shlex
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from assay.providers import (
    AssistantMessage,
    Completion,
    GenerationParams,
    Message,
    ToolCall,
    ToolDefinition,
)
from assay.store import BlobStore
from assay.tasks import restyled
from assay_schemas import CONTROL_CHUNK_BYTES, ControlFile, ControlPlan, ProviderError, Usage

from .book import (
    AgentBook,
    Pace,
    Profile,
    RequestSize,
    Work,
    attachments,
    fresh_id,
    seeded,
    tokens,
)

__all__ = ["ControlProvider", "plan_work"]

_HEREDOC = "EOF"


log = logging.getLogger("assay.runner")


@dataclass(frozen=True)
class _Act:
    """One tool call of the plan (or a look around), and what is said beside it where the
    run's habits say something at its turn (None: nothing, by default)."""

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


def _last_command(plan: ControlPlan, command: str) -> str:
    """The plan's last command, then what an agent chains to its run: remove what must be
    absent, list the output folders. Nothing is hashed (no agent does)."""
    out = command
    if plan.absent:
        out += " && rm -f -- " + " ".join(shlex.quote(p) for p in plan.absent)
    paths = [f.path for f in plan.files] + plan.absent
    folders = sorted({p.split("/", 1)[0] for p in paths if "/" in p})
    if folders:
        out += " && ls -R " + " ".join(shlex.quote(d) for d in folders) + " 2>/dev/null | head -50"
    return out


def _calls(messages: Sequence[Message]) -> list[ToolCall]:
    return [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def _quoted(path: str) -> str:
    """`path` in single quotes, as an agent types a file name (safe for any name)."""
    return "'" + path.replace("'", "'\\''") + "'"


def _look(tool: str, attachment: str | None) -> _Act:
    """A look at the workspace with `tool` (bash: list it and head the data)."""
    if attachment is None:
        return _act("list_files", {}, "No data attached; I'll check the workspace first.")
    if tool == "list_files":
        return _act("list_files", {})
    if tool == "read_file":
        return _act("read_file", {"path": attachment})
    # The listing the demo's careful agent makes (testing/assay_testing/demo/_agents.py).
    command = f"ls -l --time-style=+ && head -n 8 {_quoted(attachment)}"
    return _act("bash", {"command": command}, "Let me look at the data first.")


STEP_CHARS = 320_000
"""Most characters of calls packed into one step beyond its first call: a step is one
event (at most 1 MiB, JSON-escaped), and a file's chunk is some 80,000 characters."""


def _share(rest: Sequence[_Act], steps: int) -> list[_Act]:
    """This step's share of `rest` spread evenly over `steps` steps (one call a step
    while the steps suffice), no more than one event carries."""
    out: list[_Act] = []
    size = 0
    for act in rest[: -(-len(rest) // max(1, steps))]:
        size += len(act.arguments)
        if out and size > STEP_CHARS:
            break
        out.append(act)
    return out


def plan_work(plan: ControlPlan) -> Work:
    """The kind of work the plan does, as an agent's transcript would show it."""
    return Work(ran=bool(plan.commands), wrote=bool(plan.code or plan.files))


_DEFAULT_LOOKS: dict[Work, tuple[str, ...]] = {
    Work(ran=True, wrote=True): ("bash",),
    Work(ran=False, wrote=True): (),
    Work(ran=False, wrote=False): ("read_file",),
}
"""A kind of work's opening looks (their tools) before any run of that kind is known."""


_ID_DRAWS = 8
"""Draws of a look-alike-shaped call id before one of the fallback's shape (a model that
counts its calls leaves few ids to draw)."""


@dataclass(kw_only=True)
class ControlProvider:
    """A ModelProvider that plays a control plan (see the module docstring)."""

    plan_sha256: str
    store: BlobStore
    model_name: str = "control"
    """The model name the run's request names (reported back like any endpoint's)."""
    book: AgentBook | None = None
    """Where the campaign's agents' turns are counted (None: the default habits)."""
    campaign_id: str = ""
    like: str | None = None
    """The campaign agent the control looks like (whose token counts it reports)."""
    run_id: str = ""
    max_steps: int | None = None
    """The most steps the run may take (default: the plan's most)."""
    _plan: ControlPlan | None = field(default=None, init=False)
    _blobs: dict[str, bytes] = field(default_factory=dict, init=False)
    _habits: Profile | None = field(default=None, init=False)
    """The habits of the campaign's runs of the plan's kind (None: the defaults)."""
    _rates: Profile | None = field(default=None, init=False)
    """The look-alike's turns, for its token counts (None: the estimate)."""
    _looks: int | None = field(default=None, init=False)
    """The looks that open this run, drawn once."""
    _attached: list[str] | None = field(default=None, init=False)
    """The files attached to the run's task, read once from its first message."""
    _pace: Pace = field(default_factory=lambda: Pace(), init=False)
    _sizes: RequestSize = field(default_factory=RequestSize, init=False)
    _planned: list[_Act] | None = field(default=None, init=False)
    """The plan's calls, built once (a file's chunks are encoded once, not every turn)."""
    house_style: str | None = None
    """The opening (`answer_opening`: a label such as ``Summary:``, or "") of its
    look-alike's answer on the same task, which the control's answer takes (None: the
    plan's message as it is)."""

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

    async def prepare(self) -> None:
        """Read the plan and its files, and build its calls, before the run's first step:
        done at its first model call instead, they weighed on that step's latency alone
        (a control's first step took twice an agent's, 2026-12-05). A plan or file that cannot be read is
        left to that call, which fails the run saying why, as it always did."""
        try:
            self._planned = await self._acts(await self._load())
        except Exception:  # the store's errors or ProviderError: the first call meets it
            log.debug("control %s: its plan is read at its first step", self.run_id, exc_info=True)

    async def _bytes(self, ref: ControlFile) -> bytes:
        if ref.sha256 not in self._blobs:
            self._blobs[ref.sha256] = await asyncio.to_thread(self.store.get_bytes, ref.sha256)
        return self._blobs[ref.sha256]

    async def _acts(self, plan: ControlPlan) -> list[_Act]:
        """The plan's work, one call a step: the code written, the commands run (the last
        one also removes and lists), the outputs they do not make written, the answer."""
        out = []
        for i, ref in enumerate(plan.code):
            line = "Writing the analysis script." if i == 0 else None
            out.append(_write(ref.path, await self._bytes(ref), text=True, append=False))
            out[-1] = _Act(out[-1].name, out[-1].arguments, line)
        for i, command in enumerate(plan.commands):
            last = i == len(plan.commands) - 1
            out.append(_act("bash", {"command": _last_command(plan, command) if last else command}))
        made = set(plan.made)
        for f in plan.files:
            if f.path in made:
                continue
            data = await self._bytes(f)
            if f.text or f.size == 0:
                act = _write(f.path, data, text=f.text, append=False)
                drafts = not plan.commands and not out  # code it never runs: a draft
                out.append(
                    _Act(act.name, act.arguments, "Drafting the analysis." if drafts else None)
                )
                continue
            for offset in range(0, f.size, CONTROL_CHUNK_BYTES):
                chunk = data[offset : offset + CONTROL_CHUNK_BYTES]
                out.append(_write(f.path, chunk, text=False, append=offset > 0))
        return [*out, _act("submit", {"answer": self._answer(plan)})]

    def _answer(self, plan: ControlPlan) -> str:
        """The plan's message opening as its look-alike's answer on the same task did: a
        model's house style is its own, and a control keeping the reference's label where
        the model it wears drops it is told by its opening."""
        if self.house_style is None:
            return plan.message
        return restyled(plan.message, self.house_style)

    def _draw_looks(self, plan: ControlPlan) -> int:
        """The looks that open this run: one of its kind's runs' (else the default)."""
        if self._habits is not None and self._habits.openings:
            draw = seeded(self.plan_sha256, self.run_id, "looks")
            return draw.choice(self._habits.openings)
        return len(_DEFAULT_LOOKS.get(plan_work(plan), ("bash",)))

    async def _next(self, plan: ControlPlan, messages: Sequence[Message], turn: int) -> list[_Act]:
        """This step's calls: a look while the run's opening lasts and no work is done,
        then the work left, one call a step (packed only where the steps left are fewer)."""
        if self._planned is None:
            self._planned = await self._acts(plan)
        acts = self._planned
        done = Counter((c.name, c.arguments) for c in _calls(messages))
        rest = []
        for act in acts:  # a multiset: two equal chunks of a file are two calls
            if done[(act.name, act.arguments)] > 0:
                done[(act.name, act.arguments)] -= 1
            else:
                rest.append(act)
        most = max(self.max_steps or plan.max_steps(), turn + 1)
        if self._looks is None:
            self._looks = self._draw_looks(plan)
        looks = min(self._looks, most - len(acts))
        if len(rest) == len(acts) and turn < looks:
            return [self._look(plan, turn, messages)]
        return _share(rest, most - turn)

    def _look(self, plan: ControlPlan, turn: int, messages: Sequence[Message]) -> _Act:
        """The look of this turn, with the tool its kind's runs look with at this turn,
        at the next attached file."""
        tool = self._habits.looks_with(turn) if self._habits is not None else None
        if tool is None:
            defaults = _DEFAULT_LOOKS.get(plan_work(plan)) or ("bash",)
            tool = defaults[min(turn, len(defaults) - 1)]
        attached = self._attachments(messages)
        return _look(tool, attached[turn % len(attached)] if attached else None)

    def _attachments(self, messages: Sequence[Message]) -> list[str]:
        if self._attached is None:
            self._attached = attachments(messages)
        return self._attached

    def _say(self, acts: Sequence[_Act], turn: int) -> str | None:
        """A line beside the step's calls where its kind's runs say one at this turn
        (unknown: the act's own, where an agent would say one)."""
        says = self._habits.says(turn) if self._habits is not None else None
        if says is None:
            return acts[0].line
        return (acts[0].line or "Next.") if says else None

    async def _think(self, plan: ControlPlan, turn: int) -> None:
        """A model's time to answer: one of its kind's latest runs' at this turn, else
        the plan's median spread like real steps'; slept as `AgentBook.sleep_ms` says."""
        draw = seeded(self.plan_sha256, self.run_id, turn)
        if self._habits is not None:
            ms = draw.choice(self._habits.think_ms(turn))
        else:
            ms = plan.step_ms * draw.lognormvariate(0.0, 0.5)
        target = self._pace.target_ms(ms)
        asked = self.book.sleep_ms(target) if self.book is not None else target
        started = time.perf_counter()
        await asyncio.sleep(asked / 1000)
        slept = (time.perf_counter() - started) * 1000
        self._pace.slept(ms, slept)
        if self.book is not None:
            self.book.woke(asked, slept)

    def _call_id(self, turn: int, position: int, taken: set[str]) -> str:
        """The id of the call at `position` of this turn, shaped as its look-alike's model
        names its calls (an API's own shape, which every step event logs), and none the
        run has used (a tool's result is matched to its call by id)."""
        draw = seeded(self.plan_sha256, self.run_id, "call", turn, position)
        for _ in range(_ID_DRAWS):
            rates = self._rates
            shaped = rates.call_id(turn, position, draw) if rates is not None else None
            if shaped is not None and shaped not in taken:
                return shaped
        while (fresh := fresh_id(draw)) in taken:
            pass
        return fresh

    def _usage(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        written: int,
        turn: int,
    ) -> Usage:
        """Tokens as the look-alike reports them for as many characters at this turn
        (where it made no call of about that size, as its kind's runs did; else four
        characters a token, as the scripted model server estimates them): a model that
        never wrote a long file says nothing of its count for one."""
        asked = self._sizes.of(messages, tools)
        known = [p for p in (self._rates, self._habits) if p is not None]
        return Usage(
            input_tokens=tokens(
                asked, next((n for p in known if (n := p.input_tokens(asked, turn))), None)
            ),
            output_tokens=tokens(
                written, next((n for p in known if (n := p.output_tokens(written))), None)
            ),
        )

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The plan's next tool calls."""
        plan = await self._load()
        if self.book is not None:  # its kind's runs so far (the opening is drawn once)
            attached = bool(self._attachments(messages))
            self._habits = self.book.profile_for(
                self.campaign_id, plan_work(plan), attached=attached, like=self.like
            )
            self._rates = self.book.profile(self.campaign_id, self.like)
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        acts = await self._next(plan, messages, turn)
        taken = {c.id for c in _calls(messages)}
        calls: list[ToolCall] = []
        for i, a in enumerate(acts):
            calls.append(
                ToolCall(id=self._call_id(turn, i, taken), name=a.name, arguments=a.arguments)
            )
            taken.add(calls[-1].id)
        said = self._say(acts, turn)
        await self._think(plan, turn)
        written = len(said or "") + sum(len(c.name) + len(c.arguments) for c in calls)
        return Completion(
            provider="control",
            model=self.model_name,
            text=said,
            tool_calls=tuple(calls),
            stop_reason="tool_use",
            finish_reason="tool_calls",
            usage=self._usage(messages, tools, written, turn),
        )

    async def aclose(self) -> None:
        """Nothing to release."""
