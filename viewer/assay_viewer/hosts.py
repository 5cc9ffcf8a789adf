"""Which names the viewer answers to: its own address only, against DNS rebinding.

A page at evil.example can point its name at 127.0.0.1 and read a local viewer as its own
origin; the browser still sends `Host: evil.example`. So a request is served only when its
Host (or an absolute-form target's authority, which replaces it) names a loopback address,
`localhost`, the literal address the connection arrived at, or a name the operator
allowed, with the port the connection arrived at; and an `Origin`, where a browser sends
one, must be such an address too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from assay_schemas import InvalidInput

__all__ = ["RequestRefused", "check_request"]

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class RequestRefused(InvalidInput):
    """A request for another host or from another origin: status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _split(authority: str) -> tuple[str, str | None] | None:
    """Host and port of `host[:port]` or `[v6][:port]`; None when malformed."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return None
        name, rest = authority[1:end], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        return name, rest[1:] if rest else None
    name, colon, port = authority.partition(":")
    return name, port if colon else None


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _served(scope: dict[str, Any]) -> tuple[str | None, int]:
    """The address and port this connection arrived at (ASGI `server`)."""
    default = _DEFAULT_PORTS.get(str(scope.get("scheme", "http")), 80)
    server = scope.get("server") or (None, None)
    return server[0], server[1] if server[1] is not None else default


def _allowed(authority: str, scope: dict[str, Any], names: frozenset[str]) -> bool:
    parts = _split(authority.lower())
    if parts is None:
        return False
    name, port = parts
    address, served_port = _served(scope)
    if port is None:
        port_ok = served_port == _DEFAULT_PORTS.get(str(scope.get("scheme", "http")), 80)
    else:
        port_ok = port.isdigit() and port == str(served_port)  # "08765" is not 8765's form
    if not port_ok or not name:
        return False
    if name.endswith(".") and not authority.startswith("["):
        name = name[:-1]  # "localhost." is localhost, fully qualified
    if "[" in name or "]" in name or "@" in name:
        return False
    return _is_loopback(name) or _same_ip(name, address) or name in names


def _same_ip(name: str, address: str | None) -> bool:
    """Whether `name` is the literal address the connection arrived at: a page there is
    that address's own origin, so no rebinding (a bound LAN address, reached as itself)."""
    try:
        return address is not None and ipaddress.ip_address(name) == ipaddress.ip_address(address)
    except ValueError:
        return False


def _header(scope: dict[str, Any], key: bytes) -> str | None:
    values = [v for k, v in scope.get("headers", []) if k.lower() == key]
    return bytes(values[0]).decode("latin-1") if len(values) == 1 else None


def check_request(scope: dict[str, Any], names: Iterable[str] = ()) -> None:
    """Refuse (421) a request for any host but this viewer's, and (403) one a page of
    another origin made; `names`: further host names the operator serves the viewer as."""
    allowed = frozenset(n.lower().rstrip(".") for n in names)
    _, port = _served(scope)
    expected = f"localhost, 127.0.0.1 or [::1]{''.join(f', {n}' for n in sorted(allowed))}"
    path = str(scope.get("path", ""))
    host = _header(scope, b"host")
    if not path.startswith("/"):  # absolute-form: its authority is the host asked for
        host = urlsplit(path).netloc or None
    if host is None or not _allowed(host, scope, allowed):
        raise RequestRefused(
            421,
            f"this viewer answers only to its own address ({expected}, port {port}); "
            f"the request was for {host or 'no host'!r}. A web page reaching it under "
            "another name is refused (DNS rebinding); to serve it under a name, "
            "start it with `assay view --allow-host NAME`.",
        )
    origin = _header(scope, b"origin")
    if origin is None:
        return
    url = urlsplit(origin)
    if url.scheme not in ("http", "https") or not _allowed(url.netloc, scope, allowed):
        raise RequestRefused(
            403,
            f"a page from origin {origin!r} may not use this viewer; only its own pages "
            f"({expected}, port {port}) may.",
        )
