"""The web an agent may use: a campaign's `web:` section, and what each web call kept.

A campaign chooses how its agents see the web (`WebSpec.mode`): not at all (`off`, the
default), live, live while keeping every answer (`record`), or only from answers kept
before (`replay`: the frozen web, so epochs, reruns and rejudges read the same bytes).
Every answer a web tool gives is a `WebSource` on its step: the request, when, the HTTP
status and the blobs holding the bytes received and the text the agent was shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ._ids import Identifier

__all__ = [
    "ENV_NAME_PATTERN",
    "SearchBackend",
    "WebMode",
    "WebSource",
    "WebSourceKind",
    "WebSpec",
]

_Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ENV_NAME_PATTERN = r"^[A-Z_][A-Z0-9_]{0,127}$"
"""An environment variable's name (a campaign names the key's variable, never the key)."""
_Host = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9.*-]{1,253}$", to_lower=True)]

WebMode = Literal["off", "live", "record", "replay"]
"""off: no web (the agent is told so); live: the real web; record: the real web, every
answer kept in the campaign's web cache and answered from it when asked again; replay:
only answers from the cache (a miss is answered "not in this campaign's web")."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SearchBackend(_Frozen):
    """The search engine behind `web_search`."""

    kind: Literal["searxng", "brave"]
    url: str = Field(default="", max_length=2048)
    """SearXNG: the instance's base URL (its JSON API `/search?format=json` must be on).
    Brave: none (its key only ever goes to Brave's own endpoint)."""
    api_key_env: Annotated[str, StringConstraints(pattern=ENV_NAME_PATTERN)] | None = None
    """The environment variable of the runner that holds the API key (Brave)."""
    max_results: int = Field(default=8, ge=1, le=20)

    @model_validator(mode="after")
    def _complete(self) -> SearchBackend:
        if self.kind == "searxng" and not self.url:
            raise ValueError("web.search: a searxng backend needs its instance `url`")
        if self.kind == "brave" and not self.api_key_env:
            raise ValueError("web.search: a brave backend needs `api_key_env` (a variable name)")
        if self.kind == "brave" and self.url:
            raise ValueError(
                "web.search: a brave backend takes no `url` (its key goes to Brave only)"
            )
        return self


class WebSpec(_Frozen):
    """A campaign's `web:` section."""

    mode: WebMode = "off"
    search: SearchBackend | None = None
    """None: web_search answers that no search engine is configured."""
    allow_hosts: list[_Host] = Field(default_factory=list, max_length=1000)
    """Hosts (and their subdomains) web_fetch may reach; empty: any public host."""
    deny_hosts: list[_Host] = Field(default_factory=list, max_length=1000)
    """Hosts (and their subdomains) web_fetch never reaches, whatever the allow-list says."""
    cache: Identifier | None = None
    """The campaign whose recorded web this one replays or extends (default: its own)."""
    snapshot: _Sha256 | None = None
    """A frozen web (an imported or frozen cache index blob) replayed instead of a campaign's."""
    max_bytes: int = Field(default=2_000_000, ge=1024, le=20_000_000)
    """Most bytes of one response read (the stream is cut there)."""
    timeout_s: float = Field(default=20.0, gt=0, le=120)
    """Whole-request deadline, redirects and a slow body included."""
    max_redirects: int = Field(default=5, ge=0, le=10)


WebSourceKind = Literal["search", "fetch"]


class WebSource(_Frozen):
    """One web answer an agent received, kept as evidence (and as the frozen web's entry)."""

    kind: WebSourceKind
    key: _Sha256
    """The normalised request's hash: the web cache's key."""
    request: str = Field(max_length=8192)
    """The normalised URL fetched, or the search query."""
    url: str = Field(default="", max_length=8192)
    """The URL that answered (after redirects; for a search, the engine's URL without key)."""
    fetched_at: datetime
    status: int | None = Field(default=None, ge=100, le=999)
    """The final HTTP status; None when no response came (refused, unreachable, timeout)."""
    media_type: str = Field(default="", max_length=256)
    body_sha256: _Sha256 | None = None
    """The bytes received (up to the campaign's cap), as a blob."""
    body_size: int = Field(default=0, ge=0, le=2**40)
    truncated: bool = False
    """The body was cut at the size cap or the deadline."""
    text_sha256: _Sha256
    """The whole answer the agent was given (readable text, or the refusal), as a blob."""
    text_size: int = Field(default=0, ge=0, le=2**40)
    error: str | None = Field(default=None, max_length=2000)
    """Why there is no (whole) page: refused, unreachable, over a cap, not in the cache."""
