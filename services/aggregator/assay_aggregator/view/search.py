"""Full-text search over a campaign's prompts, final messages and transcripts.

An SQLite FTS5 index in memory (the standard library's sqlite3; no service), built from
the log beside the projections and caught up to the fold's position before each search:
only events the fold admitted are indexed (`State.seen` holds each one's sequence).
Everything indexed is agent- or publisher-written, so it is bounded: each document is cut
at `DOC_CHARS`; a query is reduced to at most `MAX_TERMS` words of letters and digits,
each quoted, so no FTS5 syntax from a URL ever reaches the parser. Snippets come back as
plain strings with the matched words marked apart; the template escapes both.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import NamedTuple, cast

from assay.bus import Bus, LoggedEvent, RawMessage, decode_log, read_raw
from assay_schemas import AgentFinished, AgentStepLogged, ArtifactsSealed, TaskSubmitted

from ..state import State

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


def _doc(e: object) -> tuple[str, str] | None:
    """(place, text) of an event worth searching, None for the rest."""
    if isinstance(e, TaskSubmitted):
        return "prompt", e.task.prompt
    if isinstance(e, AgentFinished | ArtifactsSealed):
        return "final message", e.final_message
    if isinstance(e, AgentStepLogged):
        parts = [e.model_output]
        parts += [f"{c.name} {c.arguments}" for c in e.tool_calls]
        parts += [r.output for r in e.tool_results]
        return f"step {e.step}", "\n".join(parts)
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
        self.sequence = 0
        """The last log sequence looked at."""
        self._lock = asyncio.Lock()

    async def catch_up(self, bus: Bus, state: State) -> None:
        """Index the admitted events logged after `sequence`, up to the fold's position."""
        async with self._lock:
            until = state.last_sequence
            if until <= self.sequence:
                return
            texts: list[str] = []
            docs: list[_Doc] = []
            for kind in _TYPES:
                async with aclosing(self._read(bus, kind, until)) as events:
                    async for item in events:
                        if state.seen.get(item.event.event_id) != item.sequence:
                            continue  # refused, or a repeat: the fold did not count it
                        got = _doc(item.event)
                        if got is None or not got[1]:
                            continue
                        e = item.event
                        texts.append(_MARKS.sub(" ", got[1][:DOC_CHARS]))
                        docs.append(_Doc(e.campaign_id, e.run_id or "", e.task_id or "", got[0]))
            await asyncio.to_thread(self._insert, texts)
            self._docs += docs
            self.sequence = until

    async def _read(self, bus: Bus, kind: str, until: int) -> AsyncGenerator[LoggedEvent, None]:
        subject = bus.subjects.event(kind)
        raws = cast(
            AsyncGenerator[RawMessage, None],
            read_raw(bus.js, bus.stream.name, start=self.sequence + 1, subject=subject),
        )
        async with aclosing(raws) as stream:
            async for item in decode_log(_upto(stream, until)):
                yield item

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


async def _upto(raws: AsyncIterator[RawMessage], until: int) -> AsyncIterator[RawMessage]:
    async for raw in raws:
        if raw.sequence > until:
            return
        yield raw
