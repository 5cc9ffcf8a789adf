"""The control agent plays its stored plan through the agent's tools, turn by turn."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from assay.providers import (
    AssistantMessage,
    Completion,
    GenerationParams,
    Message,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from assay.store import LocalBlobStore
from assay_runner.book import (
    MAX_RUNS,
    MAX_TURNS,
    RECENT_TURNS,
    AgentBook,
    Observed,
    Pace,
    Profile,
    Turn,
    Work,
    attachments,
    request_chars,
)
from assay_runner.control import ControlProvider
from assay_runner.scheduler import (
    ControlsUnopened,
    control_agents,
    control_runs,
    interleave,
    plan_runs,
)
from assay_runner.tools import TOOLS
from assay_schemas import (
    MAX_EVENT_BYTES,
    AgentSpec,
    CampaignSpec,
    ControlDetails,
    ControlFile,
    ControlPlan,
    ControlsSpec,
    Limits,
    Producer,
    ProviderError,
    Task,
    Usage,
    run_id_for,
)

PNG = bytes(range(256)) * 600  # 153,600 bytes with NUL: written in three chunks
CSV = "gene,fold change\nIL6,8.62\n# ünïcode; $(rm -rf /); `x`\n"


def _plan(store: LocalBlobStore, files: dict[str, bytes], message: str) -> str:
    refs = []
    for path, data in files.items():
        info = store.put_bytes(data)
        text = b"\x00" not in data and data.decode("utf-8", "replace").encode() == data
        refs.append(ControlFile(path=path, sha256=info.sha256, size=info.size, text=text))
    plan = ControlPlan(files=refs, message=message)
    return store.put_bytes(plan.model_dump_json().encode()).sha256


async def test_a_plan_is_written_then_answered_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    files = {"results/table.csv": CSV.encode(), "results/it's a figure.png": PNG}
    provider = ControlProvider(plan_sha256=_plan(store, files, "Done: see results/."), store=store)
    messages: list[object] = [UserMessage(content="the task")]
    calls: list[ToolCall] = []
    while True:
        completion = await provider.complete(messages)  # type: ignore[arg-type]
        (call,) = completion.tool_calls
        calls.append(call)
        if call.name == "submit":
            break
        messages.append(AssistantMessage(tool_calls=(call,)))
    # Writing without running, as an agent drafting its work does: no look first (the
    # default of its kind before any such run is known), then one call a step.
    assert [c.name for c in calls] == ["write_file", "bash", "bash", "bash", "submit"]
    assert json.loads(calls[-1].arguments) == {"answer": "Done: see results/."}
    assert json.loads(calls[0].arguments) == {"path": "results/table.csv", "content": CSV}
    # The shell steps rebuild the bytes exactly, whatever the file is called.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for call in calls[1:4]:
        command = json.loads(call.arguments)["command"]
        assert len(command.encode()) < 128 * 1024, "one shell argument stays under Linux's limit"
        subprocess.run(
            ["bash", "-c", command],
            cwd=workspace,
            check=True,
            timeout=30,
            env={"PATH": os.environ["PATH"]},
        )
    assert (workspace / "results" / "it's a figure.png").read_bytes() == PNG
    assert sorted(p.name for p in workspace.rglob("*") if p.is_file()) == ["it's a figure.png"]
    # A resumed run (three turns logged) goes on with the fourth.
    again = ControlProvider(plan_sha256=provider.plan_sha256, store=store)
    resumed = await again.complete(
        [messages[0], *[AssistantMessage(tool_calls=(c,)) for c in calls[:3]]]
    )  # type: ignore[list-item]
    assert resumed.tool_calls[0].arguments == calls[3].arguments


async def test_equal_chunks_of_a_file_are_each_written(tmp_path: Path) -> None:
    """A file whose chunks repeat (a flat image, zero padding) is written whole, one chunk
    a step: a chunk logged already does not stand for an equal one still to write."""
    store = LocalBlobStore(tmp_path / "blobs")
    flat = bytes(3 * 60_000 + 10)  # three equal chunks of zeros, then ten bytes more
    provider = ControlProvider(
        plan_sha256=_plan(store, {"results/flat.png": flat}, "A flat figure."), store=store
    )
    messages: list[Message] = [UserMessage(content="the task")]
    calls: list[ToolCall] = []
    while not calls or calls[-1].name != "submit":
        (call,) = (await provider.complete(messages)).tool_calls
        calls.append(call)
        messages.append(AssistantMessage(tool_calls=(call,)))
    assert [c.name for c in calls] == ["bash"] * 4 + ["submit"]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for call in calls[:4]:
        _execute(workspace, call)
    assert (workspace / "results" / "flat.png").read_bytes() == flat


async def test_a_lost_or_bad_plan_is_the_platforms_failure(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    with pytest.raises(ProviderError, match="control plan"):
        await ControlProvider(plan_sha256="0" * 64, store=store).complete([])
    bad = store.put_bytes(b'{"files": "nope"}').sha256
    with pytest.raises(ProviderError, match="control plan"):
        await ControlProvider(plan_sha256=bad, store=store).complete([])


SOLVE = """import pathlib
out = pathlib.Path("results"); out.mkdir(exist_ok=True)
(out / "table.csv").write_text("gene,fold change\\nIL6,8.62\\n")
(out / "scratch.txt").write_text("intermediate")
(out / "figure.png").write_bytes(bytes(range(256)) * 3)
print("done")
"""


def _execute(workspace: Path, call: ToolCall) -> str:
    """What the sandbox's tools would answer (bash, write_file and list_files, run here)."""
    args = json.loads(call.arguments)
    if call.name == "write_file":
        target = workspace / args["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args["content"])
        return f"wrote {args['path']}"
    if call.name == "list_files":
        return "\n".join(str(p.relative_to(workspace)) for p in sorted(workspace.rglob("*")))
    done = subprocess.run(
        ["bash", "-c", args["command"]],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"]},
    )
    return f"exit code: {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


async def test_a_plan_with_code_writes_it_runs_it_and_writes_only_what_it_did_not_make(
    tmp_path: Path,
) -> None:
    """The control works as an agent does (issue #47): code written, run in the
    workspace (chained with `&&`, nothing hashed: no agent checks its outputs so); only
    what the plan says the code does not make as planned is written (an altered table, a
    note), a figure the code drew is kept, and what must be absent is removed. Every step
    reports tokens and takes its think time."""
    store = LocalBlobStore(tmp_path / "blobs")

    def ref(path: str, data: bytes) -> ControlFile:
        info = store.put_bytes(data)
        text = b"\x00" not in data and data.decode("utf-8", "replace").encode() == data
        return ControlFile(path=path, sha256=info.sha256, size=info.size, text=text)

    altered = b"gene,fold change\nIL6,12.93\n"
    plan = ControlPlan(
        code=[ref("solve.py", SOLVE.encode())],
        commands=["python3 solve.py"],
        files=[
            ref("results/table.csv", altered),
            ref("results/notes.md", b"# notes\n"),
            ref("results/figure.png", PNG[:1000]),
        ],
        absent=["results/scratch.txt"],
        made=["results/figure.png"],
        message="Done: see results/.",
        step_ms=5.0,
    )
    sha = store.put_bytes(plan.model_dump_json().encode()).sha256
    provider = ControlProvider(plan_sha256=sha, store=store, model_name="gpt-x")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    messages: list[object] = [UserMessage(content="the task")]
    calls: list[ToolCall] = []
    said: list[str | None] = []
    while len(calls) < plan.max_steps():
        completion = await provider.complete(messages)  # type: ignore[arg-type]
        assert completion.model == "gpt-x" and completion.usage.input_tokens > 0
        assert completion.usage.output_tokens > 0
        (call,) = completion.tool_calls
        calls.append(call)
        said.append(completion.text)
        if call.name == "submit":
            break
        messages.append(AssistantMessage(tool_calls=(call,)))
        messages.append(ToolResultMessage(call_id=call.id, content=_execute(workspace, call)))
    names = [c.name for c in calls]
    assert names == ["list_files", "write_file", "bash", "write_file", "write_file", "submit"]
    # It says what it does where an agent's model does (looking, writing its code).
    assert said[:2] == [
        "No data attached; I'll check the workspace first.",
        "Writing the analysis script.",
    ]
    assert said[2:] == [None] * 4
    # One command runs the code, removes what must be absent and lists the outputs.
    command = json.loads(calls[2].arguments)["command"]
    assert command == (
        "python3 solve.py && rm -f -- results/scratch.txt && ls -R results 2>/dev/null | head -50"
    )
    assert "base64" not in json.dumps([json.loads(c.arguments) for c in calls])
    assert (workspace / "results" / "table.csv").read_bytes() == altered
    assert (workspace / "results" / "notes.md").read_text() == "# notes\n"
    assert (workspace / "results" / "figure.png").read_bytes() == bytes(range(256)) * 3
    assert not (workspace / "results" / "scratch.txt").exists()
    # Resumed after the run, it writes the same files in the same order.
    again = ControlProvider(plan_sha256=sha, store=store)
    resumed = await again.complete(messages[: 1 + 2 * 4])  # type: ignore[arg-type]
    assert resumed.tool_calls[0].arguments == calls[4].arguments
    assert plan.max_steps() >= len(calls)


_PRODUCER = Producer(service="test", version="0")


def _declared(
    task_id: str, agent_id: str, slot: int, like: str | None = "careful"
) -> ControlDetails:
    run_id = run_id_for("demo", task_id, agent_id, 0)
    return ControlDetails(
        campaign_id="demo",
        task_id=task_id,
        control_run_id=run_id,
        variant="prose_only",
        expected="fail",
        plan_sha256="a" * 64,
        agent_id=agent_id,
        like=like,
        slot=slot,
        max_steps=40,
    )


def test_the_runner_requests_controls_at_their_slots_like_the_agent_they_look_like() -> None:
    """Issue #47: a control's request is the request of the agent it looks like, under
    its own id, with no plan and no kind of its own, at its declared slot."""
    careful = AgentSpec(
        agent_id="careful",
        model="scripted-careful",
        family="acme",
        system_prompt="be careful",
        limits=Limits(max_steps=12),
    )
    other = AgentSpec(agent_id="other", model="m2", family="orbit")
    campaign = CampaignSpec(campaign_id="demo", agents=[careful, other], epochs=2)
    task = Task(task_id="t1", prompt="p")
    runs = plan_runs(campaign, task, producer=_PRODUCER, cause="c")
    declared = [
        _declared("t1", "cxxxxxx", 2),
        _declared("t1", "czzzzzz", 99),  # past the end: last
        _declared("t2", "cyyyyyy", 1),  # another task's: not this one's
        _declared("t1", "careful", 1).model_copy(update={"control_run_id": "r" + "0" * 24}),
    ]
    controls = control_runs(campaign, task, declared, producer=_PRODUCER, cause="c")
    merged = interleave(runs, controls)
    assert [r.agent.agent_id for r in merged] == [
        "careful",
        "careful",
        "cxxxxxx",
        "other",
        "other",
        "czzzzzz",
    ], "a declaration naming another run (here an agent's) requests nothing"
    control = merged[2]
    assert control.agent == careful.model_copy(update={"agent_id": "cxxxxxx"})
    assert control.limits == careful.limits and control.run_id == declared[0].control_run_id
    assert "control" not in control.agent.model_dump_json()
    # A campaign without a model agent to look like: a plain model agent.
    bare = control_runs(
        campaign, task, [_declared("t1", "cxxxxxx", 0, like=None)], producer=_PRODUCER, cause="c"
    )
    assert bare[0][1].agent.kind == "model"


@dataclass
class _Quick:
    """A model agent that glances at one file and answers (what a control imitates);
    it reports 100 input tokens plus one per three request characters."""

    turns: int = 2

    kind = "openai"
    model = "quick-1"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        last = turn + 1 >= self.turns
        call = ToolCall(
            id=f"c{turn}",
            name="submit" if last else "read_file",
            arguments='{"answer": "ok"}' if last else '{"path": "data/a.csv"}',
        )
        chars = request_chars(messages, tools)
        return Completion(
            provider="openai",
            model=self.model,
            tool_calls=(call,),
            usage=Usage(input_tokens=100 + chars // 3, output_tokens=7),
        )

    async def aclose(self) -> None:
        return None


_TASK = "Task id: t1\nFiles:\n- /workspace/data/a.csv (12 bytes)\n- /workspace/data/b.csv (9 bytes)"


@dataclass
class _Worker(_Quick):
    """An agent that looks, writes its script, runs it twice and answers (five steps)."""

    _CALLS = (
        ("read_file", {"path": "data/a.csv"}),
        ("write_file", {"path": "solve.py", "content": "print(1)"}),
        ("bash", {"command": "python3 solve.py"}),
        ("bash", {"command": "ls results"}),
        ("submit", {"answer": "ok"}),
    )

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        name, arguments = self._CALLS[min(turn, len(self._CALLS) - 1)]
        call = ToolCall(id=f"c{turn}", name=name, arguments=json.dumps(arguments))
        return Completion(
            provider="openai",
            model=self.model,
            tool_calls=(call,),
            usage=Usage(input_tokens=1, output_tokens=1),
        )


async def _agent_runs(
    book: AgentBook, agent: _Quick, runs: int, agent_id: str = "quick", task: str = _TASK
) -> None:
    """`runs` runs of `agent` on `task` through the runner's observing wrapper."""
    for r in range(runs):
        observed = Observed(
            inner=agent, book=book, campaign_id="demo", agent_id=agent_id, run_id=f"{agent_id}{r}"
        )
        messages: list[Message] = [UserMessage(content=task + "x" * (r * 50))]
        while True:
            completion = await observed.complete(messages, TOOLS)
            messages.append(AssistantMessage(tool_calls=completion.tool_calls))
            if completion.tool_calls[0].name == "submit":
                break
            messages.append(ToolResultMessage(call_id=completion.tool_calls[0].id, content="1,2"))


async def _play(provider: ControlProvider, workspace: Path, task: str = _TASK) -> list[Completion]:
    """The control's steps, each step's calls run in order as the runner runs them."""
    messages: list[Message] = [UserMessage(content=task)]
    steps: list[Completion] = []
    while len(steps) < 40:
        completion = await provider.complete(messages, TOOLS)
        steps.append(completion)
        messages.append(AssistantMessage(text=completion.text, tool_calls=completion.tool_calls))
        for call in completion.tool_calls:
            if call.name == "submit":
                return steps
            said = "1,2" if call.name == "read_file" else _execute(workspace, call)
            messages.append(ToolResultMessage(call_id=call.id, content=said))
    raise AssertionError("the control never answered")


async def _play_as_quick(
    store: LocalBlobStore, book: AgentBook, sha: str, workspace: Path, max_steps: int
) -> list[Completion]:
    """Play the plan `sha` as a control wearing the `quick` agent, in a fresh `workspace`."""
    return await _play_as(store, book, sha, workspace, "quick", "rc", max_steps)


async def _play_as(
    store: LocalBlobStore,
    book: AgentBook,
    sha: str,
    workspace: Path,
    like: str,
    run_id: str,
    max_steps: int,
) -> list[Completion]:
    """Play the plan `sha` as control `run_id` wearing agent `like`, in a fresh `workspace`."""
    control = ControlProvider(
        plan_sha256=sha,
        store=store,
        book=book,
        campaign_id="demo",
        like=like,
        run_id=run_id,
        max_steps=max_steps,
    )
    workspace.mkdir()
    return await _play(control, workspace)


def _ran_plan(store: LocalBlobStore, *, absent: Sequence[str] = ()) -> str:
    """A plan that writes SOLVE, runs it and writes its table with a number moved."""
    code = store.put_bytes(SOLVE.encode())
    table = store.put_bytes(b"gene,fold change\nIL6,12.93\n")
    plan = ControlPlan(
        code=[ControlFile(path="solve.py", sha256=code.sha256, size=code.size, text=True)],
        commands=["python3 solve.py"],
        files=[
            ControlFile(path="results/table.csv", sha256=table.sha256, size=table.size, text=True)
        ],
        absent=list(absent),
        message="Done: see results/.",
    )
    return store.put_bytes(plan.model_dump_json().encode()).sha256


@dataclass
class _Looker(_Worker):
    """An agent that looks three times, writes its script, runs it and answers."""

    _CALLS = (
        ("read_file", {"path": "data/a.csv"}),
        ("list_files", {}),
        ("read_file", {"path": "data/b.csv"}),
        ("write_file", {"path": "solve.py", "content": "print(1)"}),
        ("bash", {"command": "python3 solve.py"}),
        ("submit", {"answer": "ok"}),
    )


def _names(steps: Sequence[Completion]) -> list[list[str]]:
    return [[json.loads(c.arguments).get("path") or c.name for c in s.tool_calls] for s in steps]


async def test_a_control_opens_as_its_kinds_runs_do_and_reports_its_look_alikes_tokens(
    tmp_path: Path,
) -> None:
    """Issue #47: a control opens with as many looks as the campaign's runs of its kind
    of work (with the tools they look with, saying what they say), then does its work one
    call a step; its token counts are those of the agent it looks like, as this runner
    saw its turns; its work stays the plan's (same files left, same answer)."""
    store = LocalBlobStore(tmp_path / "blobs")
    book = AgentBook()
    assert book.profile("demo", "quick") is None, "no run seen: the scripted estimate"
    await _agent_runs(book, _Quick(turns=2), runs=4)
    profile = book.profile("demo", "quick")
    assert profile is not None and profile.steps == (2, 2, 2, 2)
    assert profile.openings == (1, 1, 1, 1), "a look, then the answer"
    assert profile.looks_with(0) == "read_file" and profile.says(0) is False
    await _agent_runs(book, _Looker(), runs=3, agent_id="looker")
    sha = _ran_plan(store, absent=["results/scratch.txt"])
    # Wearing the two-step agent, it works as the runs that ran code did: three looks.
    workspace = tmp_path / "ws"
    steps = await _play_as_quick(store, book, sha, workspace, max_steps=12)
    assert _names(steps) == [
        ["data/a.csv"],
        ["list_files"],
        ["data/a.csv"],
        ["solve.py"],
        ["bash"],
        ["results/table.csv"],
        ["submit"],
    ]
    assert [s.text for s in steps] == [None] * 7, "the runs of its kind say nothing"
    assert (workspace / "results" / "table.csv").read_bytes() == b"gene,fold change\nIL6,12.93\n"
    assert not (workspace / "results" / "scratch.txt").exists()
    # Its tokens are its look-alike's for a request as long (its line through 100 +
    # chars/3), not those of the runs it imitates (one token a turn).
    first = request_chars([UserMessage(content=_TASK)], TOOLS)
    assert abs(steps[0].usage.input_tokens - (100 + first // 3)) <= 2


async def test_a_control_imitates_runs_that_did_its_plans_kind_of_work(tmp_path: Path) -> None:
    """Issue #47: a control's habits are those of the campaign's runs that did its plan's
    kind of work, every agent's pooled where its look-alike did none (an agent whose runs
    never run code has no habits for a control that wears it and does); before any run of
    its kind has answered, its kind's defaults: code drafted and never run is written at
    once."""
    book = AgentBook()
    await _agent_runs(book, _Quick(turns=2), runs=3)
    await _agent_runs(book, _Worker(), runs=3, agent_id="worker")
    await _agent_runs(book, _Looker(), runs=2, agent_id="looker")
    ran, prose = Work(ran=True, wrote=True), Work(ran=False, wrote=False)
    doing = book.profile_for("demo", ran, attached=True)
    assert doing is not None and doing.steps == (6, 6, 5, 5, 5)
    assert doing.openings == (3, 3, 1, 1, 1) and len(doing.turns) == 27
    assert doing.looks_with(0) == "read_file" and doing.looks_with(1) == "list_files"
    answering = book.profile_for("demo", prose, attached=True)
    assert answering is not None and answering.steps == (2, 2, 2)
    assert book.profile_for("demo", Work(ran=False, wrote=True), attached=True) is None
    assert book.profile_for("other", ran, attached=True) is None
    # Every run so far had data attached: a task with none has no habits yet.
    assert book.profile_for("demo", ran, attached=False) is None
    store = LocalBlobStore(tmp_path / "blobs")
    workspace = tmp_path / "ws"
    steps = await _play_as_quick(store, book, _ran_plan(store), workspace, max_steps=12)
    looks = len(steps) - 4
    assert looks in (1, 3), "one of its kind's runs' openings"
    assert [c.name for c in steps[0].tool_calls] == ["read_file"], "it looks as they do"
    assert _names(steps[looks:]) == [["solve.py"], ["bash"], ["results/table.csv"], ["submit"]]
    assert (workspace / "results" / "table.csv").read_bytes() == b"gene,fold change\nIL6,12.93\n"
    # A plan that drafts code and never runs it, before any such run: written at once.
    code = store.put_bytes(SOLVE.encode())
    draft = ControlPlan(
        files=[ControlFile(path="solve.py", sha256=code.sha256, size=code.size, text=True)],
        message="Done: see results/.",
    )
    drafted = ControlProvider(
        plan_sha256=store.put_bytes(draft.model_dump_json().encode()).sha256,
        store=store,
        book=book,
        campaign_id="demo",
        like="worker",
        run_id="rd",
    )
    again = tmp_path / "again"
    again.mkdir()
    steps = await _play(drafted, again)
    assert _names(steps) == [["solve.py"], ["submit"]]
    assert [s.text for s in steps] == ["Drafting the analysis.", None]


class _Writer(_Worker):
    """An agent that writes its script at once, runs it and answers (no look)."""

    _CALLS = (
        ("write_file", {"path": "solve.py", "content": "print(1)"}),
        ("bash", {"command": "python3 solve.py"}),
        ("submit", {"answer": "ok"}),
    )


async def test_a_control_opens_as_its_look_alikes_runs_of_its_kind_do(tmp_path: Path) -> None:
    """Two agents whose runs run code, one looking three times first, one writing at
    once: a control wearing either opens as that one's runs of the plan's kind do, never
    as the other's (pooled, a control wearing the looker wrote at once in some runs, which
    no run of the looker's did: a reader of transcripts told it by that); a control
    wearing an agent with no run of the kind draws from both."""
    book = AgentBook()
    await _agent_runs(book, _Looker(), runs=2, agent_id="looker")
    await _agent_runs(book, _Writer(), runs=2, agent_id="writer")
    await _agent_runs(book, _Quick(turns=2), runs=2)
    ran = Work(ran=True, wrote=True)
    mine = {like: book.profile_for("demo", ran, attached=True, like=like) for like in _LIKES}
    assert {like: p.openings if p else None for like, p in mine.items()} == {
        "looker": (3, 3),
        "writer": (0, 0),
        "quick": (3, 3, 0, 0),
        None: (3, 3, 0, 0),
    }
    store = LocalBlobStore(tmp_path / "blobs")
    sha = _ran_plan(store)
    for like, first in (("looker", {"read_file"}), ("writer", {"write_file"})):
        for r in range(6):  # six runs' draws: each the look-alike's opening
            steps = await _play_as(
                store, book, sha, tmp_path / f"{like}{r}", like, f"{like}-control-{r}", 12
            )
            assert {c.name for c in steps[0].tool_calls} == first, (like, r, _names(steps))
            assert len(steps) == 4 + (3 if like == "looker" else 0), _names(steps)
    drawn = set()
    for r in range(12):
        steps = await _play_as(
            store, book, sha, tmp_path / f"quick{r}", "quick", f"quick-control-{r}", 12
        )
        drawn.add(len(steps) - 4)
    assert drawn == {0, 3}, "no run of its look-alike did the kind: both agents' openings"


_LIKES = ("looker", "writer", "quick", None)


_TURN = Turn(
    index=0,
    think_ms=5.0,
    said=False,
    first_tool="submit",
    calls=1,
    input_chars=400,
    input_tokens=100,
    output_chars=40,
    output_tokens=10,
)
"""One model turn of an agent's run, as the book counts it (`_turn` changes its fields)."""


def _turn(**changes: Any) -> Turn:
    return replace(_TURN, **changes)


def test_the_book_of_agents_turns_stays_bounded_and_apart_by_campaign() -> None:
    """A long campaign does not grow the runner's memory: the oldest turns and runs go."""
    book = AgentBook()
    turn = _turn()
    for r in range(MAX_RUNS + MAX_TURNS):
        book.record("demo", "quick", f"r{r}", turn, last=True)
    profile = book.profile("demo", "quick")
    assert profile is not None
    assert len(profile.turns) == MAX_TURNS and len(profile.steps) == MAX_RUNS
    assert profile.input_tokens(800) == 200, "a ratio where the turns carry no line"
    assert book.profile("other", "quick") is None and book.profile("demo", None) is None


def _turns(book: AgentBook, agent_id: str) -> tuple[Turn, ...]:
    profile = book.profile("demo", agent_id)
    assert profile is not None
    return profile.turns


def test_a_control_thinks_as_its_kinds_latest_turns_less_the_loops_lateness() -> None:
    """Issue #47: an agent's think time is the model's and the runner's load at the time,
    and is timed in the runner's own loop. A control draws from its kind's latest turns
    (not from the campaign's busiest minutes), and asks the loop for that time less the
    delay with which the loop wakes sleepers now (timed in the same loop, the agent's
    time holds that delay once already; a control's sleep would add it again)."""
    book = AgentBook()

    def turn(run: int, think_ms: float) -> Turn:
        return _turn(think_ms=think_ms, run_id=f"r{run}", at=float(run))

    # The busy start of a campaign (900 ms turns), then a quiet runner (20 ms), recorded
    # by two agents whose ids sort against the order of their turns.
    for r in range(40):
        agent = "b-agent" if r % 2 else "a-agent"
        book.record("demo", agent, f"r{r}", turn(r, 900.0 if r < 16 else 20.0), last=True)
    profile = book.profile_for("demo", Work(ran=False, wrote=False), attached=False)
    assert profile is None, "no run said its kind"
    latest = book.profile("demo", "a-agent")
    assert latest is not None and set(latest.think_ms(0)) == {900.0, 20.0}
    merged = [t for a in ("a-agent", "b-agent") for t in _turns(book, a)]
    pooled = Profile(tuple(merged), (1,) * 40)
    assert len(pooled.think_ms(0)) == RECENT_TURNS
    assert set(pooled.think_ms(0)) == {20.0}, "the latest turns, whatever their agent"
    assert set(pooled.think_ms(3)) == {20.0}, "none that far: the latest of any turn"
    # The loop's lateness, measured on the controls' own wakes, is taken off.
    assert book.lateness_ms() == 0.0 and book.sleep_ms(20.0) == 20.0
    for asked, slept in ((10.0, 40.0), (5.0, 35.0), (0.0, 31.0), (12.0, 10.0)):
        book.woke(asked, slept)
    assert book.lateness_ms() == 30.0, "the median of (30, 30, 31, 0)"
    assert book.sleep_ms(50.0) == 20.0 and book.sleep_ms(20.0) == 0.0


def test_a_controls_tokens_are_its_look_alikes_for_calls_of_that_size_and_turn() -> None:
    """Issue #47: a model's count is not one line from a one-line call to a whole
    conversation (short calls carry more framing per character; a later turn's request
    more messages). A control reports what its look-alike reported for calls of about
    that size, at that turn where it has turns enough there; a line through every turn,
    set by the long ones, gave its short calls too few or too many."""

    def turn(index: int, asked: int, asked_tokens: int, wrote: int, wrote_tokens: int) -> Turn:
        return _turn(
            index=index,
            input_chars=asked,
            input_tokens=asked_tokens,
            output_chars=wrote,
            output_tokens=wrote_tokens,
        )

    turns = [turn(0, 1000 + i, 290, 40 + i, 12 + i // 4) for i in range(8)]
    turns += [turn(3, 1000 + i, 330, 6000 + 100 * i, 1440 + 24 * i) for i in range(8)]
    turns += [turn(5, 9000 + i, 2300, 2000 + 10 * i, 560 + 3 * i) for i in range(8)]
    profile = Profile(tuple(turns), (4,))
    assert profile.output_tokens(44) == 13, "as its short calls: 0.3 a character (a line: 48)"
    assert profile.output_tokens(6400) == 1536, "as its long writes: 0.24 (a line: 1553)"
    assert profile.output_tokens(2030) == 569, "as its middling ones: 0.28 (a line: 518)"
    assert profile.input_tokens(1003, 0) == 290 and profile.input_tokens(1003, 3) == 330
    assert 290 < profile.input_tokens(1003, 9) < 330, "no turn that far: both, by size"  # type: ignore[operator]
    assert Profile((), ()).output_tokens(10) is None
    # A model that never wrote a long file says nothing of its count for one: the control
    # then counts as its kind's runs did (a line from its short calls gave 0.3).
    assert profile.output_tokens(60_000) is None and profile.input_tokens(40_000, 5) is None


async def test_a_control_packing_its_work_never_makes_a_step_too_large_to_log(
    tmp_path: Path,
) -> None:
    """A control whose run may take two steps, with a megabyte of figures to write,
    takes more steps rather than log one step over the event limit."""
    store = LocalBlobStore(tmp_path / "blobs")
    book = AgentBook()
    await _agent_runs(book, _Quick(turns=2), runs=2)
    refs = []
    for i in range(5):
        data = bytes([i]) * 200_000 + PNG[:1000]
        info = store.put_bytes(data)
        refs.append(
            ControlFile(path=f"results/fig{i}.png", sha256=info.sha256, size=info.size, text=False)
        )
    plan = ControlPlan(files=refs, message="Figures in results/.")
    sha = store.put_bytes(plan.model_dump_json().encode()).sha256
    workspace = tmp_path / "ws"
    steps = await _play_as_quick(store, book, sha, workspace, max_steps=2)
    assert len(steps) > 2 and any(len(s.tool_calls) > 1 for s in steps), "packed, in parts"
    for step in steps:
        assert sum(len(c.arguments) for c in step.tool_calls) < MAX_EVENT_BYTES // 2
    for ref in refs:
        assert hashlib.sha256((workspace / ref.path).read_bytes()).hexdigest() == ref.sha256


def test_the_rosters_control_agents_run_only_their_declared_runs() -> None:
    """Issue #47: the published roster lists control agents like agents; the runner runs
    them only through their declarations, and runs nothing of a task when it cannot tell
    them (its declarations did not open): running one as an agent would call its model."""
    careful = AgentSpec(agent_id="careful", model="scripted-careful")
    twin = careful.model_copy(update={"agent_id": "cxxxxxx"})
    campaign = CampaignSpec(
        campaign_id="demo", agents=[careful, twin], controls=ControlsSpec(agents=1)
    )
    task = Task(task_id="t1", prompt="p")
    declared = [_declared("t1", "cxxxxxx", 1)]
    skip = control_agents(campaign, declared)
    runs = plan_runs(campaign, task, producer=_PRODUCER, cause="c", control_agents=skip)
    assert [r.agent.agent_id for r in runs] == ["careful"]
    with pytest.raises(ControlsUnopened, match="1 control agents listed, 0 opened"):
        control_agents(campaign, [])


async def test_a_control_answers_in_its_look_alikes_house_style(tmp_path: Path) -> None:
    """Issue #47: a model's answers open with its own label (or none); a control wearing
    that model answers as its look-alike's run on the same task did (the driver reads
    that answer's opening from the log), the plan's substance unchanged. A control that
    kept the reference's label where the model it wears drops it was told by its
    opening. No style known: the plan's message as it is."""
    store = LocalBlobStore(tmp_path / "blobs")
    sha = _plan(store, {}, "Summary:\n\nThe effect is 2.1 (95% CI 1.2-3.0).\nSee above.")
    substance = "The effect is 2.1 (95% CI 1.2-3.0).\nSee above."
    wearing = {
        "dropped": ("", substance),
        "own-label": ("Findings:\n\n", "Findings:\n\n" + substance),
        "no-answer": (None, "Summary:\n\n" + substance),
    }
    for like, (style, answer) in wearing.items():
        control = ControlProvider(
            plan_sha256=sha, store=store, like=like, run_id="rc", house_style=style
        )
        (tmp_path / like).mkdir()
        steps = await _play(control, tmp_path / like)
        [submit] = [c for c in steps[-1].tool_calls if c.name == "submit"]
        assert json.loads(submit.arguments)["answer"] == answer, like


@dataclass
class _Lister(_Worker):
    """An agent that lists the workspace and answers."""

    _CALLS = (("list_files", {}), ("submit", {"answer": "ok"}))


async def test_a_control_looks_as_runs_on_tasks_like_its_own_do(tmp_path: Path) -> None:
    """Issue #47: agents look at the data they were given, and around the workspace when
    they were given none; a control on a task with data looks at it even where the
    campaign's runs without data (listing the workspace) are the more numerous."""
    book = AgentBook()
    bare = "Task id: t2\nNo files are attached."
    await _agent_runs(book, _Lister(), runs=5, agent_id="lister", task=bare)
    await _agent_runs(book, _Quick(turns=2), runs=2)  # reads data/a.csv first
    store = LocalBlobStore(tmp_path / "blobs")
    sha = _plan(store, {}, "The effect is 2.1.")
    for task, first in ((_TASK, "read_file"), (bare, "list_files")):
        control = ControlProvider(
            plan_sha256=sha, store=store, book=book, campaign_id="demo", like="quick", run_id="r"
        )
        workspace = tmp_path / first
        workspace.mkdir()
        steps = await _play(control, workspace, task)
        assert [[c.name for c in s.tool_calls] for s in steps] == [[first], ["submit"]]
        assert steps[0].text is None, "they say nothing as they look"


def test_a_tasks_attachment_lines_are_read_within_a_bound() -> None:
    """The task's text is a publisher's: its attachment lines are read by RE2 from the
    first megabyte of the runner's first message, whatever comes after."""
    listed = "Task id: t1\nFiles:\n- /workspace/data/a.csv (12 bytes)\n"
    assert attachments([UserMessage(content=listed)]) == ["data/a.csv"]
    hostile = "- /workspace/" + "a" * 2_000_000 + "\n- /workspace/data/late.csv (3 bytes)\n"
    assert attachments([UserMessage(content=hostile)]) == [], "past the bound: unread"
    assert attachments([UserMessage(content="- /workspace/x (\n" * 50_000)]) == ["x"] * 50_000


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _random_id(prefix: str, n: int, seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest() * 2
    return prefix + "".join(_BASE62[b % 62] for b in digest[:n])


@dataclass
class _Caller(_Quick):
    """`_Quick` with its API's own tool-call ids: `id_style` names the shape."""

    id_style: str = "openai"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        done = await super().complete(messages, tools, params)
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        seed = f"{request_chars(messages, tools)}-{turn}"
        make = {
            "openai": lambda i: _random_id("call_", 24, f"{seed}-{i}"),
            "anthropic": lambda i: _random_id("toolu_01", 22, f"{seed}-{i}"),
            "counted": lambda i: f"call_{turn}_{i}",
            "huge": lambda i: "x" * 100_000,
        }[self.id_style]
        calls = tuple(c.model_copy(update={"id": make(i)}) for i, c in enumerate(done.tool_calls))
        return done.model_copy(update={"tool_calls": calls})


def _ids(steps: Sequence[Completion]) -> list[str]:
    return [c.id for s in steps for c in s.tool_calls]


async def test_a_controls_tool_call_ids_are_shaped_as_its_look_alikes(tmp_path: Path) -> None:
    """Issue #47: a model API names each tool call its own way (OpenAI `call_` and 24
    random letters and digits, Anthropic `toolu_01` and 22), and every step event logs
    the ids: a control calling its calls `call_0_0` while the model it wears says
    `call_Xy3…` is told by any reader of the log. Its ids take its look-alike's shape:
    what every one of its ids keeps (a prefix, a turn counted) kept, the rest drawn from
    the letters or digits found there; each id its own."""
    store = LocalBlobStore(tmp_path / "blobs")
    sha = _ran_plan(store)
    for style in ("openai", "anthropic", "counted"):
        book = AgentBook()
        agent = _Caller(turns=3, id_style=style)
        await _agent_runs(book, agent, runs=4, agent_id=style)
        seen = [c for t in _turns(book, style) for c in t.call_ids]
        control = ControlProvider(
            plan_sha256=sha, store=store, book=book, campaign_id="demo", like=style, run_id="r"
        )
        (tmp_path / style).mkdir()
        ids = _ids(await _play(control, tmp_path / style))
        assert len(set(ids)) == len(ids), (style, ids)
        for i, got in enumerate(ids):
            if style == "counted":  # as counted where it reached, drawn alike beyond
                assert got == f"call_{i}_0" if i < 3 else re.fullmatch(r"call_\d_0", got), ids
                continue
            prefix, n = ("call_", 24) if style == "openai" else ("toolu_01", 22)
            assert got.startswith(prefix) and len(got) == len(prefix) + n, (style, got)
            rest = got[len(prefix) :]
            assert set(rest) <= set(_BASE62), got
            assert any(c.isalpha() for c in rest) and any(c.isdigit() for c in rest), got
        if style != "counted":
            assert not set(ids) & set(seen), "never an id the look-alike used"
    # A model's ids are its own output: one that answers huge ids leaves nothing of them.
    book = AgentBook()
    await _agent_runs(book, _Caller(turns=3, id_style="huge"), runs=2, agent_id="huge")
    assert all(t.call_ids == () for t in _turns(book, "huge"))
    # No agent seen yet: an OpenAI-shaped id, as most endpoints answer.
    bare = ControlProvider(plan_sha256=sha, store=store, run_id="r0")
    (tmp_path / "bare").mkdir()
    for got in _ids(await _play(bare, tmp_path / "bare")):
        assert got.startswith("call_") and len(got) == 29 and set(got[5:]) <= set(_BASE62), got


def test_a_controls_oversleeping_is_taken_off_its_next_turns() -> None:
    """A sleep is never shorter than the loop's lateness, so a control drawing short turns
    slept longer on the whole than the agents' turns it drew from (its runs were told by
    their durations): what one turn overslept is taken off the next ones, and a turn that
    slept short is made up."""
    pace = Pace()
    draws, slept = [2.0, 3.0, 40.0, 5.0], []
    for drawn in draws:
        target = pace.target_ms(drawn)
        late = 8.0 if target < 10 else 1.0  # the loop wakes a short sleep late
        slept.append(target + late)
        pace.slept(drawn, slept[-1])
    assert slept[:2] == [10.0, 8.0], "8 ms overslept, more than the next draw: none asked"
    assert slept[2] == 40.0 - (8.0 + 5.0) + 1.0, "owed 13 ms: taken off the long one"
    assert abs(sum(slept) - sum(draws)) <= 8.0, "on the whole, as drawn (less one lateness)"
    short = Pace()
    short.slept(30.0, 20.0)
    assert short.target_ms(10.0) == 20.0, "a turn that slept short is made up"
