"""A campaign's web: live, recording or replaying, every answer kept as blobs and a source."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from assay.bus import Bus
from assay.store import BlobStore
from assay_schemas import (
    InvalidInput,
    RunFault,
    RunRequested,
    SearchBackend,
    StoreError,
    WebSource,
    WebSourceKind,
    WebSpec,
)

from ._cache import (
    MISS_PREFIX,
    WebIndex,
    fetch_key,
    index_from_log,
    index_from_snapshot,
    normalise_url,
    search_key,
)
from ._guard import NetPolicy, WebRefused
from ._http import guarded_get
from ._protocol import OfflineWeb, WebAnswer, WebProvider
from ._read import READABLE_TYPES, ReadRefused, readable_text
from ._search import SearchRefused, format_results, normalise_query, search_request

__all__ = ["CampaignWeb", "WebCacheUnreadable", "web_for"]


class WebCacheUnreadable(StoreError, RunFault):
    """A replaying or recording run cannot read its campaign's web cache (snapshot): the
    store's failure, not the agent's."""


class _Live(NamedTuple):
    """What one live call received and what the agent is told about it."""

    text: str
    url: str = ""
    status: int | None = None
    media_type: str = ""
    body: bytes | None = None
    truncated: bool = False
    error: str | None = None


def _refused(text: str, url: str = "", status: int | None = None, media: str = "") -> _Live:
    return _Live(text=text, url=url, status=status, media_type=media, error=text[:2000])


@dataclass(kw_only=True)
class CampaignWeb:
    """web_search and web_fetch under a campaign's `web:` section."""

    spec: WebSpec
    store: BlobStore
    policy: NetPolicy
    """The runner's network policy; the campaign's allow- and deny-lists are added to it."""
    index: WebIndex = field(default_factory=dict)
    """The campaign's web cache (record and replay)."""
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def __post_init__(self) -> None:
        self.policy = self.policy.with_lists(self.spec.allow_hosts, self.spec.deny_hosts)

    async def search(self, query: str) -> WebAnswer:
        """A numbered list of results from the campaign's search engine."""
        backend = self.spec.search
        if backend is None:
            return WebAnswer(
                "web_search has no search engine configured in this campaign; "
                "use web_fetch on a URL you know."
            )
        engine = f"{backend.kind}|{backend.url}|{backend.max_results}"
        q = normalise_query(query)
        return await self._answer(
            "search", search_key(engine, q), q, lambda: self._live_search(backend, q)
        )

    async def fetch(self, url: str) -> WebAnswer:
        """The page at url as readable text (Markdown for HTML, page text for PDFs)."""
        request = normalise_url(url)
        return await self._answer(
            "fetch", fetch_key(url), request, lambda: self._live_fetch(url.strip())
        )

    async def _answer(
        self,
        kind: WebSourceKind,
        key: str,
        request: str,
        live: Callable[[], Awaitable[_Live]],
    ) -> WebAnswer:
        if self.spec.mode in ("record", "replay") and (cached := self.index.get(key)):
            data = await asyncio.to_thread(self.store.get_bytes, cached.text_sha256)
            return WebAnswer(data.decode("utf-8", "replace"), (cached,))
        if self.spec.mode == "replay":
            what = "search" if kind == "search" else "page"
            got = _refused(
                f"{MISS_PREFIX}: this {what} ({request}) was not recorded, and this campaign "
                "replays a frozen web (no live requests). Work from what is available."
            )
        else:
            got = await live()
        source = await self._keep(kind, key, request, got)
        if self.spec.mode == "record":
            self.index.setdefault(key, source)
        return WebAnswer(got.text, (source,))

    async def _keep(self, kind: WebSourceKind, key: str, request: str, got: _Live) -> WebSource:
        text = got.text.encode()
        text_info = await asyncio.to_thread(self.store.put_bytes, text)
        body_info = (
            await asyncio.to_thread(self.store.put_bytes, got.body)
            if got.body is not None
            else None
        )
        return WebSource(
            kind=kind,
            key=key,
            request=request[:8192],
            url=got.url[:8192],
            fetched_at=self.clock(),
            status=got.status,
            media_type=got.media_type[:256],
            body_sha256=body_info.sha256 if body_info else None,
            body_size=body_info.size if body_info else 0,
            truncated=got.truncated,
            text_sha256=text_info.sha256,
            text_size=text_info.size,
            error=got.error,
        )

    async def _live_search(self, backend: SearchBackend, query: str) -> _Live:
        try:
            req = search_request(backend, query)
        except SearchRefused as e:
            return _refused(f"web_search failed: {e}")
        try:
            got = await guarded_get(
                req.url,
                self.policy,
                max_bytes=self.spec.max_bytes,
                timeout_s=self.spec.timeout_s,
                max_redirects=0,
                headers=req.headers,
                trusted=True,
            )
        except WebRefused as e:
            return _refused(f"web_search failed: the search engine: {e}", req.url)
        if got.status != 200:
            return _refused(
                f"web_search failed: the search engine answered HTTP {got.status}",
                req.url,
                got.status,
                got.media_type,
            )
        try:
            text = format_results(backend, query, got.body)
        except SearchRefused as e:
            return _refused(f"web_search failed: {e}", req.url, got.status, got.media_type)
        return _Live(text, req.url, got.status, got.media_type, got.body, got.truncated)

    async def _live_fetch(self, url: str) -> _Live:
        try:
            got = await guarded_get(
                url,
                self.policy,
                max_bytes=self.spec.max_bytes,
                timeout_s=self.spec.timeout_s,
                max_redirects=self.spec.max_redirects,
                readable=READABLE_TYPES,
            )
        except WebRefused as e:
            return _refused(str(e), url)
        head = f"URL: {got.url}\nHTTP {got.status} · {got.media_type or 'no content type'}"
        if got.media_type not in READABLE_TYPES:
            return _refused(
                f"{head}\nnot read: {got.media_type or 'no content type'} is not readable by "
                "web_fetch (it reads HTML, PDF, plain text, JSON, XML)",
                got.url,
                got.status,
                got.media_type,
            )
        head += f" · {len(got.body)} bytes"
        if got.truncated:
            head += f" (cut at this campaign's cap of {self.spec.max_bytes} bytes)"
        try:
            page = await readable_text(got.media_type, got.body, got.charset)
        except ReadRefused as e:
            live = _refused(f"{head}\nnot read: {e}", got.url, got.status, got.media_type)
            return live._replace(body=got.body, truncated=got.truncated)
        return _Live(
            f"{head}\n\n{page or '(no readable text)'}",
            got.url,
            got.status,
            got.media_type,
            got.body,
            got.truncated,
        )


async def web_for(
    request: RunRequested, *, bus: Bus, store: BlobStore, net: NetPolicy
) -> WebProvider:
    """The web a run's tools use: off, or the campaign's (its cache loaded when it has one)."""
    spec = request.web
    if spec.mode == "off":
        return OfflineWeb()
    index: WebIndex = {}
    if spec.mode in ("record", "replay"):
        if spec.snapshot is not None:
            try:
                index = await index_from_snapshot(store, spec.snapshot)
            except (StoreError, InvalidInput) as e:
                raise WebCacheUnreadable(f"web snapshot {spec.snapshot[:12]}: {e}") from e
        else:
            index = await index_from_log(bus, spec.cache or request.campaign_id)
    return CampaignWeb(spec=spec, store=store, policy=net, index=index)
