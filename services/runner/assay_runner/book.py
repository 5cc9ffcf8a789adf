"""How the campaign's agents behave, as this runner saw them: what a control imitates.

A control's run must read like one of the campaign's agents' runs (issue #47): as many
steps, the same think times, token counts reported at the same rate, the same tools when
it looks around, words beside its calls where that agent says some. The runner drives
the agents' runs itself, so it keeps a bounded, in-memory :class:`AgentBook` of their
model turns (:class:`Observed` wraps each agent's model client); a control asks it for
its look-alike agent's :class:`Profile`. Nothing is kept of what the agents wrote, only
counts and times, and whether their task had files attached. A runner that has seen
none of an agent's turns yet has no profile: the control then falls back on its plan's
scripted estimate.

A control imitates the habits of the runs that did its plan's kind of :class:`Work` (ran
code or not, wrote files or not: what a judge reads in any transcript) on tasks like its
own (with files attached or without: an agent looks at the data it was given, and around
the workspace when it was given none), its look-alike's own where it has any, every
agent's of the campaign where it has none (`AgentBook.profile_for`): how many looks open
them, how long each turn thinks, where they say something. Token counts are a
model's own, so they follow its look-alike's turns, whatever their kind. Before any run
of its kind has answered, the control keeps its kind's default habits (see
`assay_runner.control`).
"""

from __future__ import annotations

import hashlib
import math
import random
import statistics
import string
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import re2

from assay.providers import (
    AssistantMessage,
    Completion,
    GenerationParams,
    Message,
    ProviderWrapper,
    TextPart,
    ToolDefinition,
    UserMessage,
)

__all__ = [
    "IDS_PER_TURN",
    "ID_CHARS",
    "MAX_RUNS",
    "MAX_TURNS",
    "RECENT_TURNS",
    "AgentBook",
    "Observed",
    "Pace",
    "Profile",
    "RequestSize",
    "Turn",
    "Work",
    "attachments",
    "fresh_id",
    "opening",
    "request_chars",
    "seeded",
    "shaped_id",
    "tokens",
    "work_done",
    "written_chars",
]

MAX_TURNS = 512
"""Most model turns remembered per agent (the oldest are forgotten first)."""
MAX_RUNS = 256
"""Most runs' step counts remembered per agent."""
RECENT_TURNS = 24
"""Think times a control draws from: its kind's latest turns at its turn's index. A turn's
time is the runner's load as much as the model's: drawn from the whole campaign, a
control running while the runner is idle thinks as long as agents did at its busiest."""
NEAR_TURNS = 8
"""Turns of about a call's size its token count is read from (`Profile.input_tokens`)."""
LATE_WAKES = 64
"""Wakes of this runner's controls kept to tell how late its loop wakes them."""
IDS_PER_TURN = 8
ID_CHARS = 64
"""Most call ids a turn keeps, and the longest kept: a model's ids are its own output, and
the book stays small whatever a model answers (no API's id is near that long)."""
EXPLORING = ("bash", "read_file", "list_files")
"""The tools a look at the workspace uses (what a control's extra steps may call)."""


