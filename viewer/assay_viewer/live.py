"""Live updates: the page's slice of the log as server-sent events, as it is logged.

Each event carries its summary line; steps and verdicts also carry what the run page
draws for them (`detail`), so the page appends them in place. All of it is data: the
page's script writes it with `textContent` only.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from assay_schemas import AgentStepLogged, Event, JudgmentFailed, JudgmentRecorded

from .data import Source

__all__ = ["detail", "events"]

_SHA = re.compile(r"[0-9a-f]{64}")


def _step(e: AgentStepLogged) -> dict[str, Any]:
    calls = []
    for call in e.tool_calls:
        results = [r for r in e.tool_results if r.call_id == call.call_id]
        calls.append(
            {
                "name": call.name,
                "arguments": call.arguments,
                "results": [
                    {
                        "output": r.output,
                        "is_error": r.is_error,
                        "truncated": r.truncated,
                        "exit_code": r.exit_code,
                        "duration_ms": r.duration_ms,
                        "blob": (
                            f"/blob/{r.output_blob.sha256}?name=output.txt"
                            if r.output_blob and _SHA.fullmatch(r.output_blob.sha256)
                            else ""
                        ),
                        "blob_size": r.output_blob.size if r.output_blob else 0,
                    }
                    for r in results
                ],
            }
        )
    return {
        "step": e.step,
        "model_output": e.model_output,
        "calls": calls,
        "note": f"{e.usage.input_tokens} in / {e.usage.output_tokens} out tokens · "
        f"model {e.latency_ms:.0f} ms · ${e.cost_usd:.4f}",
    }


def detail(e: Event) -> dict[str, Any] | None:
    """What the run page draws for a step or a verdict (None for other events)."""
    if isinstance(e, AgentStepLogged):
        return _step(e)
    if isinstance(e, JudgmentRecorded):
        return {
            "judge": f"{e.judge_id} #{e.sample}",
            "model": f"{e.judge_family} {e.judge_model}",
            "scores": {k: v.score for k, v in sorted(e.scores.items())},
            "tags": list(e.failure_tags),
            "rationale": e.rationale,
            "attempts": e.attempts,
            "checks": [
                f"{c.name}: {'pass' if c.passed else 'FAIL'} — {c.detail}" for c in e.checks
            ],
        }
    if isinstance(e, JudgmentFailed):
        return {"judge": f"{e.judge_id} #{e.sample}", "failed": e.error, "attempts": e.attempts}
    return None


async def events(source: Source, campaign: str, run_id: str, start: int) -> AsyncIterator[bytes]:
    """Server-sent events: each event of the filter from `start`, then each as it is logged."""
    bus = await source.bus()
    subject = bus.subjects.event("*", campaign, run_id)
    yield b": following the log\n\n"
    async for item in bus.replay(start=start, subject=subject, follow=True):
        e = item.event
        data = {
            "sequence": item.sequence,
            "type": e.event_type,
            "run_id": e.run_id or "",
            "task_id": e.task_id or "",
            "summary": e.summary_line(),
            "detail": detail(e),
        }
        yield f"id: {item.sequence}\nevent: logged\ndata: {json.dumps(data)}\n\n".encode()
