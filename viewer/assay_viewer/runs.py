"""The campaign page's runs table: one row per run, filtered, sorted and paged on the server.

The view is a pure function of the log and the query string, so a URL reproduces it.
Rows are built once per log version (`run_rows`); a request only filters and sorts those
(`select`), which stays well under a millisecond per thousand runs. The query is parsed at
the edge (`RunQuery.parse`): bounded strings, known sort keys, a value that does not fit
is dropped and named in `notes`, never an error page.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NamedTuple
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay_report.projections import Projections
from assay_report.state import RunRecord, State
from assay_schemas import ID_PATTERN, RULES_JUDGE_ID, run_state

__all__ = [
    "MAX_COMPARED",
    "PAGE_SIZE",
    "Facets",
    "RunQuery",
    "RunRow",
    "Selection",
    "compared_runs",
    "control_label",
    "facets",
    "run_rows",
    "select",
]

PAGE_SIZE = 100
QUERY_CHARS = 200
"""Longest value of any one query parameter (a search, an agent id)."""
MAX_COMPARED = 8
"""Most runs one compare page draws side by side (each brings its whole transcript)."""
_ID = re.compile(ID_PATTERN)


class RunRow(NamedTuple):
    """One run as the table shows and filters it."""

    run_id: str
    task_id: str
    agent_id: str
    epoch: int
    domain: str
    state: str
    score: float | None
    """Run score as the statistics define it (None when unscored); for a control, which
    the statistics leave out, its LLM judges' mean."""
    spread: float | None
    """Widest gap between two LLM judges' mean scores (None with fewer than two)."""
    judge_means: dict[str, float]
    cost_usd: float
    steps: int
    latency_s: float
    n_files: int
    tags: frozenset[str]
    failed_checks: frozenset[str]
    judges: frozenset[str]
    infrastructure_failure: bool
    refused: bool
    """Its submission was refused, or a message about it was."""
    retried: bool
    """A later attempt of an infrastructure-failed run, or such a run that has one."""
    control: str = ""
    """For a declared control run, what it is (`control_label`); '' for an agent's run."""


Sort = Literal["task", "score", "spread", "cost", "steps", "latency"]
Infra = Literal["", "yes", "no"]
Flag = Literal["", "refused", "retried"]


class RunQuery(BaseModel):
    """The runs table's state as the URL carries it ('' or None: no filter)."""

    model_config = ConfigDict(frozen=True, extra="ignore", str_strip_whitespace=True)

    agent: str = Field(default="", max_length=QUERY_CHARS)
    task: str = Field(default="", max_length=QUERY_CHARS)
    domain: str = Field(default="", max_length=QUERY_CHARS)
    tag: str = Field(default="", max_length=QUERY_CHARS)
    check: str = Field(default="", max_length=QUERY_CHARS)
    """A rule or reference check the run failed."""
    judge: str = Field(default="", max_length=QUERY_CHARS)
    """A judge that rated the run."""
    min: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)
    max: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)
    infra: Infra = ""
    flag: Flag = ""
    q: str = Field(default="", max_length=QUERY_CHARS)
    """Words to search for in prompts, final messages and transcripts."""
    sort: Sort = "task"
    order: Literal["asc", "desc"] = "asc"
    page: int = Field(default=1, ge=1, le=1_000_000)

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> tuple[RunQuery, list[str]]:
        """The query from URL parameters, and a note for each value that was dropped."""
        raw = {k: v for k, v in query.items() if k in cls.model_fields and v.strip() != ""}
        notes: list[str] = []
        for _ in range(len(cls.model_fields)):
            try:
                return cls.model_validate(raw), notes
            except ValidationError as e:
                for err in e.errors():
                    name = str(err["loc"][0]) if err["loc"] else ""
                    if raw.pop(name, None) is not None:
                        notes.append(f"{name}: {err['msg']} (ignored)")
        return cls(), notes

    def url(self, **change: object) -> str:
        """This view's query string with `change` applied (defaults left out)."""
        values = self.model_dump() | change
        default = RunQuery().model_dump()
        kept = {k: v for k, v in values.items() if v != default[k] and v not in ("", None)}
        return "?" + urlencode(kept) if kept else "?"

    @property
    def filtered(self) -> bool:
        """Whether any filter or search is set."""
        fields = ("agent", "task", "domain", "tag", "check", "judge", "infra", "flag", "q")
        return any(getattr(self, f) for f in fields) or self.min is not None or self.max is not None