def request_chars(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> int:
    """The size of the request a model is sent (messages and tool schemas), in characters:
    one measure for agents and controls, so tokens per character carry over."""
    return sum(len(m.model_dump_json()) for m in messages) + sum(
        len(t.model_dump_json()) for t in tools
    )


@dataclass
class RequestSize:
    """`request_chars` of one run's conversation as it grows: each message measured once,
    not every earlier one again at every turn (quadratic in a run's length, and on the
    step's critical path). The same figure; measured over again whenever the messages are
    not the ones measured plus new ones at the end."""

    _count: int = 0
    _chars: int = 0
    _ends: tuple[Message, Message] | None = None
    _tools: Sequence[ToolDefinition] | None = None
    _tool_chars: int = 0

    def of(self, messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> int:
        """`request_chars(messages, tools)`."""
        n, ends = self._count, self._ends
        if n > len(messages) or (
            ends is not None and (messages[0] is not ends[0] or messages[n - 1] is not ends[1])
        ):
            n, self._chars = 0, 0
        self._chars += sum(len(m.model_dump_json()) for m in messages[n:])
        self._count = len(messages)
        self._ends = (messages[0], messages[-1]) if messages else None
        if tools is not self._tools:
            self._tools = tools
            self._tool_chars = sum(len(t.model_dump_json()) for t in tools)
        return self._chars + self._tool_chars


def written_chars(completion: Completion) -> int:
    """What a completion wrote: its text and its calls (names and arguments)."""
    return len(completion.text or "") + sum(
        len(c.name) + len(c.arguments) for c in completion.tool_calls
    )


class Work(NamedTuple):
    """The kind of work a run did, as its transcript shows it to anyone who reads it."""

    ran: bool
    """It ran code it had written (a shell call after a file written)."""
    wrote: bool
    """It wrote files."""


@dataclass(frozen=True)
class Turn:
    """One model turn of an agent's run, as counts and times."""

    index: int
    think_ms: float
    said: bool
    first_tool: str | None
    calls: int
    input_chars: int
    input_tokens: int
    output_chars: int
    output_tokens: int
    run_id: str = ""
    at: float = 0.0
    """When it ended (`time.monotonic`): which turns are recent."""
    call_ids: tuple[str, ...] = ()
    """Its calls' ids, as its model's API named them (their shape is the API's own)."""


@dataclass(frozen=True)
class Profile:
    """An agent's turns and runs, as a control draws from them."""

    turns: tuple[Turn, ...]
    steps: tuple[int, ...]
    """Steps of each of its runs that ended by answering."""
    openings: tuple[int, ...] = ()
    """Looks at the workspace (`opening`) that opened each of those runs."""

    def think_ms(self, index: int) -> list[float]:
        """Think times of its latest turns at `index` (of its latest turns when none is
        that far): at most `RECENT_TURNS`."""
        at = [t for t in self.turns if t.index == index] or list(self.turns)
        latest = sorted(at, key=lambda t: t.at)[-RECENT_TURNS:]
        return [t.think_ms for t in latest]

    def says(self, index: int) -> bool | None:
        """Whether it mostly says something beside its calls at turn `index` (None: no
        turn that far)."""
        at = [t.said for t in self.turns if t.index == index]
        return sum(at) * 2 > len(at) if at else None

    def looks_with(self, index: int) -> str | None:
        """The tool it most often looks around with at turn `index`, if it does."""
        tools = Counter(
            t.first_tool for t in self.turns if t.index == index and t.first_tool in EXPLORING
        )
        return tools.most_common(1)[0][0] if tools else None

    def input_tokens(self, chars: int, index: int | None = None) -> int | None:
        """Input tokens it would report for a request of `chars` characters at turn
        `index` (None: no turn of about that size): as its turns of about that size at that turn
        did (as many messages, so as much of the wire's framing per message), else as
        any of its turns of about that size did."""
        at = [t for t in self.turns if t.index == index]
        pool = at if len(at) >= NEAR_TURNS else self.turns
        return _fit([(t.input_chars, t.input_tokens) for t in pool], chars)

    def call_id(self, index: int, position: int, draw: random.Random) -> str | None:
        """An id for the call at `position` of a turn at `index`, shaped as its ids at that
        turn and position are (else at that position, else any; None: fewer than two)."""
        ids = [t.call_ids for t in self.turns]
        at = [
            t.call_ids[position]
            for t in self.turns
            if t.index == index and len(t.call_ids) > position
        ]
        anywhere = [c[position] for c in ids if len(c) > position]
        every = [i for c in ids for i in c]
        pool = next((p for p in (at, anywhere, every) if len(p) >= 2), None)
        return shaped_id(pool, draw) if pool is not None else None

    def output_tokens(self, chars: int) -> int | None:
        """Output tokens it would report for `chars` written characters, as its turns
        that wrote about as much did (None: none did)."""
        return _fit([(t.output_chars, t.output_tokens) for t in self.turns], chars)


def _fit(points: Sequence[tuple[int, int]], x: int) -> int | None:
    """`x` through the least-squares line of the `NEAR_TURNS` points nearest it (their
    ratio when they cannot carry a line); at least one token; None when no point is
    within half of `x` of it. Near, not all: a model's
    count is not one line from a one-line call to a whole conversation (a line through
    every turn, set by the long ones, gave a control's short calls 7% more output tokens
    than its look-alike's, and its longest requests 7% more input tokens, 2026-12-05)."""
    points = sorted(((cx, cy) for cx, cy in points if cx > 0), key=lambda p: (abs(p[0] - x), p))
    points = points[:NEAR_TURNS]
    if not points or abs(points[0][0] - x) * 2 > x:
        return None  # none of about its size: a line through far turns says little
    n = len(points)
    mx = sum(cx for cx, _ in points) / n
    my = sum(cy for _, cy in points) / n
    var = sum((cx - mx) ** 2 for cx, _ in points)
    if n < 3 or var == 0:
        return max(1, round(x * my / mx))
    slope = sum((cx - mx) * (cy - my) for cx, cy in points) / var
    return max(1, round(my + slope * (x - mx)))


@dataclass
class _Agent:
    turns: deque[Turn] = field(default_factory=lambda: deque(maxlen=MAX_TURNS))
    steps: OrderedDict[str, int] = field(default_factory=OrderedDict)
    kinds: dict[str, tuple[Work, bool]] = field(default_factory=dict)
    """The kind of work of each run in `steps`, and whether its task had files attached
    (those that answered and said them)."""
    openings: dict[str, int] = field(default_factory=dict)
    """The looks that opened each run in `steps` (those that answered and said them)."""


@dataclass
class AgentBook:
    """Every campaign's agents' recent turns, by (campaign, agent); bounded."""

    _agents: dict[tuple[str, str], _Agent] = field(default_factory=dict)
    _late_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATE_WAKES))

    def woke(self, asked_ms: float, slept_ms: float) -> None:
        """Count one control's think time: asked for `asked_ms`, woken after `slept_ms`."""
        self._late_ms.append(max(0.0, slept_ms - asked_ms))

    def lateness_ms(self) -> float:
        """How late this runner's loop wakes a sleeper now (the median of its latest
        wakes; 0 before any)."""
        return statistics.median(self._late_ms) if self._late_ms else 0.0

    def sleep_ms(self, think_ms: float) -> float:
        """What a control asks the loop to sleep for a think time of `think_ms` as an
        agent's turns were timed: less the loop's lateness, which an agent's time, timed
        in the same loop, already holds once (the control's would hold it twice)."""
        return max(0.0, think_ms - self.lateness_ms())

    def record(
        self,
        campaign_id: str,
        agent_id: str,
        run_id: str,
        turn: Turn,
        *,
        last: bool,
        work: Work | None = None,
        looks: int | None = None,
        attached: bool | None = None,
    ) -> None:
        """Count one turn of a run; `last`: the run answered with it (its steps are known),
        having done `work` after `looks` looks at the workspace, on a task with files
        `attached` or not."""
        agent = self._agents.setdefault((campaign_id, agent_id), _Agent())
        agent.turns.append(turn)
        if last:
            agent.steps[run_id] = turn.index + 1
            agent.steps.move_to_end(run_id)
            if work is not None and attached is not None:
                agent.kinds[run_id] = (work, attached)
            if looks is not None:
                agent.openings[run_id] = looks
            while len(agent.steps) > MAX_RUNS:
                gone, _ = agent.steps.popitem(last=False)
                agent.kinds.pop(gone, None)
                agent.openings.pop(gone, None)

    def profile(self, campaign_id: str, agent_id: str | None) -> Profile | None:
        """The agent's profile, or None before any of its turns (its `steps` empty
        before any of its runs has answered)."""
        agent = self._agents.get((campaign_id, agent_id or ""))
        if agent is None or not agent.turns:
            return None
        return Profile(
            tuple(agent.turns), tuple(agent.steps.values()), tuple(agent.openings.values())
        )

    def works(self, campaign_id: str, agent_id: str | None, *, attached: bool) -> Counter[Work]:
        """How often the agent's runs that answered did each kind of work, on tasks with
        files `attached` or not (of the runs the book remembers)."""
        agent = self._agents.get((campaign_id, agent_id or ""))
        if agent is None:
            return Counter()
        return Counter(work for work, on in agent.kinds.values() if on == attached)

    def campaign_works(self, campaign_id: str, *, attached: bool) -> Counter[Work]:
        """`works` summed over every agent of the campaign."""
        out: Counter[Work] = Counter()
        for campaign, agent_id in list(self._agents):
            if campaign == campaign_id:
                out.update(self.works(campaign_id, agent_id, attached=attached))
        return out

    def profile_for(
        self, campaign_id: str, work: Work, *, attached: bool, like: str | None = None
    ) -> Profile | None:
        """The habits of the campaign's runs that did `work` on a task with files
        `attached` or not (an agent looks at the data it was given, and around the
        workspace when it was given none): agent `like`'s own such runs where it has
        any, else every agent's (in the order of their ids, so any runner pools them
        alike); None before any such run answered.

        A model's habits are its own: pooled over agents, a control wearing one whose
        runs always looked before writing drew the openings of another that writes at
        once, and opened as its look-alike never did (the blindness bench's larger
        campaign: 25 of 192 controls wearing it over four campaigns, none of its 96 runs;
        7 of 192 since, each a control whose look-alike had no answered run of its kind,
        2026-12-07)."""
        own = self._agents.get((campaign_id, like)) if like is not None else None
        found = _habits([own], work, attached) if own is not None else None
        if found is not None:
            return found
        pooled = [
            agent
            for (campaign, _), agent in sorted(self._agents.items())
            if campaign == campaign_id
        ]
        return _habits(pooled, work, attached)


