"""A run's web sources in the transcript: each listed with its blobs, agent input as text."""

from __future__ import annotations

from datetime import UTC, datetime

from assay_schemas import AgentStepLogged, ToolCallRecord, ToolResultRecord, WebSource
from assay_viewer.pages import view_environment
from assay_viewer.transcript import transcript

SHA_TEXT, SHA_BODY = "a" * 64, "b" * 64


def test_a_fetch_step_lists_its_source_with_links_to_the_kept_blobs() -> None:
    hostile = "https://evil.example/<script>alert(1)</script>"
    source = WebSource(
        kind="fetch",
        key="c" * 64,
        request=hostile,
        url="https://evil.example/final",
        fetched_at=datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
        status=200,
        media_type="text/html",
        body_sha256=SHA_BODY,
        body_size=1234,
        text_sha256=SHA_TEXT,
        text_size=321,
    )
    step = AgentStepLogged(
        event_id="e1",
        campaign_id="c",
        run_id="r",
        step=0,
        tool_calls=[ToolCallRecord(call_id="1", name="web_fetch", arguments="{}")],
        tool_results=[
            ToolResultRecord(call_id="1", name="web_fetch", output="page", sources=[source])
        ],
        producer={"service": "runner", "version": "0"},  # type: ignore[arg-type]
    )
    macro = view_environment().get_template("view/run_parts.html.j2").module.steps  # type: ignore[attr-defined]
    html = str(macro(transcript([step])))
    assert f'href="/blob/{SHA_TEXT}?name=web-source.txt">text read (321 bytes)' in html
    assert f'href="/blob/{SHA_BODY}?name=web-response.txt">bytes received (1234)' in html
    assert "HTTP 200 · text/html · 2026-12-01 10:00:00Z" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
