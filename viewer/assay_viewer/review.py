"""`assay view --review`: a reviewer grades runs blind, and each grade lands as a signed
human verdict; and the judges page's live "Judge validity (human)" table.

The review viewer serves only its own pages (a queue per campaign, a grading page per
run, its sealed files) and static assets: no campaign, run or live page, and no blob by
its hash (`/blob/` answers 404), so nothing it serves names a run's agent, its judges'
verdicts or whether it is a control, and no hash of a rebuilt control plan can be asked
about. Runs are addressed by an opaque token (a keyed hash of the run id with this
process's secret), so a reviewer cannot recompute a run id from an agent's name to
unblind it; a run's files are served only under its own token. The queue's order is keyed
by the deployment's secret (`REVIEW_KEY`). Every form
carries a CSRF token bound to the reviewer and the run (an HMAC with the same secret);
the host and origin checks of `hosts.py` still come first.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from assay.config import Settings
from assay.security.signing import deployment_secret, signer_for
from assay_report.projections import Projections
from assay_report.report import report_seed, rubric_anchor
from assay_report.review import (
    REVIEW_KEY,
    ReviewItem,
    human_validity,
    review_queue,
)
from assay_report.statistics import AnalysisSettings, validity_warnings
from assay_schemas import ID_PATTERN, FileRef, Rubric, Task, default_rubric

from .asgi import Request, Response, Route
from .data import Source, file_tree
from .grading import (
    Grade,
    ReviewerNotEnrolled,
    grade_problem,
    human_verdict,
    outcomes,
    publish_verdicts,
    require_enrolled,
)
from .pages import render_page
from .previews import blob_headers, preview_file

__all__ = ["ReviewDesk", "ReviewerNotEnrolled", "ValidityTable", "review_routes"]

_ID = ID_PATTERN.strip("^$")
_TOKEN = "[0-9a-f]{32}"


@dataclass
class ReviewDesk:
    """One reviewer's seat: who grades (their enrolled key must exist), the secret that
    keys run tokens and CSRF tokens, and the deployment's queue key."""

    settings: Settings
    name: str
    secret: bytes = field(default_factory=lambda: os.urandom(32), repr=False)
    queue_key: bytes = field(default=b"", repr=False)
    """The deployment's `REVIEW_KEY` (read from the home's keys when left empty)."""

    def __post_init__(self) -> None:
        # Refuse to start for a reviewer without an enrolled key (saying how to enrol it).
        require_enrolled(self.settings, self.judge_id)
        signer_for(self.settings, self.judge_id)
        if not self.queue_key:
            self.queue_key = deployment_secret(self.settings, REVIEW_KEY)

    @property
    def judge_id(self) -> str:
        """The judge id of this reviewer's verdicts."""
        return f"reviewer-{self.name}"

    def _mac(self, *parts: str) -> str:
        text = "\x1f".join(parts).encode()
        return hmac.new(self.secret, text, hashlib.sha256).hexdigest()[:32]

    def token(self, run_id: str) -> str:
        """The opaque name of a run in this reviewer's pages."""
        return self._mac("run", self.judge_id, run_id)

    def csrf(self, run_id: str) -> str:
        """The form token of this reviewer's grade of `run_id`."""
        return self._mac("csrf", self.judge_id, run_id)


class ValidityTable:
    """The human-validity rows of a campaign, computed once per log version."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._cache: dict[tuple[str, int], dict[str, Any]] = {}

    def rows(self, p: Projections, campaign: str) -> dict[str, Any]:
        """Agreement rows (κ, weighted κ, Spearman, confusion counts) and their warnings."""
        key = (campaign, p.state.version)
        if key not in self._cache:
            settings = AnalysisSettings(
                seed=report_seed([campaign]),
                n_resamples=self.source.resamples,
                anchor=rubric_anchor(p, [campaign]),
            )
            agreement, _ = human_validity(p, campaign, settings)
            n = sum(v.campaign_id == campaign for v in p.state.human_verdicts.values())
            self._cache = {
                key: {
                    "human_verdicts": n,
                    "rows": [{k: _finite(v) for k, v in r.model_dump().items()} for r in agreement],
                    "warnings": [w.message for w in validity_warnings(agreement=agreement)],
                }
            }
        return self._cache[key]


def _finite(value: object) -> object:
    """NaN (a figure the data cannot carry) as JSON null."""
    return None if isinstance(value, float) and math.isnan(value) else value


_SAME_ORIGIN = (("referrer-policy", "same-origin"),)
"""Review pages' own policy: under the viewer's default "no-referrer", a browser sends a
form's POST with `Origin: null`, which the origin check rightly refuses."""


def _page(template: str, status: int = 200, **context: Any) -> Response:
    body = render_page(f"view/{template}", **context).encode()
    return Response(body, status=status, headers=_SAME_ORIGIN)


def _rubric(p: Projections, campaign: str, task: Task | None) -> Rubric:
    """The rubric the run is graded on: the task's own, else the campaign's."""
    if task is not None and task.judge.rubric is not None:
        return task.judge.rubric
    raw = p.state.campaigns.get(campaign, {}).get("rubric")
    try:
        return Rubric.model_validate(raw) if raw else default_rubric()
    except ValidationError:
        return default_rubric()


