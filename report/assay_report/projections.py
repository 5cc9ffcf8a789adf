"""Projections: polars tables built lazily from the folded state.

Tables (every one sorted by its natural key, so two folds of the same log give equal
frames whatever order their events arrived in):

- ``runs`` — one row per run: campaign, task and its attributes, agent, family, epoch,
  state, stop reason, steps, tokens, cost, latency, failure, artifacts.
- ``steps`` — per-run summary of AgentStepLogged (count, tool calls, errors, latency).
- ``artifacts`` — one row per sealed file, flagged when it is an unchanged attachment.
- ``judgments`` — long form: run × judge × sample × dimension → score.
- ``verdicts`` — run × judge × sample: tag/check counts and evidence (files opened).
- ``tags`` — run × judge × sample × failure tag (the rule judge's too).
- ``checks`` — the rule judge's reference checks: run × check.
- ``judgment_failures``, ``judges``, ``tasks``, ``campaigns``.

``statistics_tables`` and ``count_tables`` turn them into the statistics library's inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from operator import attrgetter
from typing import Any

import polars as pl

from assay.heap import collector_paused
from assay_schemas import RULES_JUDGE_ID, RunState
from assay_schemas import run_state as lifecycle_state

from .frame_cache import VERDICT_TABLES, FrameCache, dirty_runs, spliced
from .projections_verdicts import VerdictTables, _by_sample
from .state import RunRecord, State
from .statistics import CountTables, Tables, make_tables
from .table_schemas import SCHEMAS, TABLE_NAMES, frame_of_rows

__all__ = ["TABLE_NAMES", "Projections", "run_state"]


def _as_rows(name: str, records: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Rows of a table whose columns are fields of the records, under the same names."""
    get = attrgetter(*SCHEMAS[name])
    return [get(r) for r in records]


_REPORT_NAMES: dict[RunState, str] = {"unknown": "requested", "running": "sandbox_ready"}
"""The report's names for the lifecycle's states (the rest keep theirs)."""


def run_state(run: RunRecord, judged: bool) -> str:
    """The run's lifecycle state (`assay_schemas.run_state`), by the report's names:
    failed (sealed afterwards or not), judged, sealed, finished, sandbox_ready, requested."""
    state = lifecycle_state(run.phase, judged)
    return _REPORT_NAMES.get(state, state)