def _habits(agents: Sequence[_Agent], work: Work, attached: bool) -> Profile | None:
    """The profile of `agents`' runs that did `work` on tasks with files `attached` or
    not; None when none of them answered."""
    turns: list[Turn] = []
    steps: list[int] = []
    openings: list[int] = []
    for agent in agents:
        runs = {run for run, kind in agent.kinds.items() if kind == (work, attached)}
        turns += [t for t in agent.turns if t.run_id in runs]
        steps += [n for run, n in agent.steps.items() if run in runs]
        openings += [n for run, n in agent.openings.items() if run in runs]
    if not turns or not steps:
        return None
    return Profile(tuple(turns), tuple(steps), tuple(openings))


_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
OPENAI_ID = ("call_", 24)
"""The shape of an OpenAI tool-call id (a prefix, then random letters and digits): a
control's ids before any of its look-alike's are seen."""


def shaped_id(examples: Sequence[str], draw: random.Random) -> str:
    """A new id shaped as `examples` (two or more): as long as one of them; where all of
    that length agree, their character kept (a prefix, a counted turn); elsewhere one
    drawn from the classes found there (digits, capitals, small letters), or else from
    the characters found there."""
    length = draw.choice([len(e) for e in examples])
    alike = [e for e in examples if len(e) == length]
    fixed = [len({e[p] for e in alike}) == 1 for p in range(length)]
    varying = {e[p] for e in alike for p in range(length) if not fixed[p]}
    classes = [
        cls
        for cls in (string.digits, string.ascii_uppercase, string.ascii_lowercase)
        if varying & set(cls)
    ]
    alphabet = "".join(classes) or "".join(sorted(varying))
    return "".join(alike[0][p] if fixed[p] else draw.choice(alphabet) for p in range(length))


