"""Control answers: the reference and its known-bad variants, from hostile folders too."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from assay.campaign import campaign_warnings, load_campaign
from assay.controls import plan_controls
from assay.security.controls import ControlsKey, SealBroken
from assay.store import LocalBlobStore
from assay.tasks import (
    TaskDraft,
    build_task,
    control_answers,
    load_task_dir,
    load_tasks,
    read_control_folder,
)
from assay.tasks._controls import MAX_CONTROL_FILES, derive
from assay_judge.rules.checks import reference_check
from assay_schemas import (
    DERIVED_VARIANTS,
    KNOWN_GOOD,
    AgentSpec,
    CampaignSpec,
    ControlDetails,
    ControlPlan,
    ControlsSpec,
    FileRef,
    NumberNearCheck,
    Producer,
    TaskInputError,
    TaskSubmitted,
    derive_id,
)

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "examples" / "references"
VARIANTS = [KNOWN_GOOD, *DERIVED_VARIANTS]
PRODUCER = Producer(service="test", version="0")


def _bundled(task_id: str):  # type: ignore[no-untyped-def]
    draft = next(
        d
        for d in load_tasks(ROOT / "examples" / "tasks", max_bytes=5_000_000)
        if d.task_id == task_id
    )
    return build_task(draft.fields, [])


def _answers(task_id: str) -> dict[str, object]:
    task = _bundled(task_id)
    got = control_answers(
        task, VARIANTS, reference=REFERENCES / task_id, authors=None, max_bytes=1_000_000
    )
    return {a.variant or "": a for a in got}


@pytest.mark.parametrize("task_id", sorted(p.name for p in REFERENCES.iterdir()))
def test_every_bundled_reference_makes_every_variant(task_id: str) -> None:
    answers = _answers(task_id)
    assert sorted(answers) == sorted(VARIANTS)
    ref = answers[KNOWN_GOOD].answer  # type: ignore[attr-defined]
    assert ref.message == (REFERENCES / task_id / "message.md").read_text()
    assert answers[KNOWN_GOOD].expected == "pass"  # type: ignore[attr-defined]
    assert all(a.expected == "fail" for v, a in answers.items() if v != KNOWN_GOOD)  # type: ignore[attr-defined]
    assert answers["prose_only"].answer.files == {}  # type: ignore[attr-defined]
    kept = answers["not_executed"].answer.files  # type: ignore[attr-defined]
    assert kept and all(p.endswith(".py") for p in kept)
    removed = set(ref.files) - set(answers["files_removed"].answer.files)  # type: ignore[attr-defined]
    assert removed and all(p in ref.message or p.rsplit("/", 1)[-1] in ref.message for p in removed)
    # Deterministic: derived again, byte for byte the same.
    assert _answers(task_id) == answers


@pytest.mark.parametrize("task_id", sorted(p.name for p in REFERENCES.iterdir()))
def test_altered_numbers_leave_every_number_check_the_reference_passes(task_id: str) -> None:
    task = _bundled(task_id)
    answers = _answers(task_id)
    ref, alt = answers[KNOWN_GOOD].answer, answers["altered_numbers"].answer  # type: ignore[attr-defined]
    assert set(alt.files) == set(ref.files), "files kept, so the claims look backed"
    assert alt.message != ref.message
    checked = 0
    for check in task.reference_checks:
        if not isinstance(check, NumberNearCheck) or check.path not in ref.files:
            continue
        before = re.search(check.pattern, ref.files[check.path].decode())
        after = re.search(check.pattern, alt.files[check.path].decode())
        if before is None or abs(float(before.group(1)) - check.expected) > check.tolerance:
            continue
        checked += 1
        assert after is not None
        assert abs(float(after.group(1)) - check.expected) > check.tolerance, check.name
    assert checked or not any(isinstance(c, NumberNearCheck) for c in task.reference_checks)


_NUM = r"\d+(?:\.\d+)?"
# Method constants, found here independently of the derivation: confidence levels and
# error rates as percentages, formula bases and exponents, sample sizes.
_CONSTANTS = (
    re.compile(rf"{_NUM}\s*%\s*(?:CI|confidence|credible|power|FDR)", re.IGNORECASE),
    re.compile(rf"(?<![\w.]){_NUM}\s*\^|\^\s*-?{_NUM}"),
    re.compile(rf"\b[nN]\s*=\s*{_NUM}"),
    re.compile(rf"\b{_NUM}\s+vs\.?\s+{_NUM}\b"),
)
_P_VALUE = re.compile(rf"\bp(?:-value)?\s*(?:=|<|≤)\s*({_NUM}(?:[eE]-?\d+)?)", re.IGNORECASE)
_P_COLUMN = re.compile(
    r"^(?:p|p[ _.-]?val(?:ue)?|p[ _.-]?adj(?:usted)?|padj|fdr|q[ _.-]?val(?:ue)?|holm.*|.*\bp\b.*)$",
    re.IGNORECASE,
)
_TABLE_CI = re.compile(rf"\|\s*(-?{_NUM})\s*\|\s*(-?{_NUM})\s*[–-]\s*(-?{_NUM})\s*\|")
_TOKEN = re.compile(rf"(?<![\w.])-?{_NUM}(?:[eE][-+]?\d+)?(?![\w])")


def _texts(folder: object) -> dict[str, str]:
    files, message = folder  # type: ignore[misc]
    out = {"(message)": message}
    for path, data in files.items():
        if path.endswith((".md", ".csv", ".tsv", ".txt", ".json")):
            out[path] = data.decode("utf-8")
    return out


def _p_values(path: str, text: str) -> list[float]:
    found = [float(m.group(1)) for m in _P_VALUE.finditer(text)]
    if path.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        for col, name in enumerate(rows[0] if rows else []):
            if _P_COLUMN.match(name.strip()):
                found += [
                    float(r[col])
                    for r in rows[1:]
                    if col < len(r) and re.fullmatch(_NUM + r"(?:[eE]-?\d+)?", r[col])
                ]
    return found


@pytest.mark.parametrize("task_id", sorted(p.name for p in REFERENCES.iterdir()))
def test_altered_numbers_keep_method_constants_stay_plausible_and_fail_the_checks(
    task_id: str,
) -> None:
    """Issue #47: only reported results move (same sign, same order of magnitude, p in
    [0, 1], intervals still around their estimates); confidence levels, formula bases,
    sample sizes and the numbers the task states stay; the reference checks still fail."""
    task = _bundled(task_id)
    answers = _answers(task_id)
    ref, alt = answers[KNOWN_GOOD].answer, answers["altered_numbers"].answer  # type: ignore[attr-defined]
    stated = set(
        _TOKEN.findall(" ".join([task.prompt, task.expected_output or "", *task.constraints]))
    )
    before, after = _texts(ref), _texts(alt)
    windows = [
        (c.expected, c.tolerance) for c in task.reference_checks if isinstance(c, NumberNearCheck)
    ]
    moved = 0
    for path, text in before.items():
        new = after[path]
        for pattern in _CONSTANTS:
            assert sorted(pattern.findall(new)) == sorted(pattern.findall(text)), (path, pattern)
        old_tokens, new_tokens = _TOKEN.findall(text), _TOKEN.findall(new)
        assert len(old_tokens) == len(new_tokens), path
        for a, b in zip(old_tokens, new_tokens, strict=True):
            x, y = float(a), float(b)
            if a.lstrip("-") in stated:
                assert a == b, f"{path}: {a} is stated in the task"
            if x == y:
                continue
            moved += 1
            assert (x > 0) == (y > 0) and (x < 0) == (y < 0), (path, a, b)
            # A value in a check's window that spans more than an order of magnitude
            # around it (p in [0, 0.01], p in [0.05, 1]) must jump past the window.
            wide = any(
                abs(x - e) <= t and (e - t <= abs(x) / 10 or e + t >= 10 * abs(x))
                for e, t in windows
            )
            if x != 0 and not wide:
                assert abs(math.log10(abs(y) / abs(x))) <= 1.0, (path, a, b)
        assert all(0.0 <= p <= 1.0 for p in _p_values(path, new)), (path, _p_values(path, new))
        for m in _TABLE_CI.finditer(text):
            est, lo, hi = (float(g) for g in m.groups())
            if lo <= est <= hi:
                at = _TABLE_CI.search(new, pos=m.start() - 40 if m.start() > 40 else 0)
                assert at is not None
                e2, l2, h2 = (float(g) for g in at.groups())
                assert l2 <= e2 <= h2, (path, m.group(0), at.group(0))
    assert moved, "some reported result moved"
    refs = [FileRef(path=p, sha256="0" * 64, size=len(d)) for p, d in ref.files.items()]
    alts = [FileRef(path=p, sha256="0" * 64, size=len(d)) for p, d in alt.files.items()]
    good = [reference_check(c, refs, ref.files, 1.0) for c in task.reference_checks]
    bad = [reference_check(c, alts, alt.files, 1.0) for c in task.reference_checks]
    assert all(c.passed for c in good), [c for c in good if not c.passed]
    assert not all(c.passed for c in bad), ("the altered answer passes every reference check", bad)


def test_numbers_inside_names_are_kept() -> None:
    task = _bundled("qpcr_ddct")
    ref = read_control_folder("qpcr_ddct", REFERENCES / "qpcr_ddct", max_bytes=1_000_000)
    alt = derive(task, ref._replace(message="IL6 and log2FC x_1: 8.62, n = 3"), "altered_numbers")
    assert alt is not None
    assert alt.message.startswith("IL6 and log2FC x_1: ") and "8.62" not in alt.message
    assert alt.message.endswith("n = 3"), "a sample size is a method constant"


def test_a_variant_the_reference_cannot_make_is_left_out(tmp_path: Path) -> None:
    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "message.md").write_text("No files, no numbers.")
    task = _bundled("protocol_review")
    got = control_answers(task, VARIANTS, reference=ref, authors=None, max_bytes=1000)
    assert [a.variant for a in got] == [KNOWN_GOOD]


def test_author_folders_are_known_bad_controls(tmp_path: Path) -> None:
    authors = tmp_path / "controls"
    (authors / "wrong_gene").mkdir(parents=True)
    (authors / "wrong_gene" / "message.md").write_text("MYC is up 40-fold.")
    (authors / "wrong_gene" / "results").mkdir()
    (authors / "wrong_gene" / "results" / "summary.md").write_text("MYC: fold change = 40")
    got = control_answers(
        _bundled("qpcr_ddct"), VARIANTS, reference=None, authors=authors, max_bytes=1000
    )
    assert [(a.variant, a.folder, a.expected) for a in got] == [(None, "wrong_gene", "fail")]
    assert got[0].answer.files == {"results/summary.md": b"MYC: fold change = 40"}


def _folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "message.md").write_text("see results/")
    for name, data in files.items():
        (ref / name).parent.mkdir(parents=True, exist_ok=True)
        (ref / name).write_bytes(data)
    return ref


def test_hostile_reference_folders_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret")
    ref = _folder(tmp_path, {"results/a.csv": b"1,2"})
    os.symlink(outside, ref / "results" / "leak.txt")
    with pytest.raises(TaskInputError, match="symbolic link"):
        read_control_folder("t", ref, max_bytes=1000)
    (ref / "results" / "leak.txt").unlink()
    (ref / "big.bin").write_bytes(b"x" * 2000)
    with pytest.raises(TaskInputError, match="over the limit"):
        read_control_folder("t", ref, max_bytes=1000)
    (ref / "big.bin").unlink()
    for i in range(MAX_CONTROL_FILES + 1):
        (ref / f"f{i}.txt").write_text("1")
    with pytest.raises(TaskInputError, match="more than"):
        read_control_folder("t", ref, max_bytes=1000)


def test_a_reference_without_message_or_linked_is_refused(tmp_path: Path) -> None:
    ref = tmp_path / "reference"
    ref.mkdir()
    with pytest.raises(TaskInputError, match=r"message\.md"):
        read_control_folder("t", ref, max_bytes=1000)
    (ref / "message.md").write_text("x" * 300_000)
    with pytest.raises(TaskInputError, match="over"):
        read_control_folder("t", ref, max_bytes=1000)
    os.symlink(ref, tmp_path / "linked")
    with pytest.raises(TaskInputError, match="links"):
        read_control_folder("t", tmp_path / "linked", max_bytes=1000)
    authors = tmp_path / "controls"
    (authors / "bad name!").mkdir(parents=True)
    with pytest.raises(TaskInputError, match="bad name"):
        control_answers(
            _bundled("qpcr_ddct"), VARIANTS, reference=None, authors=authors, max_bytes=1000
        )


def test_altering_numbers_is_linear_on_hostile_text(tmp_path: Path) -> None:
    task = _bundled("qpcr_ddct")
    for text in ("1." * 200_000, "1" * 400_000 + "a", "-1e-1e-1e" * 40_000, "9" * 300 + ".5e999"):
        ref = read_control_folder("qpcr_ddct", REFERENCES / "qpcr_ddct", max_bytes=1_000_000)
        started = time.perf_counter()
        alt = derive(task, ref._replace(message=text), "altered_numbers")
        assert time.perf_counter() - started < 5.0
        assert alt is not None
    # The claims a message makes, at its longest (50,000 characters), on a loaded machine.
    ref = read_control_folder("qpcr_ddct", REFERENCES / "qpcr_ddct", max_bytes=1_000_000)
    for text in ("a.bc " * 10_000, "a." * 25_000, "/" * 50_000):
        started = time.perf_counter()
        derive(task, ref._replace(message=text), "files_removed")
        assert time.perf_counter() - started < 5.0


def test_task_folders_keep_control_answers_out_of_attachments(tmp_path: Path) -> None:
    task = tmp_path / "t1"
    (task / "reference" / "results").mkdir(parents=True)
    (task / "prompt.md").write_text("Analyse the data.")
    (task / "data.csv").write_text("a\n1\n")
    (task / "reference" / "message.md").write_text("done")
    (task / "reference" / "results" / "out.csv").write_text("x")
    (task / "controls" / "bad").mkdir(parents=True)
    (task / "controls" / "bad" / "message.md").write_text("made up")
    draft = load_task_dir(task, max_bytes=1000)
    assert [a.path for a in draft.attachments] == ["data.csv"]
    assert draft.folder == task
    # A data folder that happens to be called reference/ (no message.md) stays an input.
    (task / "reference" / "message.md").unlink()
    draft = load_task_dir(task, max_bytes=1000)
    assert [a.path for a in draft.attachments] == ["data.csv", "reference/results/out.csv"]


# --- the contracts ----------------------------------------------------------------------


def _declared(**fields: object) -> ControlDetails:
    base: dict[str, object] = {
        "campaign_id": "c",
        "task_id": "t",
        "control_run_id": "r1",
        "agent_id": "a1",
        "variant": "altered_numbers",
        "expected": "fail",
        "plan_sha256": "a" * 64,
    }
    return ControlDetails.model_validate({**base, **fields})


def test_a_control_declaration_is_consistent() -> None:
    assert _declared().kind == "altered_numbers"
    assert _declared(variant=None, folder="mine").kind == "author:mine"
    for bad in (
        {"variant": None},
        {"folder": "mine"},
        {"variant": "reference", "expected": "fail"},
        {"expected": "pass"},
        {"folder": "../x", "variant": None},
        {"plan_sha256": "zz"},
    ):
        with pytest.raises(ValueError):
            _declared(**bad)


def test_no_agent_spec_can_name_a_control_or_carry_a_plan() -> None:
    """Issue #47: a run request reads like any agent's; the plan is only declared."""
    with pytest.raises(ValueError):
        AgentSpec.model_validate({"agent_id": "a", "kind": "control", "model": "control"})
    with pytest.raises(ValueError):
        AgentSpec.model_validate({"agent_id": "a", "model": "m", "control_plan": "b" * 64})
    spec = CampaignSpec(
        campaign_id="c", agents=[AgentSpec(agent_id="a", model="m")], controls=ControlsSpec()
    )
    assert spec.controls is not None and spec.controls.variants == VARIANTS
    with pytest.raises(ValueError):
        ControlsSpec(variants=["made_up"])  # type: ignore[list-item]


