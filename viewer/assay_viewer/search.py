"""Full-text search over a campaign's prompts, final messages and transcripts.

An SQLite FTS5 index in memory (the standard library's sqlite3; no service), fed by the
same fold that builds the projections (`fold_stream(observe=...)`), batch by batch, so the
log is read once: only events the fold counted are indexed (`State.seen` holds each
one's sequence).
Everything indexed is agent- or publisher-written, so it is bounded: each document is cut
at `DOC_CHARS`; a query is reduced to at most `MAX_TERMS` words of letters and digits,
each quoted, so no FTS5 syntax from a URL ever reaches the parser. Snippets come back as
plain strings with the matched words marked apart; the template escapes both.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any, NamedTuple

from assay.bus import RawMessage
from assay_report.state import State

__all__ = ["DOC_CHARS", "MAX_TERMS", "Hit", "SearchIndex", "terms"]

DOC_CHARS = 100_000
"""Characters of one document (a step, a prompt, a final message) that are indexed."""
MAX_TERMS = 12
TERM_CHARS = 64
_WORD = re.compile(r"\w+")
_OPEN, _CLOSE = "\x02", "\x03"
_MARKS = re.compile(f"[{_OPEN}{_CLOSE}]")
_TYPES = ("TaskSubmitted", "AgentStepLogged", "AgentFinished", "ArtifactsSealed")


class Hit(NamedTuple):
    """Where a search matched in one run, and the text around the match."""

    place: str
    """prompt, final message, or step N."""
    parts: tuple[tuple[str, bool], ...]
    """The snippet as (text, matched) pieces."""


def terms(query: str) -> list[str]:
    """The words of a query that are searched for (bounded in number and length)."""
    return [w[:TERM_CHARS] for w in _WORD.findall(query)[:MAX_TERMS]]


def _str(d: object, key: str) -> str:
    value = d.get(key) if isinstance(d, dict) else None
    return value if isinstance(value, str) else ""


def _strings(items: object, *keys: str) -> list[str]:
    if not isinstance(items, list):
        return []
    return [_str(i, k) for i in items for k in keys]


def _doc(kind: str, d: dict[str, Any]) -> tuple[str, str] | None:
    """(place, text) of an event worth searching, from its JSON; None for the rest."""
    if kind == "TaskSubmitted":
        return "prompt", _str(d.get("task"), "prompt")
    if kind in ("AgentFinished", "ArtifactsSealed"):
        return "final message", _str(d, "final_message")
    if kind == "AgentStepLogged":
        parts = [_str(d, "model_output"), *_strings(d.get("tool_calls"), "name", "arguments")]
        parts += _strings(d.get("tool_results"), "output")
        step = d.get("step")
        return f"step {step if isinstance(step, int) else '?'}", "\n".join(p for p in parts if p)
    return None


def _pieces(snippet: str) -> tuple[tuple[str, bool], ...]:
    out: list[tuple[str, bool]] = []
    for i, chunk in enumerate(re.split(f"{_OPEN}|{_CLOSE}", snippet)):
        if chunk:
            out.append((chunk, i % 2 == 1))
    return tuple(out)


class _Doc(NamedTuple):
    campaign: str
    run: str
    task: str
    place: str


class SearchIndex:
    """The index of one log, caught up on demand.

    FTS5 holds only the text; which campaign, run and place a document belongs to is kept
    here by rowid, so a search over a whole K-Bench campaign reads rowids alone and the
    snippets are cut only for the page of runs shown.
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='unicode61')")
        self._docs: list[_Doc] = []
        """rowid - 1 → what the document is."""

    def observe(self, state: State, batch: list[RawMessage]) -> None:
        """Index the text of a batch the fold has just folded (`fold_stream`'s `observe`):
        only messages it counted, read as plain JSON (the fold validated them)."""
        texts: list[str] = []
        docs: list[_Doc] = []
        for raw in batch:
            kind = raw.subject.rsplit(".", 3)[-3] if raw.subject.count(".") >= 3 else ""
            if kind not in _TYPES or raw.sequence in state.refused:
                continue  # a refused message is never parsed here (it may be oversized)
            try:
                d = json.loads(raw.data)
            except ValueError:
                continue
            if not isinstance(d, dict) or state.seen.get(str(d.get("event_id"))) != raw.sequence:
                continue  # refused, or a repeat: the fold did not count it
            got = _doc(kind, d)
            if got is None or not got[1]:
                continue
            texts.append(_MARKS.sub(" ", got[1][:DOC_CHARS]))
            docs.append(_Doc(_str(d, "campaign_id"), _str(d, "run_id"), _str(d, "task_id"), got[0]))
        if texts:
            self._insert(texts)
            self._docs += docs

    def _insert(self, texts: list[str]) -> None:
        first = len(self._docs) + 1
        with self._db:
            self._db.executemany(
                "INSERT INTO docs (rowid, body) VALUES (?, ?)",
                ((first + i, text) for i, text in enumerate(texts)),
            )

    def search(self, campaign: str, query: str, runs_of: dict[str, list[str]]) -> dict[str, int]:
        """Run id → the first document of it holding every word of `query`, for each run of
        `campaign` that has one (a prompt counts for every run of its task, `runs_of`:
        task id → run ids; a run's own text is preferred to its prompt)."""
        match = _match(query)
        if not match:
            return {}
        found: dict[str, int] = {}
        prompts: dict[str, int] = {}
        for (rowid,) in self._db.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rowid", (match,)
        ):
            doc = self._docs[rowid - 1]
            if doc.campaign != campaign:
                continue
            if doc.run:
                found.setdefault(doc.run, rowid)
            else:
                prompts.setdefault(doc.task, rowid)
        for task, rowid in prompts.items():
            for run in runs_of.get(task, []):
                found.setdefault(run, rowid)
        return found

    def snippets(self, query: str, docs: dict[str, int]) -> dict[str, Hit]:
        """Run id → the text around the match in its document (`docs`: run id → rowid, as
        `search` found them, for the runs shown)."""
        match = _match(query)
        hits: dict[str, Hit] = {}
        cut: dict[int, str] = {}
        for run, rowid in docs.items():
            if rowid not in cut:
                got = self._db.execute(
                    f"SELECT snippet(docs, 0, '{_OPEN}', '{_CLOSE}', '…', 16) FROM docs "
                    "WHERE docs MATCH ? AND rowid = ?",
                    (match, rowid),
                ).fetchone()
                cut[rowid] = got[0] if got else ""
            hits[run] = Hit(self._docs[rowid - 1].place, _pieces(cut[rowid]))
        return hits


def _match(query: str) -> str:
    """An FTS5 query of quoted words only: every word must occur ("" when there are none)."""
    return " ".join('"' + w.replace('"', "") + '"' for w in terms(query))
