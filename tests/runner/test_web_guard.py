"""The web tools' attack surface: SSRF on every hop, DNS rebinding, hostile bodies and pages.

Real HTTP over loopback against a stand-in server bound to 127.0.0.2, the one address the
test policy lets through; every other loopback, private or metadata address must be refused
with a message the agent can read, and every page kept as verified blobs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from assay.store import LocalBlobStore
from assay_runner.web import (
    USER_AGENT,
    CampaignWeb,
    NetPolicy,
    SearchRefused,
    address_refusal,
    format_results,
    search_request,
)
from assay_schemas import SearchBackend, WebSpec
from tests.webstand import STAND_IN, STAND_IN_POLICY, Route, WebStandIn, html_page, searxng_results


def web(tmp_path: Path, policy: NetPolicy = STAND_IN_POLICY, **spec: object) -> CampaignWeb:
    settings: dict[str, object] = {"mode": "live", "timeout_s": 5.0}
    settings.update(spec)
    return CampaignWeb(
        spec=WebSpec.model_validate(settings),
        store=LocalBlobStore(tmp_path / "blobs"),
        policy=policy,
    )


def redirect(to: str) -> Route:
    return Route(302, {"Location": to, "Content-Type": "text/plain"}, b"moved")


async def test_a_page_is_read_as_markdown_and_kept_as_blobs(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/paper"] = html_page(
        "Growth phases", "<p>Bacteria pass through lag, log and stationary phases.</p>"
    )
    w = web(tmp_path)
    answer = await w.fetch(f"{stand_in.base}/paper#section")
    assert "# Growth phases" in answer.text and "lag, log and stationary" in answer.text
    assert "HTTP 200 · text/html" in answer.text
    [source] = answer.sources
    assert source.kind == "fetch" and source.status == 200 and source.error is None
    assert source.request == f"{stand_in.base}/paper"  # fragment dropped: one key per page
    body = w.store.get_bytes(source.body_sha256 or "")
    assert b"<article>" in body and hashlib.sha256(body).hexdigest() == source.body_sha256
    assert w.store.get_bytes(source.text_sha256).decode() == answer.text


async def test_the_request_carries_no_identity_of_the_runner(
    tmp_path: Path, stand_in: WebStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://10.0.0.1:3128")  # never inherited
    monkeypatch.setenv("ALL_PROXY", "http://10.0.0.1:3128")
    stand_in.routes["/p"] = html_page("P", "<p>plain page text for the agent</p>")
    answer = await web(tmp_path).fetch(f"{stand_in.base}/p")
    assert "plain page text" in answer.text
    [seen] = stand_in.seen
    assert seen.headers["user-agent"] == USER_AGENT
    assert seen.headers["accept-encoding"] == "identity"
    assert not {"cookie", "authorization", "proxy-authorization", "x-forwarded-for"} & set(
        seen.headers
    )


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1/admin",
        "http://[::1]/admin",
        "http://[::ffff:127.0.0.1]/admin",
        "http://[::ffff:169.254.169.254]/",
        "http://10.0.0.5/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
        "http://2130706433/",  # 127.0.0.1 as one number
    ],
)
async def test_a_redirect_to_an_inner_address_is_refused_at_that_hop(
    tmp_path: Path, stand_in: WebStandIn, target: str
) -> None:
    stand_in.routes["/go"] = redirect(target)
    answer = await web(tmp_path).fetch(f"{stand_in.base}/go")
    assert answer.text.startswith("refused:") and "only public addresses" in answer.text
    [source] = answer.sources
    assert source.status is None and source.error == answer.text
    assert [s.path for s in stand_in.seen] == ["/go"]  # nothing else was asked


async def test_redirects_are_bounded_and_each_hop_is_followed_when_allowed(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/a"] = redirect("/b")
    stand_in.routes["/b"] = redirect(f"{stand_in.base}/end")
    stand_in.routes["/end"] = html_page("End", "<p>the final hop answered</p>")
    answer = await web(tmp_path).fetch(f"{stand_in.base}/a")
    assert "the final hop answered" in answer.text
    assert answer.sources[0].url == f"{stand_in.base}/end"
    stand_in.routes["/loop"] = redirect("/loop")
    looped = await web(tmp_path, max_redirects=3).fetch(f"{stand_in.base}/loop")
    assert "more than 3 redirects" in looped.text


async def test_a_dns_answer_that_changes_after_the_check_is_never_used(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    answers = [[STAND_IN], ["169.254.169.254"], ["127.0.0.1"]]
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[min(len(asked) - 1, len(answers) - 1)]

    stand_in.routes["/page"] = html_page("Pinned", "<p>served by the checked address</p>")
    policy = NetPolicy(test_addresses=frozenset({STAND_IN}), resolver=rebinding)
    answer = await web(tmp_path, policy).fetch(f"http://rebind.example:{stand_in.port}/page")
    # One resolution, checked; the connection went to that address, not a second answer.
    assert "served by the checked address" in answer.text
    assert asked == ["rebind.example"]
    assert stand_in.seen[0].headers["host"] == f"rebind.example:{stand_in.port}"
    # Asked again, the name now points at metadata: refused before any connection.
    again = await web(tmp_path, policy).fetch(f"http://rebind.example:{stand_in.port}/page")
    assert "169.254.169.254" in again.text and "link-local" in again.text
    assert len(stand_in.seen) == 1


async def test_a_name_with_any_inner_address_is_refused(tmp_path: Path) -> None:
    async def mixed(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.1.2.3"]

    answer = await web(tmp_path, NetPolicy(resolver=mixed)).fetch("http://mixed.example/")
    assert "10.1.2.3" in answer.text and "private address" in answer.text


async def test_an_oversized_or_endless_body_is_cut_at_the_cap(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"<p>" + b"x" * 65_536 + b"</p>"

    stand_in.routes["/big"] = Route(200, {"Content-Type": "text/plain"}, b"y" * 5_000_000)
    stand_in.routes["/endless"] = Route(200, {"Content-Type": "text/html"}, endless)
    w = web(tmp_path, max_bytes=100_000)
    for path in ("/big", "/endless"):
        answer = await w.fetch(f"{stand_in.base}{path}")
        assert "cut at this campaign's cap of 100000 bytes" in answer.text
        [source] = answer.sources
        assert source.truncated and source.body_size == 100_000


async def test_a_slow_drip_body_stops_at_the_deadline(tmp_path: Path, stand_in: WebStandIn) -> None:
    async def drip() -> AsyncIterator[bytes]:
        while True:
            yield b"."
            await asyncio.sleep(0.2)

    stand_in.routes["/drip"] = Route(200, {"Content-Type": "text/html"}, drip)
    started = time.monotonic()
    answer = await web(tmp_path, timeout_s=1.5).fetch(f"{stand_in.base}/drip")
    assert time.monotonic() - started < 4
    assert "no complete answer within 1.5 s" in answer.text


async def test_hostile_html_is_read_without_its_scripts_and_in_bounded_time(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    page = (
        b"<html><head><script>document.write('STEAL-COOKIES')</script>"
        b"<style>body{color:red}</style></head><body><div data-x='"
        + b"A" * 10_000_000
        + b"'>x</div><article><h1>Findings</h1><p>"
        + b"The measured doubling time was 42 minutes in rich medium. " * 5
        + b"</p></article><script>evil()</script></body></html>"
    )
    stand_in.routes["/hostile"] = Route(200, {"Content-Type": "text/html"}, page)
    started = time.monotonic()
    answer = await web(tmp_path, max_bytes=20_000_000).fetch(f"{stand_in.base}/hostile")
    elapsed = time.monotonic() - started
    assert elapsed < 8, elapsed
    assert "doubling time was 42 minutes" in answer.text
    assert "STEAL-COOKIES" not in answer.text and "evil()" not in answer.text
    assert "AAAA" not in answer.text


async def test_unreadable_types_urls_and_lists_are_refused_with_reasons(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/img"] = Route(200, {"Content-Type": "image/png"}, b"\x89PNG" * 10)
    stand_in.routes["/gz"] = Route(200, {"Content-Type": "text/html", "Content-Encoding": "gzip"})
    w = web(tmp_path)
    assert "gzip-encoded body" in (await w.fetch(f"{stand_in.base}/gz")).text
    assert "image/png is not readable by web_fetch" in (await w.fetch(f"{stand_in.base}/img")).text
    assert "only http and https" in (await w.fetch("file:///etc/passwd")).text
    assert "credentials" in (await w.fetch(f"http://u:p@{STAND_IN}:{stand_in.port}/")).text
    denied = web(tmp_path, deny_hosts=[STAND_IN])
    assert "deny-list" in (await denied.fetch(f"{stand_in.base}/img")).text
    listed = web(tmp_path, allow_hosts=["example.org"])
    assert "not on this campaign's allow-list" in (await listed.fetch(f"{stand_in.base}/")).text
    assert [s.path for s in stand_in.seen] == ["/gz", "/img"]


async def test_without_the_test_door_loopback_is_refused(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/p"] = html_page("P", "<p>x</p>")
    answer = await web(tmp_path, NetPolicy()).fetch(f"{stand_in.base}/p")
    assert "loopback address" in answer.text and not stand_in.seen
    # The door names loopback addresses only: a metadata address listed there stays shut.
    door = NetPolicy(test_addresses=frozenset({"169.254.169.254"}))
    assert "link-local" in (await web(tmp_path, door).fetch("http://169.254.169.254/")).text


def test_address_rules_cover_mapped_compatible_and_embedded_forms() -> None:
    import ipaddress

    bad = [
        "::ffff:8.8.8.8",  # mapped: refused even when the inner address is public
        "::127.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::1",
        "224.0.0.1",
        "ff02::1",
        "240.0.0.1",
        "100.64.0.1",
        "fc00::1",
    ]
    for text in bad:
        assert address_refusal(ipaddress.ip_address(text)) is not None, text
    assert address_refusal(ipaddress.ip_address("93.184.216.34")) is None
    assert address_refusal(ipaddress.ip_address("2606:4700::1111")) is None


async def test_searxng_results_come_back_as_a_numbered_list(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/search"] = searxng_results(
        ("Growth curve - Wikipedia", "https://en.wikipedia.org/wiki/Growth_curve", "Lag phase"),
        ("Not a web URL", "javascript:alert(1)", "dropped"),
        ("<b>Doubling</b> time", "https://example.org/doubling", "x" * 2000),
    )
    backend = {"kind": "searxng", "url": f"{stand_in.base}/", "max_results": 5}
    w = web(tmp_path, search=backend, allow_hosts=["example.org"])
    answer = await w.search("  bacterial   growth ")
    lines = answer.text.splitlines()
    assert lines[0] == 'Search results for "bacterial growth" (searxng):'
    assert lines[1] == "1. Growth curve - Wikipedia"
    assert lines[2] == "   https://en.wikipedia.org/wiki/Growth_curve"
    assert lines[4] == "2. Doubling time" and len(lines[6]) < 520
    assert "javascript" not in answer.text
    assert stand_in.seen[0].path == "/search?q=bacterial+growth&format=json"
    [source] = answer.sources
    assert source.kind == "search" and source.request == "bacterial growth"


def test_a_brave_key_goes_in_a_header_to_brave_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_TEST_BRAVE_KEY", "secret-key-123")
    backend = SearchBackend(kind="brave", api_key_env="ASSAY_TEST_BRAVE_KEY")
    req = search_request(backend, "growth")
    assert req.url.startswith("https://api.search.brave.com/") and "secret" not in req.url
    assert req.headers["X-Subscription-Token"] == "secret-key-123"
    with pytest.raises(ValueError, match="takes no `url`"):
        SearchBackend(kind="brave", api_key_env="K", url="https://attacker.example/")
    answer = {
        "web": {
            "results": [
                {"title": "<strong>E. coli</strong>", "url": "https://x.org/e", "description": "d"}
            ]
        }
    }
    text = format_results(backend, "growth", json.dumps(answer).encode())
    assert text.splitlines()[1:4] == ["1. E. coli", "   https://x.org/e", "   d"]
    with pytest.raises(SearchRefused, match="could not be read"):
        format_results(backend, "growth", b"<html>rate limited</html>")
    monkeypatch.delenv("ASSAY_TEST_BRAVE_KEY")
    with pytest.raises(SearchRefused, match="key is not set"):
        search_request(backend, "growth")


async def test_no_engine_and_off_say_so(tmp_path: Path) -> None:
    from assay_runner.web import OfflineWeb

    assert "no search engine configured" in (await web(tmp_path).search("x")).text
    assert "web access is off" in (await OfflineWeb().fetch("https://example.org")).text


async def test_a_pdf_is_read_as_its_page_text(tmp_path: Path, stand_in: WebStandIn) -> None:
    from tests.view.documents import pdf_bytes

    stand_in.routes["/paper.pdf"] = Route(
        200, {"Content-Type": "application/pdf"}, pdf_bytes("Doubling time 20 min", "Methods")
    )
    answer = await web(tmp_path).fetch(f"{stand_in.base}/paper.pdf")
    assert "HTTP 200 · application/pdf" in answer.text
    assert "[page 1]" in answer.text and "Doubling time 20 min" in answer.text
    assert "[page 2]" in answer.text and "Methods" in answer.text


async def test_trusted_hosts_open_private_addresses_to_search_only(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/search"] = searxng_results(("A", "https://example.org/a", "s"))
    stand_in.routes["/p"] = html_page("P", "<p>x</p>")
    trusted = NetPolicy(trusted_hosts=frozenset({STAND_IN}))
    w = web(tmp_path, trusted, search={"kind": "searxng", "url": stand_in.base})
    assert "1. A" in (await w.search("a")).text
    assert "loopback address" in (await w.fetch(f"{stand_in.base}/p")).text


def test_no_campaign_or_setting_opens_the_test_door(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from assay.config import Settings
    from assay_runner.service import build

    for door in ("test_addresses", "allow_loopback", "trusted_hosts", "resolver"):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            WebSpec.model_validate({"mode": "live", door: ["127.0.0.1"]})
    monkeypatch.setenv("ASSAY_WEB_TEST_ADDRESSES", '["127.0.0.1"]')
    monkeypatch.setenv("ASSAY_TEST_ADDRESSES", '["127.0.0.1"]')
    runner = build(Settings())
    assert runner.web_net.test_addresses == frozenset()
    assert runner.web_net.resolver.__name__ == "system_resolver"


async def test_a_brave_search_keeps_no_trace_of_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_TEST_BRAVE_KEY", "planted-secret-9f8e7d")

    async def inner(host: str, port: int) -> list[str]:
        return ["10.9.8.7"]

    w = web(
        tmp_path,
        NetPolicy(resolver=inner),
        search={"kind": "brave", "api_key_env": "ASSAY_TEST_BRAVE_KEY"},
    )
    answer = await w.search("growth")
    [source] = answer.sources
    assert "private address" in answer.text
    kept = source.model_dump_json() + w.store.get_bytes(source.text_sha256).decode()
    assert "planted-secret" not in kept and source.url.startswith("https://api.search.brave.com/")


async def test_https_connects_to_the_pinned_address_and_verifies_the_name(tmp_path: Path) -> None:
    from tests.webstand import self_signed

    server_tls, client_tls = self_signed(tmp_path, "pinned.example")

    async def to_stand_in(host: str, port: int) -> list[str]:
        return [STAND_IN]

    policy = NetPolicy(test_addresses=frozenset({STAND_IN}), resolver=to_stand_in, tls=client_tls)
    with WebStandIn(host=STAND_IN, tls=server_tls) as server:
        server.routes["/p"] = html_page("Secure", "<p>served over TLS to the checked name</p>")
        ok = await web(tmp_path, policy).fetch(f"https://pinned.example:{server.port}/p")
        assert "served over TLS to the checked name" in ok.text
        wrong = await web(tmp_path, policy).fetch(f"https://other.example:{server.port}/p")
        assert "certificate verify failed: Hostname mismatch" in wrong.text
        assert wrong.sources[0].status is None