def test_a_plan_writes_bytes_in_chunks_under_the_argument_limit() -> None:
    plan = ControlPlan.model_validate(
        {
            "message": "m",
            "files": [
                {"path": "a.txt", "sha256": "a" * 64, "size": 500_000, "text": True},
                {"path": "b.png", "sha256": "b" * 64, "size": 130_001, "text": False},
                {"path": "c.bin", "sha256": "c" * 64, "size": 0, "text": False},
            ],
        }
    )
    assert [tuple(a) for a in plan.actions()] == [
        (0, 0, 500_000),
        (1, 0, 60_000),
        (1, 60_000, 60_000),
        (1, 120_000, 10_001),
        (2, 0, 0),
    ]


def _two_bundled_tasks(campaign_id: str) -> tuple[list[TaskDraft], list[TaskSubmitted]]:
    """Two of the bundled example tasks (qpcr_ddct, survey_paired): their drafts, and each
    submitted to the campaign."""
    drafts = [
        d
        for d in load_tasks(ROOT / "examples" / "tasks", max_bytes=5_000_000)
        if d.task_id in ("qpcr_ddct", "survey_paired")
    ]
    return drafts, [
        TaskSubmitted(
            event_id=f"t{i}",
            campaign_id=campaign_id,
            task=build_task(d.fields, []),
            producer=PRODUCER,
        )
        for i, d in enumerate(drafts)
    ]


