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
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import NamedTuple

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


class SearchIndex:
    """The index of one log, caught up on demand."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(body, campaign UNINDEXED, run UNINDEXED, "
            "task UNINDEXED, place UNINDEXED, tokenize='unicode61')"
        )
        self.sequence = 0
        """The last log sequence looked at."""
        self._lock = asyncio.Lock()

    async def catch_up(self, bus: Bus, state: State) -> None:
        """Index the admitted events logged after `sequence`, up to the fold's position."""
        async with self._lock:
            until = state.last_sequence
            if until <= self.sequence:
                return
            rows: list[tuple[str, str, str, str, str]] = []
            for kind in _TYPES:
                async with aclosing(self._read(bus, kind, until)) as events:
                    async for item in events:
                        if state.seen.get(item.event.event_id) != item.sequence:
                            continue  # refused, or a repeat: the fold did not count it
                        got = _doc(item.event)
                        if got is None or not got[1]:
                            continue
                        e = item.event
                        body = _MARKS.sub(" ", got[1][:DOC_CHARS])
                        rows.append((body, e.campaign_id, e.run_id or "", e.task_id or "", got[0]))
            await asyncio.to_thread(self._insert, rows)
            self.sequence = until

    async def _read(self, bus: Bus, kind: str, until: int) -> AsyncIterator[LoggedEvent]:
        subject = bus.subjects.event(kind)
        raws = read_raw(bus.js, bus.stream.name, start=self.sequence + 1, subject=subject)
        async with aclosing(raws) as stream:
            async for item in decode_log(_upto(stream, until)):
                yield item

    def _insert(self, rows: list[tuple[str, str, str, str, str]]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT INTO docs (body, campaign, run, task, place) VALUES (?, ?, ?, ?, ?)", rows
            )

    def matches(self, campaign: str, query: str, runs_of: dict[str, list[str]]) -> set[str]:
        """Every run of `campaign` where all words of `query` occur in one document (a
        prompt's match counts for every run of its task, `runs_of`: task id → run ids)."""
        match = _match(query)
        if not match:
            return set()
        found: set[str] = set()
        rows = self._db.execute(
            "SELECT DISTINCT run, task FROM docs WHERE docs MATCH ? AND campaign = ?",
            (match, campaign),
        )
        for run, task in rows:
            found.update([run] if run else runs_of.get(task, []))
        return found

    def snippets(self, campaign: str, query: str, runs: dict[str, str]) -> dict[str, Hit]:
        """Run id → its best-ranked hit, for the runs shown (`runs`: run id → task id)."""
        match = _match(query)
        if not match or not runs:
            return {}
        ids, tasks = list(runs), sorted(set(runs.values()))
        marks = ", ".join("?" * len(ids)), ", ".join("?" * len(tasks))
        rows = self._db.execute(
            f"SELECT run, task, place, snippet(docs, 0, '{_OPEN}', '{_CLOSE}', '…', 16) FROM docs "
            f"WHERE docs MATCH ? AND campaign = ? AND (run IN ({marks[0]}) "
            f"OR (run = '' AND task IN ({marks[1]}))) ORDER BY rank",
            (match, campaign, *ids, *tasks),
        ).fetchall()
        hits: dict[str, Hit] = {}
        for run, task, place, snippet in rows:
            hit = Hit(place, _pieces(snippet))
            for rid in [run] if run else [r for r, t in runs.items() if t == task]:
                hits.setdefault(rid, hit)
        return hits


def _match(query: str) -> str:
    """An FTS5 query of quoted words only: every word must occur ("" when there are none)."""
    return " ".join('"' + w.replace('"', "") + '"' for w in terms(query))


async def _upto(raws: AsyncIterator[RawMessage], until: int) -> AsyncIterator[RawMessage]:
    async for raw in raws:
        if raw.sequence > until:
            return
        yield raw
