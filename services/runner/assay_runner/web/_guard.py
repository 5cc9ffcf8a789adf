"""Where a web request may go: the SSRF guard every hop of every web call passes.

A URL is refused unless it is http(s), carries no credentials, names a host the
campaign's lists allow, and every address that host resolves to is a public unicast
address. The request then connects to the address that was checked (`PinnedBackend`):
a resolver that answers differently a moment later (DNS rebinding) is never asked again.
A loopback address is reachable only when it is one of `NetPolicy.test_addresses`, which
only code sets (the tests' stand-ins); no campaign file, setting or environment variable
reaches it, and nothing but a loopback address can be named there.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import SplitResult, urlsplit

import httpcore

from assay_schemas import InvalidInput

__all__ = [
    "IPAddress",
    "NetPolicy",
    "PinnedBackend",
    "Resolver",
    "Target",
    "WebRefused",
    "address_refusal",
    "host_listed",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
"""host, port -> the addresses it resolves to (a hook: tests answer what they like)."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPAT = ipaddress.ip_network("::/96")


class WebRefused(InvalidInput):
    """A request the guard will not send; the message is for the agent."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system resolver (getaddrinfo, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def address_refusal(ip: IPAddress) -> str | None:
    """Why an address may not be reached (None: it is a public unicast address)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        if ip in _COMPAT and not ip.is_loopback and not ip.is_unspecified:
            return "an IPv4-compatible IPv6 address"
        if ip in _NAT64 or ip.sixtofour is not None or ip.teredo is not None:
            return "an IPv6 address that embeds an IPv4 one (NAT64, 6to4, Teredo)"
    if ip.is_loopback:
        return "a loopback address"
    for test, name in (
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address (cloud metadata lives there)"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
        (not ip.is_global, "not a public address"),
    ):
        if test:
            return name
    return None


def host_listed(host: str, hosts: Iterable[str]) -> bool:
    """Whether host is one of hosts or a subdomain of one."""
    return any(host == h or host.endswith("." + h) for h in hosts)


class Target(NamedTuple):
    """A checked request target: the URL's parts and the one address to connect to."""

    url: str
    parts: SplitResult
    host: str
    port: int
    address: str


@dataclass(kw_only=True)
class NetPolicy:
    """How the runner reaches the web: lists, resolver, and the test-only loopback door."""

    allow_hosts: list[str] = field(default_factory=list)
    deny_hosts: list[str] = field(default_factory=list)
    resolver: Resolver = system_resolver
    test_addresses: frozenset[str] = frozenset()
    """Test-only: these loopback addresses (the tests' stand-ins) are reachable. Set in
    code only, never from configuration; any other address named here is ignored."""
    tls: ssl.SSLContext | None = None
    """How servers' certificates are verified (None: the system's CAs); tests trust their
    own CA here. Set in code only."""
    trusted_hosts: frozenset[str] = frozenset()
    """Hosts the operator trusts to be private (a self-hosted search engine); used for
    search backends only, never for web_fetch."""

    def with_lists(self, allow: list[str], deny: list[str]) -> NetPolicy:
        """This policy with a campaign's allow- and deny-lists."""
        return NetPolicy(
            allow_hosts=list(allow),
            deny_hosts=list(deny),
            resolver=self.resolver,
            test_addresses=self.test_addresses,
            tls=self.tls,
            trusted_hosts=self.trusted_hosts,
        )

    async def check(self, url: str, *, trusted: bool = False) -> Target:
        """The URL's target, checked; raises WebRefused with a reason the agent can read."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as e:
            raise WebRefused(f"refused: {url!r} is not a valid URL ({e})") from e
        if parts.scheme not in ("http", "https"):
            raise WebRefused(f"refused: only http and https URLs are fetched, not {url!r}")
        if parts.username is not None or parts.password is not None:
            raise WebRefused("refused: URLs with credentials (user:password@) are not fetched")
        host = (parts.hostname or "").rstrip(".").lower()
        if not host:
            raise WebRefused(f"refused: {url!r} names no host")
        try:
            host = host.encode("idna").decode("ascii") if not host.isascii() else host
        except UnicodeError as e:
            raise WebRefused(f"refused: host {host!r} is not a valid name") from e
        if host_listed(host, self.deny_hosts):
            raise WebRefused(f"refused: {host} is on this campaign's deny-list")
        if self.allow_hosts and not host_listed(host, self.allow_hosts) and not trusted:
            raise WebRefused(
                f"refused: {host} is not on this campaign's allow-list "
                f"({', '.join(sorted(self.allow_hosts))})"
            )
        address = await self._address(host, port, trusted=trusted and host in self.trusted_hosts)
        return Target(url.strip(), parts, host, port, address)

    async def _address(self, host: str, port: int, *, trusted: bool) -> str:
        try:
            literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = await self.resolver(host, port)
            except (OSError, UnicodeError) as e:
                raise WebRefused(f"could not resolve {host}: {e}") from e
        if not addresses:
            raise WebRefused(f"could not resolve {host}: no address")
        for text in addresses:
            try:
                ip = ipaddress.ip_address(text.split("%")[0])
            except ValueError as e:
                raise WebRefused(f"refused: {host} resolved to {text!r}, not an address") from e
            why = None if trusted or self._test_address(ip) else address_refusal(ip)
            if why is not None:
                raise WebRefused(
                    f"refused: {host} resolves to {ip}, {why}; only public addresses are fetched"
                )
        return addresses[0].split("%")[0]

    def _test_address(self, ip: IPAddress) -> bool:
        return ip.is_loopback and str(ip) in self.test_addresses


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects every TCP connection to one checked address, whatever host is asked for;
    TLS still verifies the certificate against the URL's host name."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connect to the pinned address (never a fresh resolution of `host`)."""
        return await self.inner.connect_tcp(
            self.address, port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Never: web requests go over TCP only."""
        raise WebRefused("refused: unix sockets are not reachable")

    async def sleep(self, seconds: float) -> None:
        """Sleep on the event loop."""
        await self.inner.sleep(seconds)