def fresh_id(draw: random.Random) -> str:
    """An OpenAI-shaped tool-call id (`OPENAI_ID`)."""
    prefix, n = OPENAI_ID
    return prefix + "".join(draw.choice(_BASE62) for _ in range(n))


@dataclass
class Pace:
    """One control run's think times against its draws: what it overslept so far is taken
    off its next (a sleep is never shorter than the loop's lateness, so a run of short
    draws alone would think longer on the whole than the turns it drew from)."""

    overslept_ms: float = 0.0
    """How much longer than its draws the run has slept so far (less: negative)."""

    def target_ms(self, drawn_ms: float) -> float:
        """What to sleep for a draw of `drawn_ms`, less what is owed (never below 0)."""
        return max(0.0, drawn_ms - self.overslept_ms)

    def slept(self, drawn_ms: float, slept_ms: float) -> None:
        """Count a turn drawn at `drawn_ms` that slept `slept_ms`."""
        self.overslept_ms += slept_ms - drawn_ms


def seeded(*parts: object) -> random.Random:
    """A random source seeded by `parts` (the same parts, the same draws, on any host)."""
    return random.Random(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest())


@dataclass(kw_only=True)
class Observed(ProviderWrapper):
    """An agent's model client that tells the book about each turn (and nothing else)."""

    book: AgentBook
    campaign_id: str
    agent_id: str
    run_id: str
    _sizes: RequestSize = field(default_factory=RequestSize, init=False)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The wrapped client's turn, timed and counted."""
        started = time.perf_counter()
        completion = await self.inner.complete(messages, tools, params)
        think_ms = (time.perf_counter() - started) * 1000
        calls = completion.tool_calls
        turn = Turn(
            index=sum(m.role == "assistant" for m in messages),
            think_ms=think_ms,
            said=bool((completion.text or "").strip()),
            first_tool=calls[0].name if calls else None,
            calls=len(calls),
            input_chars=self._sizes.of(messages, tools),
            input_tokens=completion.usage.input_tokens,
            output_chars=written_chars(completion),
            output_tokens=completion.usage.output_tokens,
            run_id=self.run_id,
            at=time.monotonic(),
            call_ids=tuple(c.id for c in calls[:IDS_PER_TURN] if len(c.id) <= ID_CHARS),
        )
        last = not calls or any(c.name == "submit" for c in calls)
        work = work_done(messages, completion) if last else None  # known once it answers
        looks = opening(messages, completion) if last else None
        attached = bool(attachments(messages)) if last else None
        self.book.record(
            self.campaign_id,
            self.agent_id,
            self.run_id,
            turn,
            last=last,
            work=work,
            looks=looks,
            attached=attached,
        )
        return completion