def _planned(tmp_path: Path, secret: bytes) -> list[ControlDetails]:
    campaign = load_campaign(ROOT / "examples" / "campaign.yaml")
    campaign = campaign.model_copy(update={"controls": ControlsSpec(references=str(REFERENCES))})
    drafts, tasks = _two_bundled_tasks(campaign.campaign_id)
    store = LocalBlobStore(tmp_path / "blobs")
    sealed = plan_controls(store, campaign, drafts, tasks, PRODUCER, secret=secret)
    return [ControlsKey(secret).open(d) for d in sealed]


def test_a_plan_that_runs_its_code_writes_only_what_the_run_does_not_make(
    tmp_path: Path,
) -> None:
    """Issue #47: a control that runs the reference's code knows from its plan which
    outputs the run makes as the answer leaves them (`made`), so it never checks them
    (no agent hashes its outputs): the reference writes none of them, altered numbers
    rewrite only the text they move (the figures are the code's), and claimed files
    removed are removed after the run."""
    details = _planned(tmp_path, b"m" * 32)
    store = LocalBlobStore(tmp_path / "blobs")
    plans = {
        (d.task_id, d.kind): ControlPlan.model_validate_json(store.get_bytes(d.plan_sha256))
        for d in details
    }
    for task_id in ("qpcr_ddct", "survey_paired"):
        reference = plans[(task_id, "reference")]
        assert reference.commands == ["python3 solve.py"]
        assert reference.made == [f.path for f in reference.files] and reference.actions() == []
        altered = plans[(task_id, "altered_numbers")]
        figures = [f.path for f in altered.files if not f.text]
        assert figures and altered.made == figures, "only the figures are left as run"
        assert all(f.text for f in altered.files if f.path not in altered.made)
        removed = plans[(task_id, "files_removed")]
        assert removed.files == [] and removed.made == [] and removed.absent
        for kind in ("not_executed", "prose_only"):
            assert not plans[(task_id, kind)].commands and not plans[(task_id, kind)].made
    with pytest.raises(ValueError, match="runs no command"):
        ControlPlan(files=reference.files, made=reference.made, message="m")
    with pytest.raises(ValueError, match="among its files"):
        ControlPlan(commands=["python3 solve.py"], made=["results/other.csv"], message="m")