def _state(r: RunRecord) -> str:
    """The run's lifecycle state (`assay_schemas.run_state`) as the runs table names it:
    a failure stays one when the run was sealed afterwards."""
    if r.infrastructure_failure:
        return "infrastructure failure"
    state = run_state(r.phase, judged=False)
    return state if state in ("failed", "sealed", "finished") else "running"


def control_label(state: State, run_id: str) -> str:
    """What a control run is, as the viewer labels it ("reference, expected to pass"), or
    '' for an agent's run. Only the viewer's own pages say it: the review desk is blind."""
    run = state.runs.get(run_id)
    if run is None or not run.control_plan:
        return ""
    c = state.controls.get(run_id)
    if c is None or c.plan_sha256 != run.control_plan:  # a retried attempt of the control
        c = next(
            (
                c
                for c in state.controls.values()
                if c.plan_sha256 == run.control_plan
                and (c.campaign_id, c.task_id) == (run.campaign_id, run.task_id)
            ),
            None,
        )
    if c is None:
        return ""
    return f"{c.kind}, expected to {c.expected}"


def compared_runs(params: Sequence[tuple[str, str]]) -> list[str] | str:
    """The runs a compare URL names (`?run=A&run=B…`, or the older `?a=A&b=B`), in order,
    each once; or why they cannot be compared."""
    ids = [v for k, v in params if k == "run"] or [v for k, v in params if k in ("a", "b")]
    chosen = list(dict.fromkeys(i.strip() for i in ids if i.strip()))
    bad = next((i for i in chosen if not _ID.fullmatch(i)), None)
    if bad is not None:
        return f"{bad[:QUERY_CHARS]!r} is not a run id"
    if len(chosen) < 2:
        return "choose two or more runs in the runs table (their boxes), then Compare"
    if len(chosen) > MAX_COMPARED:
        return f"{len(chosen)} runs chosen: compare at most {MAX_COMPARED} at a time"
    return chosen


def run_rows(p: Projections, campaign: str, scores: Mapping[str, float]) -> list[RunRow]:
    """Every run of `campaign` as a table row, by task, agent, epoch."""
    state = p.state
    runs = [r for r in state.runs.values() if r.campaign_id == campaign]
    sums: dict[str, dict[str, list[int]]] = {}
    tags: dict[str, set[str]] = {}
    failed: dict[str, set[str]] = {}
    judges: dict[str, set[str]] = {}
    for v in state.verdicts.values():
        if v.campaign_id != campaign:
            continue
        judges.setdefault(v.run_id, set()).add(v.judge_id)
        tags.setdefault(v.run_id, set()).update(v.tags)
        failed.setdefault(v.run_id, set()).update(str(c[0]) for c in v.checks if not c[1])
        if v.judge_id != RULES_JUDGE_ID and v.scores:
            acc = sums.setdefault(v.run_id, {}).setdefault(v.judge_id, [0, 0])
            acc[0] += sum(v.scores.values())
            acc[1] += len(v.scores)
    refused = set(state.refused_runs) | {
        r.subject.rsplit(".", 1)[-1] for r in state.refused.values()
    }
    slots = Counter((r.task_id, r.agent_id, r.epoch) for r in runs)
    rows = []
    for r in runs:
        means = {j: s / n for j, (s, n) in sorted(sums.get(r.run_id, {}).items())}
        task = state.tasks.get(f"{campaign}/{r.task_id}")
        control = control_label(state, r.run_id)
        score = scores.get(r.run_id)
        if control and score is None and means:
            # The statistics leave controls out of every figure; their row shows the
            # jury's mean, as judge validity measures it.
            score = sum(means.values()) / len(means)
        rows.append(
            RunRow(
                run_id=r.run_id,
                task_id=r.task_id,
                agent_id=r.agent_id,
                epoch=r.epoch,
                domain=task.domain if task else "",
                state=_state(r),
                score=score,
                spread=max(means.values()) - min(means.values()) if len(means) > 1 else None,
                judge_means=means,
                cost_usd=r.cost_usd,
                steps=r.step_count,
                latency_s=r.latency_s,
                n_files=r.n_files,
                tags=frozenset(tags.get(r.run_id, ())),
                failed_checks=frozenset(failed.get(r.run_id, ())),
                judges=frozenset(judges.get(r.run_id, ())),
                infrastructure_failure=r.infrastructure_failure,
                refused=r.run_id in refused,
                retried=r.attempt > 0
                or (r.infrastructure_failure and slots[(r.task_id, r.agent_id, r.epoch)] > 1),
                control=control,
            )
        )
    rows.sort(key=lambda x: (x.task_id, x.agent_id, x.epoch, x.run_id))
    return rows


