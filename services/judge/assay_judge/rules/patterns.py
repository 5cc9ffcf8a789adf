"""Patterns over agent- and task-controlled text, compiled by RE2 (linear time).

Python's `re` backtracks: `\\w+://\\S+` over a million-character word is quadratic and
holds the GIL for an hour. RE2 matches in time linear in the text whatever the pattern,
so every rule pattern compiles here. RE2's `\\w`, `\\d` and `\\b` are ASCII-only, which is
why rules spell Unicode word characters as `WORD`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import re2

__all__ = ["WORD", "AgentMatch", "AgentPattern", "rx"]

WORD = r"\p{L}\p{N}_"
"""What Python's `\\w` matches (letters, digits, underscore), as the inside of an RE2 class."""


class AgentMatch(Protocol):
    """The part of an RE2 match the rules use."""

    def group(self, index: int = 0) -> str:
        """A captured group (0: the whole match)."""

    def start(self, index: int = 0) -> int:
        """Where the match (or a group) starts."""

    def end(self, index: int = 0) -> int:
        """Where the match (or a group) ends."""


class AgentPattern(Protocol):
    """A compiled RE2 pattern."""

    def search(self, text: str) -> AgentMatch | None:
        """The first match in `text`, or None."""

    def match(self, text: str) -> AgentMatch | None:
        """A match anchored at the start of `text`, or None."""

    def finditer(self, text: str) -> Iterator[AgentMatch]:
        """Every non-overlapping match, left to right."""

    def sub(self, repl: str, text: str) -> str:
        """`text` with every match replaced by `repl`."""


def rx(pattern: str, *, ignore_case: bool = False) -> AgentPattern:
    """`pattern` compiled by RE2 (a programming error, not input, if it does not compile)."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.max_mem = 64 << 20  # Unicode classes with counted repeats need more than 8 MiB
    compiled: AgentPattern = re2.compile(pattern, options)
    return compiled


def escape(literal: str) -> str:
    """`literal` quoted for an RE2 pattern."""
    quoted: str = re2.escape(literal)
    return quoted