def test_control_identities_are_salted_per_deployment_and_named_like_the_campaigns_agents(
    tmp_path: Path,
) -> None:
    """Issue #47: a control's agent id and run id cannot be recomputed from public names
    (another deployment, another secret: other ids and another order); its model name and
    family are those of one of the campaign's own agents."""
    campaign = load_campaign(ROOT / "examples" / "campaign.yaml")
    ours = _planned(tmp_path, b"a" * 32)
    again = _planned(tmp_path, b"a" * 32)
    theirs = _planned(tmp_path, b"b" * 32)
    assert [r.control_run_id for r in ours] == [r.control_run_id for r in again]
    assert {r.control_run_id for r in ours}.isdisjoint({r.control_run_id for r in theirs})
    assert [r.slot for r in ours] != [r.slot for r in theirs]
    public = {
        "a" + derive_id("control", campaign.campaign_id, r.task_id or "", r.kind)[:15] for r in ours
    }
    assert public.isdisjoint({r.agent_id for r in ours})
    agents = {a.agent_id: a for a in campaign.agents}
    for d in ours:
        assert d.agent_id is not None and d.like in agents and d.agent_id not in agents
        like = agents[d.like].agent_id
        # Shaped like the agent it looks like: its length and first character.
        assert (len(d.agent_id), d.agent_id[0]) == (len(like), like[0])
    assert len({d.like for d in ours}) > 1, "drawn, not one agent for all"
    # As many control agents as kinds, over every task (as an agent runs every task).
    assert len({d.agent_id for d in ours}) == len({d.kind for d in ours})


