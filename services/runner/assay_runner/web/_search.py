"""Search engines behind web_search: the request each wants and its answer as a list.

SearXNG (a self-hosted instance's JSON API) and the Brave Search API. The Brave key is
read from the runner's environment variable the campaign names, sent in a header to
Brave's own endpoint only, and never written to the log or a blob.
"""

from __future__ import annotations

import json
import os
import re
from typing import NamedTuple
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, ValidationError

from assay_schemas import InvalidInput, SearchBackend

__all__ = ["BRAVE_URL", "SearchRefused", "SearchRequest", "format_results", "search_request"]

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
_TAG = re.compile(r"<[^<>]{0,200}>")
MAX_QUERY_CHARS = 400


class SearchRefused(InvalidInput):
    """A search that cannot be made or read; the message is for the agent."""


class SearchRequest(NamedTuple):
    """The engine's URL for one query, and the headers it needs (the key, for Brave)."""

    url: str
    headers: dict[str, str]


def normalise_query(query: str) -> str:
    """The query with its whitespace collapsed (one cache key per wording)."""
    return " ".join(query.split())


def search_request(backend: SearchBackend, query: str) -> SearchRequest:
    """The request for one query; SearchRefused when the key is missing or the query bad."""
    q = normalise_query(query)
    if not q:
        raise SearchRefused("web_search needs a non-empty query")
    if len(q) > MAX_QUERY_CHARS:
        raise SearchRefused(f"the query is over {MAX_QUERY_CHARS} characters; shorten it")
    if backend.kind == "searxng":
        base = backend.url.rstrip("/")
        return SearchRequest(f"{base}/search?{urlencode({'q': q, 'format': 'json'})}", {})
    key = os.environ.get(backend.api_key_env or "", "")
    if not key:
        raise SearchRefused("web_search is not available: the search engine's key is not set")
    params = urlencode({"q": q, "count": backend.max_results})
    return SearchRequest(
        f"{BRAVE_URL}?{params}", {"X-Subscription-Token": key, "Accept": "application/json"}
    )


class _Hit(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str = ""
    url: str = ""
    content: str = ""
    description: str = ""


class _Searxng(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: list[_Hit] = []


class _BraveWeb(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: list[_Hit] = []


class _Brave(BaseModel):
    model_config = ConfigDict(extra="ignore")
    web: _BraveWeb = _BraveWeb()


def _clean(text: str, limit: int) -> str:
    text = " ".join(_TAG.sub("", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_results(backend: SearchBackend, query: str, body: bytes) -> str:
    """The engine's JSON answer as a numbered list: title, URL, snippet."""
    try:
        data = json.loads(body)
        hits = (
            _Searxng.model_validate(data).results
            if backend.kind == "searxng"
            else _Brave.model_validate(data).web.results
        )
    except (ValueError, ValidationError) as e:
        raise SearchRefused(
            f"the search engine's answer could not be read ({e.__class__.__name__})"
        ) from e
    hits = [h for h in hits if h.url.startswith(("http://", "https://"))][: backend.max_results]
    head = f'Search results for "{normalise_query(query)}" ({backend.kind}):'
    if not hits:
        return head + "\n(no results)"
    lines = [head]
    for i, h in enumerate(hits, 1):
        lines.append(f"{i}. {_clean(h.title, 300) or '(untitled)'}")
        lines.append(f"   {_clean(h.url, 2000)}")
        snippet = _clean(h.content or h.description, 500)
        if snippet:
            lines.append(f"   {snippet}")
    lines.append("Use web_fetch on a URL to read the page.")
    return "\n".join(lines)