def review_routes(source: Source, desk: ReviewDesk) -> list[Route]:
    """The review viewer's pages."""

    def page(template: str, status: int = 200, **context: Any) -> Response:
        # Every page's header names who grades, the outcome pages' included.
        return _page(template, status, reviewer=desk.judge_id, **context)

    def queue_of(p: Projections, campaign: str) -> list[ReviewItem]:
        return review_queue(p, campaign, desk.judge_id, key=desk.queue_key)

    def find(p: Projections, campaign: str, token: str) -> str | None:
        for run in p.state.runs.values():
            if run.campaign_id == campaign and hmac.compare_digest(desk.token(run.run_id), token):
                return run.run_id
        return None

    async def index(req: Request) -> Response:
        p = await source.projections()
        campaigns = [(c, len(queue_of(p, c))) for c in sorted(p.state.campaigns)]
        return page("review_index.html.j2", campaigns=campaigns)

    async def queue(req: Request) -> Response:
        cid = req.match["campaign"]
        p = await source.projections()
        if cid not in p.state.campaigns:
            return page("review_message.html.j2", 404, title="Unknown campaign", message=cid)
        items = [(i.position, desk.token(i.run_id), i.task_id) for i in queue_of(p, cid)]
        graded = sum(
            v.judge_id == desk.judge_id and v.campaign_id == cid
            for v in p.state.human_verdicts.values()
        )
        return page("review_queue.html.j2", campaign=cid, items=items, graded=graded)

    async def grade_page(req: Request) -> Response:
        cid, token = req.match["campaign"], req.match["token"]
        p = await source.projections()
        run_id = find(p, cid, token)
        view = await source.run(run_id) if run_id else None
        if run_id is None or view is None:
            return page("review_message.html.j2", 404, title="Not in the queue", message=token)
        if req.method == "POST":
            return await submit(req, p, cid, run_id)
        task = view.history.task
        seal = view.seal
        return page(
            "review_run.html.j2",
            campaign=cid,
            token=token,
            csrf=desk.csrf(run_id),
            task=task,
            rubric=_rubric(p, cid, task),
            steps=view.history.steps,
            final=seal.final_message if seal else "",
            tree=file_tree(list(seal.files)) if seal else [],
        )

    async def submit(req: Request, p: Projections, cid: str, run_id: str) -> Response:
        if not hmac.compare_digest(req.form.get("csrf", ""), desk.csrf(run_id)):
            return page(
                "review_message.html.j2",
                403,
                title="Refused",
                message="the form's CSRF token is missing or wrong: reload the page",
            )
        scores: dict[str, object] = {}
        for key, value in req.form.items():
            if key.startswith("score_"):
                text = value.strip()
                scores[key.removeprefix("score_")] = (
                    int(text) if re.fullmatch(r"\d{1,2}", text) else text
                )
        try:
            grade = Grade.model_validate(
                {"run_id": run_id, "scores": scores, "note": req.form.get("note", "")}
            )
        except ValidationError as e:
            first = e.errors()[0]
            why = f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"
            return page("review_message.html.j2", 400, title="Refused", message=why)
        problem = grade_problem(p, desk.judge_id, grade)
        if problem is not None:
            return page("review_message.html.j2", 400, title="Refused", message=problem)
        event = human_verdict(p, desk.judge_id, grade, service=desk.judge_id)
        sequences = await publish_verdicts(desk.settings, desk.judge_id, [event])
        said = outcomes(await source.projections(), sequences)[0]
        if not said.counted:
            return page(
                "review_message.html.j2",
                409,
                title="Refused by the log",
                message=said.reason,
                campaign=cid,
            )
        left = queue_of(await source.projections(), cid)
        after = desk.token(left[0].run_id) if left else None
        return page(
            "review_message.html.j2",
            title="Verdict recorded",
            campaign=cid,
            message=f"signed by {desk.judge_id}, logged at sequence {said.sequence}",
            next_token=after,
        )

    async def own_file(req: Request) -> tuple[FileRef, bytes] | Response:
        """The sealed file `?path=` of the run the page token names, and its bytes."""
        cid, token = req.match["campaign"], req.match["token"]
        p = await source.projections()
        run_id = find(p, cid, token)
        view = await source.run(run_id) if run_id else None
        path = req.query.get("path", "")
        ref = (
            next((f for f in view.seal.files if f.path == path), None)
            if view and view.seal
            else None
        )
        if ref is None:
            return page("review_message.html.j2", 404, title="No such file", message=path)
        try:
            data = await asyncio.to_thread(source.store.get_bytes, ref.sha256)
        except Exception as e:  # a missing or corrupt blob is shown, never raised
            return page("review_message.html.j2", 502, title="Unreadable", message=str(e))
        return ref, data

    async def sealed_file(req: Request) -> Response:
        found = await own_file(req)
        if isinstance(found, Response):
            return found
        ref, data = found
        return page(
            "review_file.html.j2",
            campaign=req.match["campaign"],
            token=req.match["token"],
            ref=ref,
            shown=await preview_file(ref.path, data),
        )

    async def raw_file(req: Request) -> Response:
        found = await own_file(req)
        if isinstance(found, Response):
            return found
        ref, data = found
        content_type, headers = blob_headers(ref.path)
        return Response(data, content_type, headers=headers)

    return [
        Route(re.compile("/"), index),
        Route(re.compile("/review"), index),
        Route(re.compile(f"/review/(?P<campaign>{_ID})"), queue),
        Route(
            re.compile(f"/review/(?P<campaign>{_ID})/run/(?P<token>{_TOKEN})"),
            grade_page,
            post=True,
        ),
        Route(re.compile(f"/review/(?P<campaign>{_ID})/run/(?P<token>{_TOKEN})/file"), sealed_file),
        Route(re.compile(f"/review/(?P<campaign>{_ID})/run/(?P<token>{_TOKEN})/raw"), raw_file),
    ]