_ATTACHED = re2.compile(r"(?m)^- /workspace/(\S+) \(")
"""An attachment line of the runner's first user message (conversation.py)."""
_FIRST_MESSAGE_CHARS = 1_000_000
"""Most characters of a first user message read for its attachment lines."""


def attachments(messages: Sequence[Message]) -> list[str]:
    """The workspace paths of the files attached to the run's task, as the runner's first
    user message lists them (a task's text is hostile: RE2, bounded)."""
    for m in messages:
        if isinstance(m, UserMessage):
            text = "".join(p.text for p in m.content if isinstance(p, TextPart))
            if found := _ATTACHED.findall(text[:_FIRST_MESSAGE_CHARS]):
                return list(found)
    return []


def opening(messages: Sequence[Message], completion: Completion) -> int:
    """How many turns of a run (its conversation `messages`, then `completion`) opened it
    by looking at the workspace (their first call explores) before any other work."""
    turns = [m.tool_calls for m in messages if isinstance(m, AssistantMessage)]
    looks = 0
    for calls in [*turns, completion.tool_calls]:
        if not calls or calls[0].name not in EXPLORING:
            break
        looks += 1
    return looks


def work_done(messages: Sequence[Message], completion: Completion) -> Work:
    """The work of a run whose conversation is `messages` and next turn `completion`,
    read from its calls (a resumed run's logged ones too)."""
    calls = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    wrote = ran = False
    for call in [*calls, *completion.tool_calls]:
        if call.name == "write_file":
            wrote = True
        elif call.name == "bash" and wrote:
            ran = True
    return Work(ran=ran, wrote=wrote)


def tokens(chars: int, fitted: int | None) -> int:
    """`fitted` tokens, else four characters a token (the scripted estimate)."""
    return fitted if fitted is not None else max(1, math.ceil(chars / 4))