@pytest.mark.parametrize("secret", [bytes([i]) * 32 for i in range(6)])
def test_every_agent_is_worn_by_as_many_control_agents_give_or_take_one(
    tmp_path: Path, secret: bytes
) -> None:
    """Issue #47: look-alikes are dealt from salted decks, never drawn independently
    (five control agents over three agents once all wore the one that never runs code)."""
    worn = Counter(d.like for d in {d.agent_id: d for d in _planned(tmp_path, secret)}.values())
    agents = load_campaign(ROOT / "examples" / "campaign.yaml").agents
    assert set(worn) == {a.agent_id for a in agents}
    assert max(worn.values()) - min(worn.values()) <= 1, worn


def test_each_kind_wears_every_control_agent_in_turn(tmp_path: Path) -> None:
    """Issue #47: which kind a control agent plays turns with the task, so over the bundled
    tasks every kind (the reference included) wears every control agent's look, as often
    as the others give or take one; on each task each control agent plays one kind. (One
    control agent per kind tied a kind to one look for the whole campaign.)"""
    campaign = load_campaign(ROOT / "examples" / "campaign.yaml")
    campaign = campaign.model_copy(update={"controls": ControlsSpec(references=str(REFERENCES))})
    drafts = load_tasks(ROOT / "examples" / "tasks", max_bytes=5_000_000)
    tasks = [
        TaskSubmitted(
            event_id=f"t{i}",
            campaign_id=campaign.campaign_id,
            task=build_task(d.fields, []),
            producer=PRODUCER,
        )
        for i, d in enumerate(drafts)
    ]
    secret = b"r" * 32
    sealed = plan_controls(
        LocalBlobStore(tmp_path / "blobs"), campaign, drafts, tasks, PRODUCER, secret=secret
    )
    details = [ControlsKey(secret).open(d) for d in sealed]
    agents = {d.agent_id for d in details}
    kinds = {d.kind for d in details}
    assert len(drafts) >= len(agents) == len(kinds) > 1
    for task in {d.task_id for d in details}:
        on_task = [d.agent_id for d in details if d.task_id == task]
        assert len(set(on_task)) == len(on_task), "one kind per control agent on a task"
    for kind in kinds:
        worn = Counter(d.agent_id for d in details if d.kind == kind)
        assert set(worn) == agents, kind
        assert max(worn.values()) - min(worn.values()) <= 1, (kind, worn)