class Projections(VerdictTables):
    """Read-side view of a :class:`State`; frames are built on first use and cached."""

    def __init__(self, state: State) -> None:
        self.state = state
        self._cache: dict[str, pl.DataFrame] = {}
        self._verdicts: list[Any] | None = None
        self._inputs: dict[str, set[tuple[str, str]]] = {}
        self._dirty: set[str] | None = None
        self._version = -1

    def table(self, name: str) -> pl.DataFrame:
        """One projection table by name (see ``TABLE_NAMES``)."""
        if self._version != self.state.version:
            self._cache.clear()
            self._verdicts = None
            self._inputs = {}
            self._dirty = None
            self._version = self.state.version
        if name not in self._cache:
            # With the cycle collector paused, as `build_report` has it: a 10x state's
            # tables make a million rows, whose allocations set off full passes over the
            # state they are read from (0.4 s each).
            with collector_paused():
                self._cache[name] = self._build(name)
        return self._cache[name]

    def _build(self, name: str) -> pl.DataFrame:
        """The table built from the state: spliced from the frame cache where it holds
        the verdict tables, else by its `_<name>_frame` or `_<name>_rows`."""
        frame: Callable[[], pl.DataFrame] | None = getattr(self, f"_{name}_frame", None)
        cache = self.state.frame_cache
        found = None
        if isinstance(cache, FrameCache) and name in VERDICT_TABLES:
            if self._dirty is None:
                self._dirty = dirty_runs(cache, self.state)
            found = spliced(
                cache,
                self.state,
                self._dirty,
                name,
                SCHEMAS[name],
                lambda vs: self._verdict_table(name, vs),
                _by_sample,
            )
        if found is not None:
            return found
        if frame is not None:
            return frame()
        build: Callable[[], list[tuple[Any, ...]]] = getattr(self, f"_{name}_rows")
        return frame_of_rows(build(), SCHEMAS[name])

    def tables(self) -> dict[str, pl.DataFrame]:
        """Every projection table, keyed by name."""
        return {name: self.table(name) for name in TABLE_NAMES}

    # --- helpers --------------------------------------------------------------------------

    def _attrs(self, run: RunRecord) -> tuple[str, str, str]:
        task = self.state.tasks.get(f"{run.campaign_id}/{run.task_id}")
        return (task.domain, task.phase, task.difficulty) if task else ("", "", "")

    def _attachments(self, run: RunRecord) -> set[tuple[str, str]]:
        # One set per task, not per run (read-only; dropped with the frames).
        key = f"{run.campaign_id}/{run.task_id}"
        inputs = self._inputs.get(key)
        if inputs is None:
            task = self.state.tasks.get(key)
            inputs = {(p, s) for p, s in task.attachments} if task else set()
            self._inputs[key] = inputs
        return inputs

    def _n_artifacts(self, run: RunRecord) -> int:
        inputs = self._attachments(run)
        files = self.state.artifacts.get(run.run_id, [])
        if not inputs:  # most tasks attach nothing: no file to look up
            return len(files)
        return sum(1 for f in files if (f.path, f.sha256) not in inputs)

    def _sorted_runs(self) -> list[RunRecord]:
        # A cancelled run never ran: it is in no table (the report's stopping section counts it).
        runs = self.state.runs
        return [runs[k] for k in sorted(runs) if runs[k].phase != "cancelled"]

    def _verdict_counts(self) -> dict[str, int]:
        """LLM verdicts (with scores) per run; the rule judge does not make a run judged."""
        out: dict[str, int] = {}
        for v in self.state.verdicts.values():
            if v.scores and v.judge_id != RULES_JUDGE_ID:
                out[v.run_id] = out.get(v.run_id, 0) + 1
        return out

    def _run_of(self, run_id: str) -> RunRecord | None:
        return self.state.runs.get(run_id)

    # --- row builders ---------------------------------------------------------------------

    def _latest_attempts(self) -> dict[tuple[str, str, str, int], int]:
        latest: dict[tuple[str, str, str, int], int] = {}
        for r in self.state.runs.values():
            slot = (r.campaign_id, r.task_id, r.agent_id, r.epoch)
            latest[slot] = max(latest.get(slot, 0), r.attempt)
        return latest

    def _runs_rows(self) -> list[tuple[Any, ...]]:
        counts = self._verdict_counts()
        latest = self._latest_attempts()
        rows = []
        for r in self._sorted_runs():
            n_art = self._n_artifacts(r)
            # The failure that decided the run stands, sealed afterwards or not.
            infra = r.infrastructure_failure
            # Empty: an agent's run sealed with nothing beyond the attachments, or an agent
            # failure that sealed nothing. A run still in progress is not (yet) empty; an
            # infrastructure failure is never the agent's.
            empty = not infra and ((n_art == 0) if r.sealed else r.failed)
            fin = r.finished
            rows.append(
                (
                    r.campaign_id,
                    r.task_id,
                    r.run_id,
                    r.agent_id,
                    r.agent_family,
                    r.agent_model,
                    r.epoch,
                    *self._attrs(r),
                    run_state(r, counts.get(r.run_id, 0) > 0),
                    r.stop_reason,
                    infra,
                    r.failure_stage,
                    r.failure_error,
                    r.sealed,
                    r.n_files,
                    n_art,
                    empty,
                    r.latency_s if fin else r.step_latency_us / 1e6,
                    r.cost_usd if fin else r.step_cost_nusd / 1e9,
                    r.steps if fin else r.step_count,
                    r.input_tokens if fin else r.step_input_tokens,
                    r.output_tokens if fin else r.step_output_tokens,
                    r.cached_tokens,
                    counts.get(r.run_id, 0),
                    r.first_sequence,
                    r.last_sequence,
                    r.attempt,
                    r.attempt < latest[(r.campaign_id, r.task_id, r.agent_id, r.epoch)],
                )
            )
        return rows

    def _steps_rows(self) -> list[tuple[Any, ...]]:
        return [
            (
                r.campaign_id,
                r.run_id,
                r.agent_id,
                r.step_count,
                r.step_max,
                r.tool_calls,
                r.tool_errors,
                r.truncated_outputs,
                r.step_latency_us / 1000.0,
                r.step_latency_us / 1000.0 / r.step_count if r.step_count else 0.0,
                r.step_cost_nusd / 1e9,
                r.step_input_tokens,
                r.step_output_tokens,
            )
            for r in self._sorted_runs()
            if r.step_count
        ]

    def _artifacts_rows(self) -> list[tuple[Any, ...]]:
        rows = []
        for rid in sorted(self.state.artifacts):
            run = self.state.runs[rid]
            inputs = self._attachments(run)
            for f in sorted(self.state.artifacts[rid], key=lambda a: a.path):
                rows.append(
                    (
                        run.campaign_id,
                        rid,
                        run.task_id,
                        run.agent_id,
                        f.path,
                        f.sha256,
                        f.size,
                        f.media_type,
                        (f.path, f.sha256) in inputs,
                    )
                )
        return rows

    def _judgment_failures_rows(self) -> list[tuple[Any, ...]]:
        failures = self.state.failures.values()
        return _as_rows(
            "judgment_failures", sorted(failures, key=lambda f: (f.run_id, f.judge_id, f.sample))
        )

    def _judges_rows(self) -> list[tuple[Any, ...]]:
        return _as_rows("judges", (j for _, j in sorted(self.state.judges.items())))

    def _tasks_rows(self) -> list[tuple[Any, ...]]:
        return _as_rows("tasks", (t for _, t in sorted(self.state.tasks.items())))

    def _campaigns_rows(self) -> list[tuple[Any, ...]]:
        rows = []
        for cid, c in sorted(self.state.campaigns.items()):
            rubric = c.get("rubric", {})
            rows.append(
                (
                    cid,
                    c.get("name", ""),
                    bool(c.get("scripted", False)),
                    int(c.get("epochs", 1)),
                    len(c.get("agents", [])),
                    len(c.get("judges", [])),
                    rubric.get("rubric_id", ""),
                    int(rubric.get("version", 0)),
                )
            )
        return rows

    # --- statistics inputs ----------------------------------------------------------------

    def statistics_tables(
        self,
        campaigns: list[str] | None = None,
        *,
        leave_out: Collection[tuple[str, str]] = (),
    ) -> Tables:
        """The statistics library's inputs, optionally limited to some campaigns.

        Ratings come from scored verdicts of known runs (never from the rule judge);
        tags include the rule judge's, which the library ignores for lack of ratings
        (the report counts them apart). `leave_out`: (campaign, judge) pairs whose
        ratings and tags do not count (judges that joined a campaign late).
        """
        # Runs whose request was never seen have no agent or task to attribute them to.
        runs = self._latest_runs().filter((pl.col("agent_id") != "") & (pl.col("task_id") != ""))
        ratings = self.table("judgments").filter(pl.col("judge_id") != RULES_JUDGE_ID)
        tags = self.table("tags")
        if campaigns is not None:
            keep = pl.col("campaign_id").is_in(campaigns)
            runs, ratings, tags = runs.filter(keep), ratings.filter(keep), tags.filter(keep)
        if leave_out:
            schema = {"campaign_id": pl.String, "judge_id": pl.String}
            pairs = pl.DataFrame(sorted(leave_out), schema=schema, orient="row")
            on = ["campaign_id", "judge_id"]
            ratings = ratings.join(pairs, on=on, how="anti")
            tags = tags.join(pairs, on=on, how="anti")
        attrs = runs.select("run_id", "agent_family", "epoch", "domain", "phase", "difficulty")
        rated = ratings.join(attrs, on="run_id", how="inner")
        return make_tables(rated, runs, tags.join(runs.select("run_id"), on="run_id", how="semi"))

    def control_runs(self) -> list[str]:
        """Runs of control agents: judged like any run, never in an agent's statistics."""
        return sorted(r.run_id for r in self.state.runs.values() if r.control_plan)

    def _latest_runs(self) -> pl.DataFrame:
        """Agents' runs that are the latest attempt of their (task, agent, epoch): what
        statistics see. Earlier attempts stay in the `runs` table, where accounting counts
        them; control runs stay there too, and only judge validity reads them."""
        runs = self.table("runs").filter(~pl.col("superseded")).drop("attempt", "superseded")
        return runs.filter(~pl.col("run_id").is_in(self.control_runs()))

    def count_tables(self, campaigns: list[str]) -> CountTables:
        """The inputs of the statistics library's plain counts for some campaigns.

        Every run of the campaigns (also runs whose request was never seen), and the
        rule judge's checks, verdicts and tags of those runs.
        """
        runs = self._latest_runs().filter(pl.col("campaign_id").is_in(campaigns))

        def rule_judge(name: str) -> pl.DataFrame:
            rows = self.table(name).filter(pl.col("judge_id") == RULES_JUDGE_ID)
            return rows.join(runs.select("run_id"), on="run_id", how="semi")

        return CountTables(runs, rule_judge("checks"), rule_judge("verdicts"), rule_judge("tags"))
