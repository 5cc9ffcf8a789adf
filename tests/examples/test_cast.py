"""The bundled scripted cast's deal: between them the agents leave every kind of work the
controls plant (issue #47), each agent in its own character."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from assay_testing.demo._work import DECKS, Bundle, Kind

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
