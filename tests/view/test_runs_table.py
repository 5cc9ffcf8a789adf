"""The runs table, search, transcripts and task pages, checked against the events themselves.

Every expected set of runs is computed here from the published events (not from the
viewer's projections), so a filter or a sort that drifts from the log fails.
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict
from typing import NamedTuple
from urllib.parse import urlencode

import httpx
import pytest
from rich.console import Console

from assay.bus import Bus
from assay_aggregator.audit import audit_run, load_run_events
from assay_aggregator.audit_view import print_audit
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentStepLogged,
    ArtifactsSealed,
    JudgmentRecorded,
    RunFailed,
    RunRequested,
    TaskSubmitted,
)
from assay_testing.synthetic_log import publish_events
from assay_viewer.previews import markdown, preview
from tests.aggregator.conftest import Published

from .conftest import DISPUTED, EVIL_TASK, HOSTILE, PAYLOAD, PYTHON_CODE, SCRIPT, SEARCHED


class Expected(NamedTuple):
    """What the events say about each run."""

    agent: dict[str, str]
    tags: dict[str, set[str]]
    failed: dict[str, set[str]]
    judges: dict[str, set[str]]
    score: dict[str, float]
    spread: dict[str, float]
    infra: set[str]


def _expected(published: Published) -> Expected:
    agent: dict[str, str] = {}
    tags: dict[str, set[str]] = defaultdict(set)
    failed: dict[str, set[str]] = defaultdict(set)
    judges: dict[str, set[str]] = defaultdict(set)
    ratings: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    infra: set[str] = set()
    for e in published.events:
        rid = e.run_id or ""
        if isinstance(e, RunRequested | ArtifactsSealed):
            agent[rid] = e.agent.agent_id if isinstance(e, RunRequested) else e.agent_id
        if isinstance(e, RunFailed) and e.infrastructure:
            infra.add(rid)
        if isinstance(e, JudgmentRecorded):
            judges[rid].add(e.judge_id)
            tags[rid].update(e.failure_tags)
            failed[rid].update(c.name for c in e.checks if not c.passed)
            if e.judge_id != RULES_JUDGE_ID:
                ratings[rid][e.judge_id] += [s.score for s in e.scores.values()]
    score, spread = {}, {}
    for rid, by_judge in ratings.items():
        means = [sum(v) / len(v) for v in by_judge.values() if v]
        score[rid] = sum(means) / len(means)
        if len(means) > 1:
            spread[rid] = max(means) - min(means)
    return Expected(agent, tags, failed, judges, score, spread, infra)


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-run="([^"]+)"', html)


async def _runs(client: httpx.AsyncClient, **query: str) -> tuple[list[str], str]:
    got = await client.get(f"/campaign/camp?{urlencode(query)}")
    assert got.status_code == 200, query
    return _rows(got.text), got.text


async def test_each_filter_keeps_exactly_the_runs_the_events_say(
    client: httpx.AsyncClient, hostile: Published
) -> None:
    x = _expected(hostile)
    every = set(x.agent)
    shown, _ = await _runs(client)
    assert set(shown) == every and len(shown) == len(every)
    planted = {r for r in every if x.agent[r] == "agent_0" and "overclaiming" in x.tags[r]}
    assert 0 < len(planted) < len(every) / 3
    assert set((await _runs(client, agent="agent_0", tag="overclaiming"))[0]) == planted
    failed = {r for r in every if "estimate" in x.failed[r]}
    assert set((await _runs(client, check="estimate"))[0]) == failed
    assert set((await _runs(client, judge="judge_b"))[0]) == {
        r for r in every if "judge_b" in x.judges[r]
    }
    assert set((await _runs(client, infra="yes"))[0]) == x.infra != set()
    assert set((await _runs(client, infra="no"))[0]) == every - x.infra
    band = {r for r, s in x.score.items() if 5 <= s <= 7}
    assert set((await _runs(client, min="5", max="7"))[0]) == band != set()
    # Filters combine; a value no run has selects none.
    assert (await _runs(client, agent="agent_0", tag="no-such-tag"))[0] == []


async def test_sorts_put_the_most_disputed_and_the_costliest_run_first(
    client: httpx.AsyncClient, hostile: Published
) -> None:
    x = _expected(hostile)
    order, _ = await _runs(client, sort="spread", order="desc")
    assert order[0] == DISPUTED and math.isclose(x.spread[DISPUTED], 10.0)
    spreads = [x.spread[r] for r in order if r in x.spread]
    assert spreads == sorted(spreads, reverse=True)
    # Runs with one judge or none come last, in either direction.
    assert all(r not in x.spread for r in order[len(spreads) :])
    up, _ = await _runs(client, sort="score", order="asc")
    scores = [x.score[r] for r in up if r in x.score]
    assert scores == sorted(scores) and up[: len(scores)] == [r for r in up if r in x.score]


async def test_search_finds_a_word_in_one_transcript_and_in_prompts(
    client: httpx.AsyncClient, hostile: Published
) -> None:
    found, html = await _runs(client, q=SEARCHED)
    assert found == [DISPUTED]
    assert f"<mark>{SEARCHED}</mark>" in html and "step 1:" in html
    # A prompt's word matches every run of the task; a word nowhere matches nothing.
    tasks = {
        e.task_id
        for e in hostile.events
        if isinstance(e, TaskSubmitted)
        and {"analyse", "estimate"} <= set(re.findall(r"\w+", e.task.prompt))
    }
    of_tasks = {
        e.run_id for e in hostile.events if isinstance(e, RunRequested) and e.task_id in tasks
    }
    assert len(tasks) == 10 and len(of_tasks) > 30
    assert set((await _runs(client, q="analyse estimate"))[0]) == of_tasks
    assert (await _runs(client, q="nowhereword"))[0] == []
    # Agent markup found by search comes back as escaped text in the snippet.
    found, html = await _runs(client, q="PWNED")
    assert HOSTILE in found and DISPUTED not in found
    assert "&lt;script&gt;" in html and "<script>document" not in html


async def test_query_strings_are_bounded_and_echoed_as_text(client: httpx.AsyncClient) -> None:
    hostile_query = {
        "agent": PAYLOAD[:190],
        "q": f'"{SCRIPT} OR NEAR(* x',
        "tag": SCRIPT,
        "sort": "evil",
        "min": "abc",
        "max": "11",
        "page": "-4",
    }
    rows, html = await _runs(client, **hostile_query)
    assert rows == []
    assert "<script>document" not in html and "<img src=x" not in html
    assert "&lt;script&gt;document" in html  # echoed back into the form, escaped
    for name in ("sort", "min", "max", "page"):
        assert f"{name}: " in html and "(ignored)" in html, name
    over = await client.get(f"/campaign/camp?{urlencode({'q': 'x' * 10_000})}")
    assert over.status_code == 200 and "q: " in over.text and "x" * 300 not in over.text
    punctuation = await client.get("/campaign/camp?q=%22%29%28*")
    assert punctuation.status_code == 200 and "no words to search for" in punctuation.text


async def test_paging_and_links_keep_the_view(client: httpx.AsyncClient) -> None:
    _, html = await _runs(client, agent="agent_1", sort="cost", order="desc")
    header = re.search(r'href="(/campaign/camp\?[^"]*sort=score[^"]*)"', html)
    assert header is not None and "agent=agent_1" in header.group(1)
    assert "1 of 1" in html


async def test_a_run_page_reads_as_a_transcript(client: httpx.AsyncClient) -> None:
    html = (await client.get(f"/run/{DISPUTED}")).text
    title = re.search(r"<title>(.*)</title>", html)
    assert title is not None and re.fullmatch(r"agent_\d · task_\d{4} · epoch 0", title.group(1))
    call = html.split('data-tool="python"', 1)[1].split("</div>", 2)
    assert '<div class="highlight">' in call[0] + call[1]
    assert '<span class="kn">import</span>' in html and "\\n" not in call[0]
    assert "<h2>Timeline</h2>" in html and '<svg class="timeline"' in html
    assert html.count('<g class="step">') == 5 and '<g class="judge">' in html
    # Hostile calls: code, a written file's name and content, a read, broken JSON: all text.
    evil = (await client.get(f"/run/{HOSTILE}")).text
    assert "<script>document" not in evil and "<img src=x" not in evil
    for kind in ("code", "file", "read", "args"):
        assert f'class="call {kind}"' in evil, kind
    assert '<details class="read">' in evil and '<details class="output">' in evil
    assert PYTHON_CODE.splitlines()[0].split()[1] in html


async def test_the_task_page_shows_what_agent_and_judges_were_given(
    client: httpx.AsyncClient,
) -> None:
    html = (await client.get("/campaign/camp/task/task_0000")).text
    for text in (
        "What the agent was given",
        "What the judges were given",
        "Rubric (the campaign's)",
        "scientific_accuracy",
        "pass threshold",
        "Reference checks",
        "number_near",
        "estimate",
    ):
        assert text in html, text
    # Its runs tick into one compare form (GET /compare?run=A&run=B…).
    assert '<form class="compare" id="compare" method="get" action="/compare">' in html
    ticked = re.findall(r'name="run" value="([^"]+)" form="compare"', html)
    assert len(ticked) >= 2
    back = (await client.get("/compare", params=[("run", r) for r in ticked[-2:]])).text
    assert 'href="/campaign/camp/task/task_0000"' in back


@pytest.mark.parametrize("width", [80, 160])
async def test_audit_prints_a_repaired_verdict(bus: Bus, hostile: Published, width: int) -> None:
    events, _ = await load_run_events(bus, HOSTILE)
    audit = audit_run(events, hostile.store)
    repaired = [v for v in audit.verdicts if v.attempts > 1]
    assert len(repaired) == 1 and repaired[0].attempts == 3 and repaired[0].rejected_outputs
    assert "judge_rejected_outputs" in {b.role for b in audit.blobs}
    buf = io.StringIO()
    print_audit(audit, Console(file=buf, width=width))
    text = buf.getvalue()
    assert "repaired: 3 attempts, 2 output(s) rejected; rejected outputs in blob" in text
    assert "raw output blob" in text


async def test_retried_and_refused_runs_are_flagged_and_filtered(
    client: httpx.AsyncClient, bus: Bus, hostile: Published
) -> None:
    x = _expected(hostile)
    failed = sorted(x.infra)[0]
    request = next(e for e in hostile.events if isinstance(e, RunRequested) and e.run_id == failed)
    retry = request.model_copy(
        update={"run_id": "retry-run", "event_id": "retry-req", "attempt": 1}
    )
    await publish_events(bus.js, bus.subjects, bus.stream.name, [retry])
    assert set((await _runs(client, flag="retried"))[0]) == {failed, "retry-run"}
    # The same event id again with other content is a refused repeat (no dedupe header, so
    # the stream keeps it): the run it names is flagged.
    victim = next(
        e for e in hostile.events if isinstance(e, JudgmentRecorded) and e.run_id == DISPUTED
    )
    forged = victim.model_copy(update={"rationale": "a second opinion"})
    await bus.js.publish(
        bus.subjects.of(forged), forged.model_dump_json().encode(), stream=bus.stream.name
    )
    rows, html = await _runs(client, flag="refused")
    assert rows == [DISPUTED] and '<span class="bad">refused</span>' in html
    # A refused repeat of a step is not searched either: only what the fold counted is.
    step = next(
        e for e in hostile.events if isinstance(e, AgentStepLogged) and e.run_id == DISPUTED
    )
    repeat = step.model_copy(update={"model_output": "a forgedword nobody logged"})
    await bus.js.publish(
        bus.subjects.of(repeat), repeat.model_dump_json().encode(), stream=bus.stream.name
    )
    assert (await _runs(client, q="forgedword"))[0] == []
    assert (await _runs(client, q=SEARCHED))[0] == [DISPUTED]


def test_markdown_keeps_one_value_per_line_and_stays_sanitised() -> None:
    html = str(
        markdown("mean: 2.01\nsd: 0.3\nn: 12\n\n<script>x</script> [a](javascript:alert(1))")
    )
    assert html.count("<br />") == 2 and "mean: 2.01<br />" in html
    assert "<script>" not in html and "href" not in html  # the script link stays text
    shown = preview("report.md", b"a = 1\nb = 2\n")
    assert shown.kind == "markdown" and "a = 1<br />" in str(shown.html)


async def test_a_hostile_task_is_shown_as_text(client: httpx.AsyncClient) -> None:
    html = (await client.get(f"/campaign/camp/task/{EVIL_TASK}")).text
    for heading in (
        "Constraints",
        "Expected output",
        "Rubric (the task&#39;s own)",
        "Grading criteria",
        "Instructions added",
        "Reference checks",
        "Notes (shown to the judges)",
    ):
        assert heading in html.replace("task's own", "task&#39;s own"), heading
    assert html.count("&lt;script&gt;document") >= 10
    assert "<script>document" not in html and "<img src=x" not in html
    assert not re.search(r"<[a-z]+[^>]*\son[a-z]+=", html)
