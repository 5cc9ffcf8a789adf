"""Every page kind renders from the log; rows link down; agent-written markup stays text."""

from __future__ import annotations

import re

import httpx

from assay.bus import Bus
from assay_schemas import AgentStepLogged
from assay_testing.synthetic_log import publish_events
from assay_viewer.asgi import CSP

from .conftest import DISPUTED, HOSTILE, REPAIRED_SAMPLE, SCRIPT, Published


def _links(html: str, prefix: str) -> list[str]:
    return re.findall(rf'href="({re.escape(prefix)}[^"]*)"', html)


async def test_click_through_from_campaign_to_a_step_and_a_sealed_file(
    client: httpx.AsyncClient,
) -> None:
    index = await client.get("/")
    assert index.status_code == 200 and index.headers["content-security-policy"] == CSP
    assert '/campaign/camp"' in index.text
    page = await client.get("/campaign/camp")
    assert page.status_code == 200
    assert "Leaderboard: mean run score" in page.text and "<svg" in page.text
    # The answer first: problems, leaderboard, then the runs; every table one click away.
    assert page.text.index("Leaderboard") < page.text.index('<table class="runs">')
    assert "Judge strictness" not in page.text
    report = await client.get(_links(page.text, "/campaign/camp/report")[0])
    assert report.status_code == 200 and "Judge strictness" in report.text
    assert 'href="/campaign/camp"' in report.text  # the way back
    # The report's problems section (the synthetic campaign plants infrastructure failures).
    assert "This campaign did not go as planned" in page.text
    task = await client.get(
        next(u for u in _links(page.text, "/campaign/camp/task/") if "evil" not in u)
    )
    assert task.status_code == 200 and "Prompt" in task.text and "Runs side by side" in task.text
    run_url = next(u for u in _links(page.text, "/run/") if HOSTILE not in u and "evil" not in u)
    run = await client.get(run_url)
    assert run.status_code == 200
    for heading in ("Transcript", "Sealed files", "Verdicts", "Event chain", "step 0"):
        assert heading in run.text, heading
    file_url = _links(run.text, run_url + "/file?path=")[0].replace("&amp;", "&")
    shown = await client.get(file_url)
    assert shown.status_code == 200 and "sha256" in shown.text
    judges = await client.get("/campaign/camp/judges")
    assert judges.status_code == 200 and "Where judges disagree most" in judges.text
    runs = [u.removeprefix("/run/") for u in _links(task.text, "/run/")]
    compare = await client.get(f"/compare?a={runs[0]}&b={runs[1]}")
    assert compare.status_code == 200 and compare.text.count("<h3>Transcript</h3>") == 2


async def test_agent_markup_is_shown_as_text_everywhere(client: httpx.AsyncClient) -> None:
    run = await client.get(f"/run/{HOSTILE}")
    assert run.status_code == 200
    pages = [run.text]
    documents: dict[str, str] = {}
    for url in _links(run.text, f"/run/{HOSTILE}/file?path="):
        shown = await client.get(url.replace("&amp;", "&"))
        assert shown.status_code == 200, url
        pages.append(shown.text)
        if url.endswith(("docx", "xlsx", "pdf")):
            documents[url.rsplit(".", 1)[1]] = shown.text
    assert len(pages) == 9
    for html in pages:
        assert "<script>document" not in html and "<img src=x" not in html
        # No element carries a handler (highlighted code keeps `onerror="` as text).
        assert not re.search(r"<[a-z]+[^>]*\son[a-z]+=", html)
        assert "javascript:alert" not in html.replace("[link](javascript:alert(1))", "")
    assert "&lt;script&gt;" in run.text and "&lt;img" in run.text
    # Documents are previewed as their text, workbooks as tables, escaped like the rest.
    assert sorted(documents) == ["docx", "pdf", "xlsx"]
    for html in documents.values():
        assert "&lt;script&gt;document" in html and "No preview" not in html
    assert "<td>&lt;script&gt;document" in documents["xlsx"]
    # The only script any page loads is the viewer's own.
    assert all(
        re.findall(r"<script[^>]*>", h) == ['<script src="/static/live.js" defer>'] for h in pages
    )
    # An output blob is served by hash only, as a text download in a sandbox.
    blob = _links(run.text, "/blob/")[0].replace("&amp;", "&")
    got = await client.get(blob)
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/plain")
    assert got.headers["content-disposition"].startswith("attachment")
    assert got.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert SCRIPT in got.text


async def test_nothing_outside_the_store_is_reachable(client: httpx.AsyncClient) -> None:
    for url in (
        "/blob/../../etc/passwd",
        "/blob/" + "0" * 64,
        "/run/..%2F..%2Fetc",
        f"/run/{HOSTILE}/file?path=../../../etc/passwd",
        "/static/../pages.py",
    ):
        got = await client.get(url)
        assert got.status_code == 404, url
        assert "root:" not in got.text
    assert (await client.post("/")).status_code == 405
    assert (await client.get("/live?run=a.b")).status_code == 400


async def test_repairs_and_raw_judge_output_are_escaped_text_with_a_link_to_the_blob(
    client: httpx.AsyncClient,
) -> None:
    run = (await client.get(f"/run/{HOSTILE}")).text
    assert "repaired: 3 attempts, 2 output(s) rejected" in run
    assert "rejected outputs" in run and "Judgments that failed" in run
    assert f"#{REPAIRED_SAMPLE}: no valid verdict (3 attempts)" in run
    # Both outputs are shown as escaped text (the raw one cut), each linked by hash.
    assert run.count('<pre class="text raw">') == 2
    assert '<pre class="text raw">[&#34;&lt;script&gt;' in run
    assert "(cut here; the whole" in run
    for name in ("rejected%20outputs.txt", "raw%20output.txt"):
        url = next(u for u in _links(run, "/blob/") if u.endswith(name))
        got = await client.get(url)
        assert got.status_code == 200 and SCRIPT in got.text
        assert got.headers["content-security-policy"] == "default-src 'none'; sandbox"
    # Side by side with another run, the repairs show in the hostile run's card.
    compare = (await client.get(f"/compare?run={DISPUTED}&run={HOSTILE}")).text
    assert compare.count("repaired: 3 attempts") == 1


async def test_the_campaign_page_is_drawn_once_per_log_version(
    client: httpx.AsyncClient, bus: Bus, hostile: Published
) -> None:
    first = await client.get("/campaign/camp")
    again = await client.get("/campaign/camp")
    assert again.content == first.content
    step = next(e for e in hostile.events if isinstance(e, AgentStepLogged))
    late = step.model_copy(update={"event_id": "late-step", "step": 99})
    await publish_events(bus.js, bus.subjects, bus.stream.name, [late])
    redrawn = await client.get("/campaign/camp")
    assert f"Log sequence {hostile.head + 1};" in redrawn.text
    assert f"Log sequence {hostile.head};" in first.text
