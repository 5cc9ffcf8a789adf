"""The bundled scripted cast's deal: between them the agents leave every kind of work the
controls plant (issue #47), each agent in its own character, each run drawing its own."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from assay.providers import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from assay_testing.demo import agent_scripts
from assay_testing.demo._work import DECKS, Bundle, Kind
from assay_testing.scripted import Script, ScriptReply, ScriptRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VARIANT_KINDS = {
    "reference": Kind.COMPLETE,
    "altered_numbers": Kind.MISREPORTS,
    "files_removed": Kind.LOSES_FILES,
    "not_executed": Kind.NEVER_RUNS,
    "prose_only": Kind.PROSE_ONLY,
}
"""The kind of agents' work each control variant plants."""


def _deal(bundle: Bundle) -> dict[str, Counter[Kind]]:
    out: dict[str, Counter[Kind]] = {}
    for model in DECKS:
        works = [bundle.work(model, t) for t in bundle.tasks]
        out[model] = Counter(w.kind for w in works if w is not None)
    return out


def test_every_control_variant_has_agents_runs_of_its_kind() -> None:
    bundle = Bundle(EXAMPLES)
    assert len(bundle.tasks) == 8
    dealt = _deal(bundle)
    every = sum(dealt.values(), Counter[Kind]())
    assert sum(every.values()) == 3 * 8, "no bundled task falls back on the classic script"
    for variant, kind in VARIANT_KINDS.items():
        assert every[kind] >= 3, (variant, every)


def test_each_agent_keeps_its_character() -> None:
    dealt = _deal(Bundle(EXAMPLES))
    careful, overclaimer, empty = (
        dealt[f"scripted-{a}"] for a in ("careful", "overclaimer", "empty")
    )
    assert careful[Kind.COMPLETE] > careful.total() / 2 and set(careful) <= {
        Kind.COMPLETE,
        Kind.MISREPORTS,
    }
    assert set(overclaimer) <= {Kind.NEVER_RUNS, Kind.LOSES_FILES}, "it always cites unmade files"
    assert set(empty) == {Kind.PROSE_ONLY}, "it never leaves a file"


def test_a_misreport_moves_numbers_and_a_lost_file_is_one_the_answer_cites() -> None:
    bundle = Bundle(EXAMPLES)
    reference = {t: (EXAMPLES / "references" / t / "message.md").read_text() for t in bundle.tasks}
    for model in DECKS:
        for task in bundle.tasks:
            work = bundle.work(model, task)
            assert work is not None
            if work.kind is Kind.MISREPORTS:
                assert work.rewrites and work.message != reference[task], task
            if work.kind is Kind.LOSES_FILES:
                assert work.removes, task
                assert any(Path(p).name in work.message for p in work.removes), task
            if work.kind in (Kind.COMPLETE, Kind.NEVER_RUNS, Kind.PROSE_ONLY):
                assert work.message == reference[task] and not work.rewrites, task


def test_a_task_without_a_reference_gets_the_classic_script(tmp_path: Path) -> None:
    (tmp_path / "references" / "t1").mkdir(parents=True)
    (tmp_path / "references" / "t1" / "solve.py").write_text("print(1)\n")
    bundle = Bundle(tmp_path)
    assert bundle.kind("scripted-careful", "t1") is Kind.CLASSIC
    assert bundle.work("scripted-careful", "t1") is None
    assert bundle.work("scripted-empty", "elsewhere") is None


def test_each_later_run_on_a_task_draws_its_own_kind_of_work() -> None:
    """Issue #47: a sampled model does not do the same work on every run of a task; a
    cast that did would leave each task's controls of other kinds alone in their shape
    there. The first run on a task takes its dealt card, each later one a card drawn for
    that attempt, and over a few attempts each agent's every kind shows up."""
    bundle = Bundle(EXAMPLES)
    for model, deck in DECKS.items():
        for task in bundle.tasks:
            kinds = [bundle.kind(model, task, a) for a in range(12)]
            assert kinds[0] is bundle.kind(model, task), "the first run keeps the deal"
            assert kinds == [bundle.kind(model, task, a) for a in range(12)], "drawn, not random"
            assert set(kinds) <= set(deck)
        over = {bundle.kind(model, t, a) for t in bundle.tasks for a in range(1, 4)}
        assert over == set(deck), model


def _request(model: str, messages: list[Message], turn: int) -> ScriptRequest:
    body = {"model": model, "messages": [m.model_dump(mode="json") for m in messages]}
    return ScriptRequest(
        api="openai", model=model, messages=tuple(messages), tools=(), turn=turn, body=body
    )


def _conversation(script: Script, model: str, task: str) -> list[str]:
    """The calls of one run of `script` on `task`, to its answer (tool results made up)."""
    messages: list[Message] = [UserMessage(content=f"Task id: {task}\n\nDo it.")]
    names: list[str] = []
    for turn in range(12):
        reply = script(_request(model, messages, turn))
        assert isinstance(reply, ScriptReply)
        calls = tuple(
            ToolCall(id=c.id or f"x{turn}", name=c.name, arguments=json.dumps(c.arguments))
            for c in reply.tool_calls
        )
        messages.append(AssistantMessage(text=reply.text, tool_calls=calls))
        names += [c.name for c in calls]
        if any(c.name == "submit" for c in calls):
            return names
        messages += [ToolResultMessage(call_id=c.id, content="ok") for c in calls]
    raise AssertionError("never answered")


def test_a_runs_later_turns_keep_the_kind_its_attempt_drew() -> None:
    """The script knows which attempt a conversation is by its first call's id (one it
    gave, an API-shaped id of its own per attempt), so every turn of a run does the work
    of the kind that run drew, whatever runs interleave."""
    model, task = "scripted-careful", "messy_export_cleanup"
    bundle = Bundle(EXAMPLES)
    kinds = [bundle.work(model, task, a) for a in range(3)]
    assert [k.kind if k else None for k in kinds] == [
        Kind.COMPLETE,
        Kind.COMPLETE,
        Kind.MISREPORTS,
    ]
    script = agent_scripts(EXAMPLES, sampled=True)[model]
    runs = [_conversation(script, model, task) for _ in range(3)]
    rewrites = len(kinds[2].rewrites) if kinds[2] else 0
    assert runs[0] == runs[1] == ["list_files", "write_file", "bash", "submit"]
    assert runs[2] == ["list_files", "write_file", "bash", *["write_file"] * rewrites, "submit"]
    assert rewrites > 0
    # Unsampled (the demo's default), every run does the kind dealt the task, whatever
    # order runs arrive in: a campaign's report is the same on a cluster and in one process.
    dealt = agent_scripts(EXAMPLES)[model]
    assert [_conversation(dealt, model, task) for _ in range(3)] == [runs[0]] * 3
