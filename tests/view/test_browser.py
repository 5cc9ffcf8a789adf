"""The viewer served by uvicorn: live events over SSE, and pages in headless Chromium."""

from __future__ import annotations

import asyncio
import json
from importlib.resources import files
from pathlib import Path

import httpx
import pytest

from assay.bus import Bus
from assay_schemas import AgentStepLogged, JudgmentRecorded
from assay_testing.synthetic_log import publish_events
from tests.chromium import headless_chromium

from .conftest import HOSTILE, PAYLOAD, Published


async def test_a_step_logged_while_the_page_is_open_arrives_as_an_event(
    served: str, bus: Bus, hostile: Published
) -> None:
    step = next(e for e in hostile.events if isinstance(e, AgentStepLogged))
    live = step.model_copy(update={"run_id": "live-run", "event_id": "live-step", "step": 7})
    async with (
        httpx.AsyncClient(base_url=served, timeout=20) as client,
        client.stream("GET", f"/live?run=live-run&from={hostile.head + 1}") as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        await publish_events(bus.js, bus.subjects, bus.stream.name, [live])
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                break
    assert data["run_id"] == "live-run" and data["type"] == "AgentStepLogged"
    assert data["summary"].startswith("step 7:")
    # What the run page draws in place comes with it, as data (live.js writes textContent).
    detail = data["detail"]
    assert detail["step"] == 7 and detail["model_output"] == step.model_output
    assert [c["name"] for c in detail["calls"]] == [c.name for c in step.tool_calls]


async def test_a_verdict_logged_while_the_run_page_is_open_carries_what_the_page_draws(
    served: str, bus: Bus, hostile: Published
) -> None:
    verdict = next(e for e in hostile.events if isinstance(e, JudgmentRecorded) and e.scores)
    live = verdict.model_copy(
        update={
            "run_id": "live-run",
            "event_id": "live-verdict",
            "rationale": PAYLOAD,
            "attempts": 2,
        }
    )
    async with (
        httpx.AsyncClient(base_url=served, timeout=20) as client,
        client.stream("GET", f"/live?run=live-run&from={hostile.head + 1}") as stream,
    ):
        await publish_events(bus.js, bus.subjects, bus.stream.name, [live])
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                detail = json.loads(line.removeprefix("data: "))["detail"]
                break
    assert detail["judge"] == f"{verdict.judge_id} #{verdict.sample}"
    assert detail["scores"] == {k: v.score for k, v in sorted(verdict.scores.items())}
    assert detail["rationale"] == PAYLOAD and detail["attempts"] == 2


def test_the_live_script_never_writes_markup() -> None:
    script = files("assay_viewer").joinpath("templates", "view", "live.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "textContent" in script and "#live-steps ol.steps" in script


@pytest.mark.slow
async def test_pages_in_chromium_run_no_agent_script(served: str, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=served) as client:
        run = (await client.get(f"/run/{HOSTILE}")).text
        runs = (await client.get("/campaign/camp")).text
    files = [
        u.replace("&amp;", "&")
        for u in run.split('href="')[1:]
        if u.startswith(f"/run/{HOSTILE}/file")
    ]
    other = next(
        u.split('"')[0] for u in runs.split('href="/run/')[1:] if not u.startswith(HOSTILE)
    )
    pages = {
        "campaign": "/campaign/camp",
        "judges": "/campaign/camp/judges",
        "task": next(
            u.split('"')[0]
            for u in runs.split('href="')[1:]
            if u.startswith("/campaign/camp/task/")
        ),
        "run": f"/run/{HOSTILE}",
        "compare": f"/compare?a={HOSTILE}&b={other}",
        **{f"file{i}": u.split('"')[0] for i, u in enumerate(files)},
    }
    # The check can fail: the same payload as raw markup does run in this browser.
    control = tmp_path / "control.html"
    control.write_text(f"<!DOCTYPE html><html><body>{PAYLOAD}</body></html>")
    dom = await asyncio.to_thread(headless_chromium, control.as_uri(), tmp_path, "--dump-dom")
    assert "<title>PWNED" in dom or 'data-pwned="1"' in dom
    for name, path in pages.items():
        dom = await asyncio.to_thread(headless_chromium, served + path, tmp_path, "--dump-dom")
        assert 'data-pwned="1"' not in dom and "<title>PWNED" not in dom, name
        assert "<body" in dom, name
        png = tmp_path / f"{name}.png"
        await asyncio.to_thread(headless_chromium, served + path, tmp_path, f"--screenshot={png}")
        assert png.stat().st_size > 5_000, name
