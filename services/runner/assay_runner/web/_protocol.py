"""The web tools' provider role, and the default that keeps the web off."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from assay_schemas import WebSource

__all__ = ["OfflineWeb", "WebAnswer", "WebProvider"]


class WebAnswer(NamedTuple):
    """What a web tool gives the agent, and the sources kept for it."""

    text: str
    sources: tuple[WebSource, ...] = ()


class WebProvider(Protocol):
    """Answers the agent's web_search and web_fetch tools (in the runner, never the sandbox)."""

    async def search(self, query: str) -> WebAnswer:
        """Search results as a numbered list."""
        ...

    async def fetch(self, url: str) -> WebAnswer:
        """A page as readable text."""
        ...


class OfflineWeb:
    """The default: the web is off in this campaign, and the agent is told so plainly."""

    async def search(self, query: str) -> WebAnswer:
        """Refuse clearly."""
        return WebAnswer(
            "web access is off in this evaluation: web_search is unavailable; "
            "work from the provided files."
        )

    async def fetch(self, url: str) -> WebAnswer:
        """Refuse clearly."""
        return WebAnswer(
            f"web access is off in this evaluation: cannot fetch {url}; "
            "work from the provided files."
        )