def test_controls_go_among_the_agents_runs_never_first(tmp_path: Path) -> None:
    """Issue #47: each task's controls take distinct slots among its run requests, drawn
    by the salt; the campaign's first task's first request is always an agent's (the
    campaign never starts with a control), the other tasks' slots are anywhere."""
    campaign = load_campaign(ROOT / "examples" / "campaign.yaml")
    agents_runs = len(campaign.agents) * campaign.epochs
    spread: set[int] = set()
    for secret in (b"a" * 32, b"b" * 32, b"c" * 32):
        by_task: dict[str, list[int]] = {}
        planned = _planned(tmp_path, secret)
        for d in planned:
            by_task.setdefault(d.task_id or "", []).append(d.slot)
        for slots in by_task.values():
            assert len(set(slots)) == len(slots)
            assert min(slots) >= 0 and max(slots) < agents_runs + len(slots)
        assert 0 not in by_task[planned[0].task_id or ""], (
            "the first task's first run is an agent's"
        )
        spread |= {d.slot for d in planned}
    assert len(spread) > 3, "not always the same places"


def test_declarations_are_sealed_under_the_deployments_secret(tmp_path: Path) -> None:
    """Issue #47: what a key-less reader of the log gets of a declaration is its campaign
    and task; its id is no function of the run id it names, its sealed text has one length
    whatever it says, and it opens under this deployment's secret alone."""
    campaign = load_campaign(ROOT / "examples" / "campaign.yaml")
    drafts, tasks = _two_bundled_tasks(campaign.campaign_id)
    campaign = campaign.model_copy(update={"controls": ControlsSpec(references=str(REFERENCES))})
    store = LocalBlobStore(tmp_path / "blobs")
    ours, theirs = ControlsKey(b"a" * 32), ControlsKey(b"b" * 32)
    sealed = plan_controls(store, campaign, drafts, tasks, PRODUCER, secret=ours.secret)
    opened = [ours.open(d) for d in sealed]
    assert {d.kind for d in opened} >= {KNOWN_GOOD, *VARIANTS}
    visible = {k for e in sealed for k, v in e.model_dump().items() if v is not None}
    assert visible <= {
        "event_id",
        "event_type",
        "schema_version",
        "occurred_at",
        "campaign_id",
        "task_id",
        "causation_id",
        "producer",
        "sealed",
    }
    assert len({len(e.sealed) for e in sealed}) == 1, "the length tells no variant"
    for e, d in zip(sealed, opened, strict=True):
        assert d.control_run_id not in e.model_dump_json()
        assert e.event_id != derive_id("ControlDeclared", d.control_run_id)  # the old, public id
        assert e.event_id == ours.event_id(d.control_run_id) != theirs.event_id(d.control_run_id)
        with pytest.raises(SealBroken):
            theirs.open(e)
        with pytest.raises(SealBroken):  # moved to another task: its envelope is sealed in
            ours.open(e.model_copy(update={"task_id": "other"}))


