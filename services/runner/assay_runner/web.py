"""Web tools run in the runner (never in the sandbox) through a pluggable provider."""

from __future__ import annotations

from typing import Protocol
from urllib.parse import urlparse

import httpx

__all__ = ["AllowListWeb", "OfflineWeb", "WebProvider"]


class WebProvider(Protocol):
    """Answers the agent's web_search and web_fetch tools."""

    async def search(self, query: str) -> str:
        """Search results as text."""
        ...

    async def fetch(self, url: str) -> str:
        """A page's text."""
        ...


class OfflineWeb:
    """The default: the web is disabled, and the agent is told so plainly."""

    async def search(self, query: str) -> str:
        """Refuse clearly."""
        return "web access is disabled in this evaluation: web_search is unavailable; work from the provided files."

    async def fetch(self, url: str) -> str:
        """Refuse clearly."""
        return f"web access is disabled in this evaluation: cannot fetch {url}; work from the provided files."


class AllowListWeb:
    """Fetches pages over HTTP from allowed hosts only (production)."""

    def __init__(
        self, allowed_hosts: set[str], *, timeout_s: float = 20.0, max_chars: int = 50_000
    ) -> None:
        self.allowed_hosts = {h.lower() for h in allowed_hosts}
        self.timeout_s = timeout_s
        self.max_chars = max_chars

    def _allowed(self, url: str) -> bool:
        host = (urlparse(url).hostname or "").lower()
        return any(host == h or host.endswith("." + h) for h in self.allowed_hosts)

    async def search(self, query: str) -> str:
        """No search backend is configured by default; say so."""
        return "web_search has no backend configured; use web_fetch on an allowed URL."

    async def fetch(self, url: str) -> str:
        """GET an allowed URL and return its text (truncated)."""
        if urlparse(url).scheme not in {"http", "https"} or not self._allowed(url):
            return (
                f"refused: {url} is not on the allow-list ({', '.join(sorted(self.allowed_hosts))})"
            )
        async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
            try:
                response = await client.get(url)
            except httpx.HTTPError as e:
                return f"fetch of {url} failed: {type(e).__name__}: {e}"
        return f"HTTP {response.status_code}\n{response.text[: self.max_chars]}"
