"""ASI-Bench JSON tasks, both judge variants, read without loss.

- `hybrid`: `rules` are objects `{name, weight, check?}`; `llm` is
  `{model, dimensions, sampling_times}`.
- `rule_and_llm`: `rules` are strings; `llm_system_prompt` instructs the LLM judges.

A rule with a runnable `check` becomes a reference check the rule judge runs, its weight
counting in the weighted pass rate; any other rule is a criterion in words, shown to the
LLM judges with its weight. `llm.dimensions` become the task's own rubric.

`expected_output` is part of the request: the agent reads it after the question, under
"# Expected output" (the judges read it too), since an agent cannot deliver a format it
was never told. A task sets `"expected_output_judges_only": true` to keep it for the
judges. `judge.method` and `judge.llm.model` are kept as labels only (every task is judged
by the campaign's jury and the rule judge); they and any field this import does not know
are named in a warning at load, which `assay submit` and `assay run` print.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from assay_schemas import Dimension, Rubric, TaskInputError, custom_dimension, default_rubric

from ._draft import AttachmentSource, TaskDraft, check_attachment, check_unique

__all__ = ["is_asi_task", "load_asi_task", "readable"]

_CHECK_KINDS = {"file_exists", "number_near", "contains"}
_TOP_KEYS = {
    "task_id",
    "background",
    "question",
    "resources",
    "expected_output",
    "expected_output_judges_only",
    "constraints",
    "judge",
    "notes",
    "notes_to_judges",
    "domain",
    "phase",
    "difficulty",
}
_JUDGE_KEYS = {"method", "rules", "llm", "llm_system_prompt", "sampling_times"}
_LLM_KEYS = {"model", "dimensions", "sampling_times", "system_prompt"}


def is_asi_task(data: object) -> bool:
    """Whether parsed JSON looks like an ASI-Bench task rather than an Assay task file."""
    return (
        isinstance(data, dict)
        and "prompt" not in data
        and bool(data.keys() & {"question", "background"})
    )


def readable(value: Any, indent: str = "") -> str:
    """Structured expected output as plain indented text a judge reads like a brief."""
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{indent}{key}:\n{readable(item, indent + '  ')}")
            else:
                lines.append(f"{indent}{key}: {readable(item)}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(
            f"{indent}-\n{readable(v, indent + '  ')}"
            if isinstance(v, dict | list) and v
            else f"{indent}- {readable(v)}"
            for v in value
        )
    return "" if value is None else str(value)


def _key(name: str) -> str:
    key = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return key if key[:1].isalpha() else f"d_{key}"


def _rubric(task_id: str, dimensions: list[Any]) -> Rubric | None:
    if not dimensions:
        return None
    builtin = default_rubric()
    known = {d.key: d for d in builtin.dimensions}
    dims: list[Dimension] = []
    for i, raw in enumerate(dimensions):
        if isinstance(raw, dict):
            name = str(raw.get("name") or raw.get("key") or "")
            description = str(raw.get("description") or "")
        else:
            name, description = str(raw), ""
        if not name:
            raise TaskInputError(f"task {task_id}: judge.llm.dimensions[{i}]: no name")
        key = _key(name)
        dims.append(known.get(key) or custom_dimension(key, name, description))
    try:
        return Rubric(
            rubric_id=f"task-{task_id}", dimensions=dims, failure_tags=builtin.failure_tags
        )
    except ValueError as e:
        raise TaskInputError(f"task {task_id}: judge.llm.dimensions: {e}") from e


def _rules(judge: dict[str, Any], task_id: str) -> tuple[list[Any], dict[str, float], list[Any]]:
    checks: list[Any] = []
    weights: dict[str, float] = {}
    criteria: list[Any] = []
    for i, rule in enumerate(judge.get("rules") or []):
        if isinstance(rule, str):
            criteria.append({"text": rule})
            continue
        if not isinstance(rule, dict):
            raise TaskInputError(f"task {task_id}: judge.rules[{i}]: expected text or an object")
        name = str(rule.get("name") or f"rule_{i}")
        weight = float(rule.get("weight", 1.0))
        check = rule.get("check")
        if not isinstance(check, dict) and rule.get("kind") in _CHECK_KINDS:
            check = {k: v for k, v in rule.items() if k not in {"name", "weight", "description"}}
        if isinstance(check, dict):
            weights[name] = weight
            checks.append({**check, "name": name})
        else:
            text = rule.get("description") or rule.get("rule") or rule.get("text") or name
            criteria.append({"text": str(text), "weight": weight})
    return checks, weights, criteria


def _resources(
    data: dict[str, Any], base: Path, task_id: str, max_bytes: int
) -> list[AttachmentSource]:
    raw = data.get("resources") or []
    if not isinstance(raw, list):
        raise TaskInputError(f"task {task_id}: resources must be a list")
    out = []
    for i, item in enumerate(raw):
        rel = item.get("path") or item.get("file") if isinstance(item, dict) else item
        if not isinstance(rel, str):
            raise TaskInputError(f"task {task_id}: resources[{i}]: expected a path string")
        source = base / rel
        # ASI-Bench ships resources in a `data/` folder beside the JSON, often named bare.
        if not source.exists() and (base / "data" / rel).exists():
            source = base / "data" / rel
        out.append(check_attachment(task_id, f"resources[{i}]", rel, source, max_bytes, root=base))
    return check_unique(task_id, out)


def _judge_config(judge: dict[str, Any], task_id: str) -> tuple[dict[str, Any], list[Any]]:
    llm = judge.get("llm") or {}
    if not isinstance(llm, dict):
        raise TaskInputError(f"task {task_id}: judge.llm must be an object")
    checks, weights, criteria = _rules(judge, task_id)
    dims = llm.get("dimensions") or []
    rubric = _rubric(task_id, dims if isinstance(dims, list) else [dims])
    prompt = judge.get("llm_system_prompt") or llm.get("system_prompt") or ""
    config = {
        "method": str(judge.get("method") or "llm+rules"),
        "rule_weights": weights,
        "sampling_times": int(llm.get("sampling_times") or judge.get("sampling_times") or 1),
        "rubric": rubric,
        "criteria": criteria,
        "system_prompt": str(prompt),
        "model": str(llm.get("model") or ""),
    }
    return config, checks


def _not_honoured(data: dict[str, Any], judge: dict[str, Any], task_id: str) -> tuple[str, ...]:
    """One warning per field that is read but not acted on, and one naming the unknown."""
    raw = judge.get("llm")
    llm: dict[str, Any] = raw if isinstance(raw, dict) else {}
    out = []
    if judge.get("method"):
        out.append(
            f"task {task_id}: judge.method {judge['method']!r} is not honoured (kept as "
            "a label): every task is judged by the campaign's jury and the rule judge"
        )
    if llm.get("model"):
        out.append(
            f"task {task_id}: judge.llm.model {llm['model']!r} is not honoured (kept "
            "as a label): the campaign's jury judges every task"
        )
    unknown = sorted(
        [k for k in data if k not in _TOP_KEYS]
        + [f"judge.{k}" for k in judge if k not in _JUDGE_KEYS]
        + [f"judge.llm.{k}" for k in llm if k not in _LLM_KEYS]
    )
    if unknown:
        out.append(f"task {task_id}: fields not honoured (ignored): {', '.join(unknown)}")
    return tuple(out)


def load_asi_task(path: Path, *, max_bytes: int) -> TaskDraft:
    """An ASI-Bench JSON task: background + question, resources, judge config, notes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise TaskInputError(f"{path.name}: not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise TaskInputError(f"{path.name}: expected a JSON object")
    task_id = str(data.get("task_id") or "")
    if not task_id:
        raise TaskInputError(f"{path.name}: task_id is missing")
    judge = data.get("judge") or {}
    if not isinstance(judge, dict):
        raise TaskInputError(f"task {task_id}: judge must be an object")
    config, checks = _judge_config(judge, task_id)
    prompt = "\n\n".join(str(p) for p in (data.get("background"), data.get("question")) if p)
    expected = readable(data.get("expected_output"))
    if expected and not data.get("expected_output_judges_only", False):
        prompt = f"{prompt}\n\n# Expected output\n{expected}"
    constraints = data.get("constraints") or []
    fields = {
        "task_id": task_id,
        "prompt": prompt,
        "domain": str(data.get("domain") or ""),
        "phase": str(data.get("phase") or ""),
        "difficulty": str(data.get("difficulty") or ""),
        "expected_output": expected,
        "constraints": constraints if isinstance(constraints, list) else [str(constraints)],
        "reference_checks": checks,
        "judge": config,
        "notes": readable(data.get("notes")),
        "notes_to_judges": bool(data.get("notes_to_judges", False)),
        "source": f"asi:{path.name}",
    }
    # Said by whoever loads the task (the CLI prints them once, as warnings), not logged
    # here: a log line with a timestamp read as the stack's, not as the user's file.
    warnings = _not_honoured(data, judge, task_id)
    return TaskDraft(fields, _resources(data, path.parent, task_id, max_bytes), warnings)
