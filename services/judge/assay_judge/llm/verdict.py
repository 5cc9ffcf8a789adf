"""The structured verdict: the `submit_verdict` tool's schema, and its validation.

A verdict is valid when it parses as JSON, has an integer 0-10 with a one-line reason for
every rubric dimension (and no others), uses only the rubric's failure tags, gives a
rationale, and cites only files in the sealed manifest. Every problem is named, so the
repair prompt can tell the model exactly what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from assay.providers import ToolDefinition
from assay_schemas import DimensionScore, Rubric

from ..files import normalize_path

__all__ = ["SUBMIT_VERDICT", "Verdict", "VerdictCheck", "check_verdict", "verdict_tool"]

SUBMIT_VERDICT = "submit_verdict"


class _Score(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: int = Field(strict=True, ge=0, le=10)
    reason: str = Field(min_length=1)


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scores: dict[str, _Score]
    failure_tags: list[str] = Field(default_factory=list)
    rationale: str = Field(min_length=1)
    files_relied_on: list[str] = Field(default_factory=list)


class Verdict(BaseModel):
    """A validated verdict, ready to be recorded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scores: dict[str, DimensionScore]
    failure_tags: list[str]
    rationale: str
    files_cited: list[str]


class VerdictCheck(NamedTuple):
    """The outcome of checking one `submit_verdict` call: a verdict or the problems."""

    verdict: Verdict | None
    problems: list[str]


def verdict_tool(rubric: Rubric) -> ToolDefinition:
    """The `submit_verdict` tool, its JSON Schema built from the rubric."""
    score: dict[str, JsonValue] = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 0, "maximum": 10},
            "reason": {"type": "string", "description": "One line."},
        },
        "required": ["score", "reason"],
    }
    dims: dict[str, JsonValue] = {d.key: score for d in rubric.dimensions}
    return ToolDefinition(
        name=SUBMIT_VERDICT,
        description="Submit your final verdict (call once, after inspecting the files).",
        parameters={
            "type": "object",
            "properties": {
                "scores": {
                    "type": "object",
                    "properties": dims,
                    "required": list(dims),
                    "description": "Every rubric dimension: an integer 0-10 and a one-line reason.",
                },
                "failure_tags": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(rubric.tag_keys)},
                },
                "rationale": {"type": "string", "description": "Overall rationale."},
                "files_relied_on": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Sealed file paths your verdict relies on.",
                },
            },
            "required": ["scores", "failure_tags", "rationale", "files_relied_on"],
        },
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_verdict(arguments: str, rubric: Rubric, manifest: Collection[str]) -> VerdictCheck:
    """Validate the raw JSON arguments of a `submit_verdict` call against the rubric."""
    try:
        raw: Any = json.loads(arguments or "")
    except json.JSONDecodeError as e:
        return VerdictCheck(None, [f"the arguments are not valid JSON ({e.msg} at char {e.pos})"])
    try:
        payload = _Payload.model_validate(raw)
    except ValidationError as e:
        return VerdictCheck(
            None,
            [
                f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
                for err in e.errors()
            ],
        )
    problems: list[str] = []
    keys = rubric.dimension_keys
    missing = [k for k in keys if k not in payload.scores]
    unknown = [k for k in payload.scores if k not in keys]
    if missing:
        problems.append(f"scores is missing dimensions: {', '.join(missing)}")
    if unknown:
        problems.append(f"scores has unknown dimensions: {', '.join(unknown)}")
    bad_tags = [t for t in payload.failure_tags if t not in rubric.tag_keys]
    if bad_tags:
        problems.append(
            f"unknown failure tags {', '.join(bad_tags)}; allowed: {', '.join(rubric.tag_keys)}"
        )
    cited = [normalize_path(f) for f in payload.files_relied_on]
    bad_files = [f for f in cited if f not in manifest]
    if bad_files:
        problems.append(f"files_relied_on names files not in the manifest: {', '.join(bad_files)}")
    if problems:
        return VerdictCheck(None, problems)
    verdict = Verdict(
        scores={
            k: DimensionScore(
                score=payload.scores[k].score, reason=_one_line(payload.scores[k].reason)
            )
            for k in keys
        },
        failure_tags=list(dict.fromkeys(payload.failure_tags)),
        rationale=payload.rationale.strip(),
        files_cited=list(dict.fromkeys(cited)),
    )
    return VerdictCheck(verdict, [])