class Facets(NamedTuple):
    """The values each filter can take in this campaign (the form's choices)."""

    agents: list[str]
    tasks: list[str]
    domains: list[str]
    tags: list[str]
    checks: list[str]
    judges: list[str]


def facets(rows: list[RunRow]) -> Facets:
    """Every agent, task, domain, tag, failed check and judge the rows carry, sorted."""
    return Facets(
        sorted({r.agent_id for r in rows}),
        sorted({r.task_id for r in rows}),
        sorted({r.domain for r in rows if r.domain}),
        sorted({t for r in rows for t in r.tags}),
        sorted({c for r in rows for c in r.failed_checks}),
        sorted({j for r in rows for j in r.judges}),
    )


class Selection(NamedTuple):
    """One page of the rows a query selects, and how many it selected in all."""

    rows: list[RunRow]
    total: int
    page: int
    pages: int


_KEYS: dict[str, Callable[[RunRow], float | None]] = {
    "score": lambda r: r.score,
    "spread": lambda r: r.spread,
    "cost": lambda r: r.cost_usd,
    "steps": lambda r: float(r.steps),
    "latency": lambda r: r.latency_s,
}


def _keep(r: RunRow, q: RunQuery, found: set[str] | None) -> bool:
    if found is not None and r.run_id not in found:
        return False
    for want, got in ((q.agent, r.agent_id), (q.task, r.task_id), (q.domain, r.domain)):
        if want and want != got:
            return False
    for want, within in ((q.tag, r.tags), (q.check, r.failed_checks), (q.judge, r.judges)):
        if want and want not in within:
            return False
    if q.min is not None and (r.score is None or r.score < q.min):
        return False
    if q.max is not None and (r.score is None or r.score > q.max):
        return False
    if q.infra and (q.infra == "yes") != r.infrastructure_failure:
        return False
    return not q.flag or (r.refused if q.flag == "refused" else r.retried)


def select(rows: list[RunRow], q: RunQuery, found: set[str] | None = None) -> Selection:
    """The rows `q` keeps (and, with a search, only runs in `found`), sorted, one page."""
    kept = [r for r in rows if _keep(r, q, found)]
    if q.sort != "task":
        key = _KEYS[q.sort]
        sign = -1.0 if q.order == "desc" else 1.0

        def order(r: RunRow) -> tuple[bool, float, str, str, int]:
            v = key(r)
            # Runs without the value (unscored, one judge) go last in either order.
            if v is None or math.isnan(v):
                return (True, 0.0, r.task_id, r.agent_id, r.epoch)
            return (False, sign * v, r.task_id, r.agent_id, r.epoch)

        kept.sort(key=order)
    elif q.order == "desc":
        kept.reverse()
    pages = max(1, math.ceil(len(kept) / PAGE_SIZE))
    page = min(q.page, pages)
    return Selection(kept[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], len(kept), page, pages)