def test_controls_repeated_over_epochs_are_warned_of_where_agents_are_sampled_models() -> None:
    """A control's epochs can leave the same work twice, and controls that play their
    declared variants wear one model through every kind of work (tells to a reader of the
    whole log): said before the campaign runs, where its agents are real models."""
    bundled = load_campaign(ROOT / "examples" / "campaign.yaml")
    assert bundled.controls is not None and campaign_warnings(bundled) == []
    # As a real campaign runs them: controls choosing by their look-alikes' kinds of work
    # (the demo file turns that off, to keep its report fixed).
    choosing = bundled.controls.model_copy(update={"like_agents": True})
    real = bundled.model_copy(update={"scripted": False, "controls": choosing})
    assert campaign_warnings(real) == []  # one epoch: nothing repeats
    repeated = real.model_copy(update={"controls": choosing.model_copy(update={"epochs": 3})})
    (warning,) = campaign_warnings(repeated)
    assert "controls.epochs is 3" in warning and "set it to 1" in warning
    assert campaign_warnings(repeated.model_copy(update={"scripted": True})) == []
    # Controls that play their declarations wear one model through every kind of work.
    declared = real.model_copy(
        update={"controls": bundled.controls.model_copy(update={"like_agents": False})}
    )
    (warning,) = campaign_warnings(declared)
    assert "controls.like_agents is false" in warning
