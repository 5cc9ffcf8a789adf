"""The viewer's pages: campaign, task, run, sealed file, compare, judges, live events.

Handlers only gather data from `Source` (the report's projections, `assay audit`'s run
audit, the blob store) and render `templates/view/*.html.j2` with the shared, autoescaped
environment, so every agent-written string reaches the page as escaped text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from markupsafe import Markup

from assay_report.html import plots, tables
from assay_report.report import Report
from assay_report.state import State
from assay_schemas import ID_PATTERN, AssayError, BlobNotFound, Rubric, StoreError

from .asgi import Request, Response, Route, Stream, asgi_app
from .data import RunView, Source, file_tree
from .grading import HumanRow, human_verdicts_csv
from .judges import disagreements
from .live import events
from .pages import render_page, report_css, static
from .previews import blob_headers, preview_file, pygments_css
from .review import ReviewDesk, ValidityTable, review_routes
from .runs import MAX_COMPARED, Facets, RunQuery, compared_runs, control_label, facets, select
from .search import terms
from .timeline import timeline
from .transcript import transcript

__all__ = ["create_app"]

_ID = ID_PATTERN.strip("^$")
_SHA = re.compile(r"[0-9a-f]{64}")


def _page(template: str, status: int = 200, **context: Any) -> Response:
    return Response(render_page(f"view/{template}", **context).encode(), status=status)


def _missing(what: str) -> Response:
    return _page("missing.html.j2", status=404, what=what)


def _css() -> bytes:
    return report_css() + static("view.css") + pygments_css().encode()


class _Head(NamedTuple):
    """What the campaign page draws once per log version: the answer, the filter choices."""

    html: Markup
    facets: Facets


def _head(report: Report, campaign: str, choices: Facets) -> _Head:
    board = [c for s in plots(report) for c in s.charts if c.title.startswith("Leaderboard")]
    warnings = next((t for t in tables(report) if t.title.startswith("Warnings") and t.rows), None)
    html = render_page(
        "view/campaign_head.html.j2",
        campaign=campaign,
        report=report,
        leaderboard=board,
        warnings=warnings,
    )
    return _Head(Markup(html), choices)


def _known(state: State, campaign: str) -> bool:
    return campaign in state.campaigns or any(
        r.campaign_id == campaign for r in state.runs.values()
    )


def _title(view: RunView) -> str:
    """agent · task · epoch, as far as the log says them."""
    h = view.history
    epoch = h.request.epoch if h.request else h.seal.epoch if h.seal else None
    parts = [view.audit.agent_id or "unknown agent", view.audit.task_id or "unknown task"]
    return " · ".join(parts + ([f"epoch {epoch}"] if epoch is not None else []))


def create_app(
    source: Source, *, hosts: Iterable[str] = (), review: ReviewDesk | None = None
) -> Any:
    """The viewer over one log and blob store, as an ASGI callable answering only to its
    own address and `hosts` (names it is served as besides loopback). With `review`, it
    serves only that reviewer's blind review pages (`review.py`)."""
    drawn: dict[tuple[str, int, int], Response] = {}
    heads: dict[tuple[str, int, int], _Head] = {}
    validity = ValidityTable(source)

    async def index(req: Request) -> Response:
        p = await source.projections()
        return _page(
            "index.html.j2",
            campaigns=p.table("campaigns").to_dicts(),
            sequence=p.state.last_sequence,
        )

    async def campaign(req: Request) -> Response:
        cid = req.match["campaign"]
        p = await source.projections()
        if not _known(p.state, cid):
            return _missing(f"campaign {cid}")
        # The answer (report, leaderboard, warnings) is drawn once per log version (a
        # K-Bench report takes longer than the 300 ms budget); the runs table per request,
        # from rows also kept per version: the URL's filters, sort and page select them.
        key = (cid, p.state.version, p.state.last_sequence)
        if key not in heads:
            heads.clear()
            heads[key] = _head(source.report(p, cid), cid, facets(source.rows(p, cid)))
        query, notes = RunQuery.parse(req.query)
        found = None
        if query.q and terms(query.q):
            found = source.search(p, cid, query.q)
        elif query.q:
            notes.append("q: no words to search for (ignored)")
        chosen = select(source.rows(p, cid), query, set(found) if found is not None else None)
        hits = source.snippets(query.q, found, chosen.rows) if found is not None else None
        return _page(
            "campaign.html.j2",
            campaign=cid,
            head=heads[key].html,
            sections=[],
            facets=heads[key].facets,
            q=query,
            notes=notes,
            sel=chosen,
            hits=hits,
            max_compared=MAX_COMPARED,
            sequence=p.state.last_sequence,
        )

    async def full_report(req: Request) -> Response:
        cid = req.match["campaign"]
        p = await source.projections()
        if not _known(p.state, cid):
            return _missing(f"campaign {cid}")
        key = (cid, p.state.version, p.state.last_sequence)
        if key not in drawn:
            report = source.report(p, cid)
            drawn.clear()
            drawn[key] = _page(
                "report.html.j2",
                campaign=cid,
                plots=plots(report),
                tables=tables(report),
                sequence=p.state.last_sequence,
            )
        return drawn[key]

    async def task(req: Request) -> Response:
        cid, tid = req.match["campaign"], req.match["task"]
        p = await source.projections()
        runs = sorted(
            (r for r in p.state.runs.values() if r.campaign_id == cid and r.task_id == tid),
            key=lambda r: (r.agent_id, r.epoch),
        )
        if not runs:
            return _missing(f"task {tid} in campaign {cid}")
        first = await source.run(runs[0].run_id)
        spec = first.history.task if first is not None else None
        verdicts = [v for v in p.state.verdicts.values() if v.campaign_id == cid]
        checks = {
            r.run_id: [c for v in verdicts if v.run_id == r.run_id for c in v.checks] for r in runs
        }
        tags = {
            r.run_id: sorted({t for v in verdicts if v.run_id == r.run_id for t in v.tags})
            for r in runs
        }
        rubric = spec.judge.rubric if spec is not None else None
        if rubric is None and cid in p.state.campaigns:
            rubric = Rubric.model_validate(p.state.campaigns[cid].get("rubric") or {})
        given = [
            (
                c.name,
                c.kind,
                "; ".join(f"{k} = {v}" for k, v in c.model_dump(exclude={"name", "kind"}).items()),
            )
            for c in (spec.reference_checks if spec is not None else [])
        ]
        return _page(
            "task.html.j2",
            campaign=cid,
            task_id=tid,
            task=spec,
            runs=runs,
            rubric=rubric,
            given_checks=given,
            max_compared=MAX_COMPARED,
            controls={r.run_id: control_label(p.state, r.run_id) for r in runs},
            scores={r.run_id: r.score for r in source.rows(p, cid)},
            checks=checks,
            tags=tags,
            anchor=first.audit.contribution.anchor if first else 8,
            sequence=p.state.last_sequence,
        )

    async def run(req: Request) -> Response:
        view = await source.run(req.match["run"])
        if view is None:
            return _missing(f"run {req.match['run']}")
        seal = view.seal
        control = control_label((await source.projections()).state, view.audit.run_id)
        return _page(
            "run.html.j2",
            v=view,
            a=view.audit,
            control=control,
            steps=transcript(view.history.steps),
            title=_title(view),
            spans=timeline(view.audit.chain, view.history.steps),
            tree=file_tree(list(seal.files)) if seal else [],
            sequence=view.audit.chain[-1].sequence,
        )

    async def sealed_file(req: Request) -> Response:
        view = await source.run(req.match["run"])
        path = req.query.get("path", "")
        ref = (
            next((f for f in view.seal.files if f.path == path), None)
            if view and view.seal
            else None
        )
        if view is None or ref is None:
            return _missing(f"sealed file {path!r} of run {req.match['run']}")
        try:
            data = source.store.get_bytes(ref.sha256)
        except (AssayError, OSError) as e:
            return _page(
                "file.html.j2", status=502, a=view.audit, ref=ref, shown=None, error=str(e)
            )
        return _page(
            "file.html.j2",
            a=view.audit,
            ref=ref,
            shown=await preview_file(ref.path, data),
            error="",
        )

    async def blob(req: Request) -> Response:
        sha = req.match["sha"]
        try:
            data = source.store.get_bytes(sha)  # verified against its address
        except BlobNotFound:
            return _missing(f"blob {sha}")
        except (StoreError, OSError) as e:
            return Response(f"blob {sha} failed verification: {e}\n".encode(), "text/plain", 502)
        content_type, headers = blob_headers(req.query.get("name", sha))
        return Response(data, content_type, headers=headers)

    async def compare(req: Request) -> Response:
        chosen = compared_runs(req.params)
        if isinstance(chosen, str):
            return _page("message.html.j2", status=400, title="Nothing to compare", message=chosen)
        views = [await source.run(i) for i in chosen]
        unknown = [i for i, v in zip(chosen, views, strict=True) if v is None]
        if unknown:
            return _missing(f"run(s) {', '.join(unknown)} to compare")
        p = await source.projections()
        return _page(
            "compare.html.j2",
            views=views,
            controls={i: control_label(p.state, i) for i in chosen},
            transcripts=[transcript(v.history.steps) for v in views if v is not None],
        )

    async def judges(req: Request) -> Response:
        cid = req.match["campaign"]
        p = await source.projections()
        report = source.report(p, cid)
        wanted = {"Judge strictness", "Self-preference", "Judge agreement", "Judges"}
        judge_plots = [
            c for s in plots(report) for c in s.charts if c.title.startswith("Judge agreement")
        ]
        return _page(
            "judges.html.j2",
            campaign=cid,
            charts=judge_plots,
            tables=[t for t in tables(report) if t.title in wanted],
            worst=disagreements(p, cid),
            human=validity.rows(p, cid),
            sequence=p.state.last_sequence,
        )

    async def human_validity(req: Request) -> Response:
        p = await source.projections()
        body = json.dumps(validity.rows(p, req.match["campaign"]), allow_nan=False, default=str)
        return Response(body.encode(), "application/json")

    async def human_csv(req: Request) -> Response:
        cid = req.match["campaign"]
        p = await source.projections()
        if not _known(p.state, cid):
            return _missing(f"campaign {cid}")
        rows = []
        for run_id in sorted(
            {v.run_id for v in p.state.human_verdicts.values() if v.campaign_id == cid}
        ):
            view = await source.run(run_id)  # the note is in the event, not the fold
            for e in view.history.verdicts.values() if view else ():
                if e.judge_kind == "human":
                    rows.append(
                        HumanRow(
                            e.judge_id,
                            run_id,
                            e.task_id or "",
                            {k: s.score for k, s in e.scores.items()},
                            e.rationale,
                        )
                    )
        name = f"attachment; filename=human-verdicts-{cid}.csv"
        return Response(
            human_verdicts_csv(rows),
            "text/csv; charset=utf-8",
            headers=(("content-disposition", name),),
        )

    async def live(req: Request) -> Response | Stream:
        run_id, cid = req.query.get("run", "*"), req.query.get("campaign", "*")
        start = req.query.get("from", "1")
        if not all(re.fullmatch(_ID, x) for x in (run_id, cid) if x != "*") or not start.isdigit():
            return Response(b"bad live filter\n", "text/plain", 400)
        return Stream(events(source, cid, run_id, int(start)))

    async def css(req: Request) -> Response:
        return Response(_css(), "text/css; charset=utf-8")

    async def script(req: Request) -> Response:
        return Response(static("live.js"), "text/javascript; charset=utf-8")

    async def validity_script(req: Request) -> Response:
        return Response(static("validity.js"), "text/javascript; charset=utf-8")

    assets = [
        ("/static/view.css", css),
        ("/static/live.js", script),
        ("/static/validity.js", validity_script),
    ]
    if review is not None:  # no /blob/: a hash must tell a reviewer nothing (review.py)
        return asgi_app(
            [*review_routes(source, review), *(Route(re.compile(p), h) for p, h in assets)],
            lambda path: _missing(path),
            hosts,
        )

    routes = [
        ("/", index),
        (f"/campaign/(?P<campaign>{_ID})", campaign),
        (f"/campaign/(?P<campaign>{_ID})/report", full_report),
        (f"/campaign/(?P<campaign>{_ID})/judges", judges),
        (f"/campaign/(?P<campaign>{_ID})/validity.json", human_validity),
        (f"/campaign/(?P<campaign>{_ID})/human-verdicts.csv", human_csv),
        (f"/campaign/(?P<campaign>{_ID})/task/(?P<task>{_ID})", task),
        (f"/run/(?P<run>{_ID})", run),
        (f"/run/(?P<run>{_ID})/file", sealed_file),
        ("/compare", compare),
        ("/live", live),
        ("/blob/(?P<sha>[0-9a-f]{64})", blob),
        *assets,
    ]
    return asgi_app(
        [Route(re.compile(p), h) for p, h in routes], lambda path: _missing(path), hosts
    )
