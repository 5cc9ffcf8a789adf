"""The frozen web: record keeps answers by normalised request, replay never goes live,
and a snapshot exported with a campaign's tasks replays the same bytes elsewhere."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from assay.store import LocalBlobStore
from assay_runner.web import (
    CampaignWeb,
    NetPolicy,
    copy_snapshot,
    export_snapshot,
    fetch_key,
    import_snapshot,
    index_from_snapshot,
    normalise_url,
    snapshot_bytes,
)
from assay_schemas import BlobCorrupted, InvalidInput, WebSpec
from tests.webstand import STAND_IN, STAND_IN_POLICY, WebStandIn, html_page, searxng_results


def _web(store: LocalBlobStore, mode: str, search: str = "", **kw: object) -> CampaignWeb:
    spec: dict[str, object] = {"mode": mode, "timeout_s": 5.0}
    if search:
        spec["search"] = {"kind": "searxng", "url": search}
    return CampaignWeb(spec=WebSpec.model_validate(spec), store=store, policy=STAND_IN_POLICY, **kw)  # type: ignore[arg-type]


def test_one_key_per_page_whatever_the_spelling() -> None:
    assert normalise_url("HTTPS://Example.ORG:443?b=2&a=1#frag") == "https://example.org/?a=1&b=2"
    assert normalise_url("http://example.org:8080/x") == "http://example.org:8080/x"
    assert fetch_key("https://example.org/") == fetch_key("https://EXAMPLE.org:443/#top")
    assert fetch_key("https://example.org/a") != fetch_key("https://example.org/b")


async def test_record_answers_a_second_ask_from_the_cache(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/p"] = html_page("P", "<p>first version of the page</p>")
    w = _web(LocalBlobStore(tmp_path), "record")
    first = await w.fetch(f"{stand_in.base}/p")
    stand_in.routes["/p"] = html_page("P", "<p>a changed page</p>")
    again = await w.fetch(f"http://{STAND_IN}:{stand_in.port}/p#again")
    assert again == first and "first version" in again.text
    assert len(stand_in.seen) == 1


async def test_replay_never_goes_live_and_says_what_is_missing(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    stand_in.routes["/p"] = html_page("P", "<p>live page</p>")
    stand_in.routes["/search"] = searxng_results(("t", "https://example.org/", "s"))
    w = _web(LocalBlobStore(tmp_path), "replay", search=stand_in.base)
    page = await w.fetch(f"{stand_in.base}/p")
    found = await w.search("anything")
    for answer in (page, found):
        assert answer.text.startswith("not in this campaign's web:")
        assert answer.sources[0].status is None
    assert not stand_in.seen


async def test_a_snapshot_travels_and_replays_the_same_bytes(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    here = LocalBlobStore(tmp_path / "here")
    stand_in.routes["/p"] = html_page("Paper", "<p>recorded content of the paper</p>")
    stand_in.routes["/search"] = searxng_results(("Paper", f"{stand_in.base}/p", "snippet"))
    rec = _web(here, "record", search=stand_in.base)
    found, page = await rec.search("the paper"), await rec.fetch(f"{stand_in.base}/p")
    stand_in.stop()
    tar = tmp_path / "web.tar"
    assert export_snapshot(here, snapshot_bytes(rec.index), tar) == 2

    there = LocalBlobStore(tmp_path / "there")
    sha = import_snapshot(there, tar)
    index = await index_from_snapshot(there, sha)
    rep = _web(there, "replay", search=f"http://{STAND_IN}:{stand_in.port}", index=index)
    assert await rep.search("the   paper") == found
    assert await rep.fetch(f"{stand_in.base}/p") == page


async def test_a_snapshot_copied_between_stores_is_verified_blob_by_blob(
    tmp_path: Path, stand_in: WebStandIn
) -> None:
    """`assay run` copies a frozen web from the home's store to its run directory's: each
    blob read against its hash, so a blob altered in the home is refused, never copied."""
    home = LocalBlobStore(tmp_path / "home")
    stand_in.routes["/p"] = html_page("Paper", "<p>recorded content of the paper</p>")
    rec = _web(home, "record")
    page = await rec.fetch(f"{stand_in.base}/p")
    sha = home.put_bytes(snapshot_bytes(rec.index)).sha256
    run = LocalBlobStore(tmp_path / "run")
    assert copy_snapshot(home, run, sha) == 2  # the page's bytes and its text
    rep = _web(run, "replay", index=await index_from_snapshot(run, sha))
    assert await rep.fetch(f"{stand_in.base}/p") == page

    [source] = rec.index.values()
    altered = home.path_of(source.text_sha256)
    altered.chmod(0o644)
    altered.write_bytes(b"a page someone rewrote")
    with pytest.raises(BlobCorrupted):
        copy_snapshot(home, LocalBlobStore(tmp_path / "another run"), sha)


def _tar(path: Path, members: list[tuple[str, bytes]], link: str | None = None) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return path


def test_a_hostile_snapshot_tar_is_refused(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "s")
    cases = {
        "does not match its hash": [("snapshot.json", b"[]"), ("blobs/" + "0" * 64, b"x")],
        "unexpected member": [("snapshot.json", b"[]"), ("../evil", b"x")],
        "not a list of web sources": [("snapshot.json", b'{"a": 1}')],
        "no snapshot.json": [],
    }
    for why, members in cases.items():
        with pytest.raises(InvalidInput, match=why):
            import_snapshot(store, _tar(tmp_path / "t.tar", members))
    with pytest.raises(InvalidInput, match="is not a file"):
        import_snapshot(store, _tar(tmp_path / "l.tar", [], link="blobs/x"))
    with pytest.raises(InvalidInput, match="over 10 bytes"):
        import_snapshot(
            store, _tar(tmp_path / "b.tar", [("snapshot.json", b"[]" * 10)]), max_bytes=10
        )
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    with pytest.raises(InvalidInput, match="not a readable tar"):
        import_snapshot(store, tmp_path / "junk.tar")


@pytest.mark.parametrize("mode", ["off", "live", "record", "replay"])
async def test_every_web_provider_answers_both_tools_with_text_and_sources(
    tmp_path: Path, mode: str
) -> None:
    """The shared case of the WebProvider role, for each implementation and mode."""
    from assay_runner.web import OfflineWeb, WebAnswer, WebProvider

    store = LocalBlobStore(tmp_path)

    async def nowhere(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    provider: WebProvider = (
        OfflineWeb()
        if mode == "off"
        else CampaignWeb(
            spec=WebSpec(mode=mode),  # type: ignore[arg-type]
            store=store,
            policy=NetPolicy(resolver=nowhere),
        )
    )
    for answer in (await provider.search("q"), await provider.fetch("https://nowhere.example/")):
        assert isinstance(answer, WebAnswer) and answer.text
        for source in answer.sources:
            assert store.get_bytes(source.text_sha256).decode() == answer.text
