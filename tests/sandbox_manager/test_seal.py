"""Sealing over a plain directory (no sandbox needed): the plan, the store step, the seal."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from assay.store import BlobInfo, LocalBlobStore
from assay_sandbox_manager.seal import (
    SealCaps,
    SealCopy,
    answer_fields,
    display_path,
    plan_seal,
    store_copy,
    store_plan,
)
from assay_schemas import (
    FINAL_MESSAGE_INLINE_CHARS,
    AgentFinished,
    Exclusion,
    FileRef,
    Producer,
    RunFailed,
    Usage,
)


def test_files_planned_typed_and_stored_by_hash(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "t.csv").write_bytes(b"a,b\n")
    big = os.urandom(3 * 1024 * 1024 + 7)  # larger than one read chunk
    (ws / "big.bin").write_bytes(big)
    plan = plan_seal(ws)
    assert [f.path for f in plan.files] == ["big.bin", "sub/t.csv"]
    assert [f.size for f in plan.files] == [len(big), 4]
    assert plan.files[1].media_type == "text/csv"
    assert plan.total_bytes == len(big) + 4 and plan.excluded == []
    store = LocalBlobStore(tmp_path / "blobs")
    seal = store_plan(ws, plan, store)
    assert seal.files[0].sha256 == hashlib.sha256(big).hexdigest()
    assert seal.files[1].sha256 == hashlib.sha256(b"a,b\n").hexdigest()
    assert [(f.path, f.size, f.media_type) for f in seal.files] == [
        ("big.bin", len(big), plan.files[0].media_type),
        ("sub/t.csv", 4, "text/csv"),
    ]
    assert store.get_bytes(seal.files[0].sha256) == big


def test_symlinks_and_special_files_excluded(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    ws = tmp_path / "ws"
    (ws / "to-shadow").symlink_to("/etc/shadow")
    (ws / "to-dir").symlink_to(outside)
    (ws / "dangling").symlink_to("nowhere")
    os.mkfifo(ws / "fifo")
    plan = plan_seal(ws)
    assert plan.files == []
    assert plan.excluded == [
        Exclusion(path="dangling", reason="symlink"),
        Exclusion(path="fifo", reason="special file"),
        Exclusion(path="to-dir", reason="symlink"),
        Exclusion(path="to-shadow", reason="symlink"),
    ]


def test_caps_become_exclusions(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x" * 10)
    plan = plan_seal(tmp_path, SealCaps(max_files=3))
    assert len(plan.files) == 3
    assert [e.reason for e in plan.excluded] == ["over artifact count cap"] * 2
    plan = plan_seal(tmp_path, SealCaps(max_total_bytes=25))
    assert len(plan.files) == 2
    assert {e.reason for e in plan.excluded} == {"over artifact size cap"}
    plan = plan_seal(tmp_path, SealCaps(max_file_bytes=5))
    assert {e.reason for e in plan.excluded} == {"over artifact file size cap"}


def test_weird_names_round_trip(tmp_path: Path) -> None:
    names = [b"with space", b"new\nline", b"caf\xe9", b"\xff\xfe.txt", "ünï.txt".encode()]
    for n in names:
        with open(os.path.join(os.fsencode(tmp_path), n), "wb") as out:
            out.write(n)
    os.symlink(b"nowhere", os.path.join(os.fsencode(tmp_path), b"link\xe9"))
    plan = plan_seal(tmp_path)
    assert sorted(os.fsencode(f.path) for f in plan.files) == sorted(names)
    for f in plan.files:
        assert (tmp_path / f.path).read_bytes() == os.fsencode(f.path)
        display_path(f.path).encode("utf-8")  # always printable / JSON-safe
    assert display_path(os.fsdecode(b"caf\xe9")) == "caf\\xe9"
    # The seal carries display paths only, for files and exclusions alike.
    assert plan.excluded == [Exclusion(path="link\\xe9", reason="symlink")]
    seal = store_plan(tmp_path, plan, LocalBlobStore(tmp_path.parent / "weird-blobs"))
    assert sorted(f.path for f in seal.files) == sorted(
        n.decode("utf-8", "backslashreplace") for n in names
    )


class CountingStore(LocalBlobStore):
    """A local store that counts which files it was asked to put."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.puts: Counter[Path] = Counter()

    def put_file(self, path: Path) -> BlobInfo:
        """Count, then store."""
        self.puts[path] += 1
        return super().put_file(path)


def test_each_file_is_read_and_hashed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    contents = {"a.txt": b"a", "sub/b.csv": b"b,c\n", "big.bin": os.urandom(3 << 20)}
    for name, data in contents.items():
        (ws / name).write_bytes(data)
    (ws / "link").symlink_to("a.txt")
    store = CountingStore(tmp_path / "blobs")
    hashes = Counter[str]()
    real_sha256 = hashlib.sha256

    def counting_sha256(*args: Any, **kwargs: Any) -> Any:
        hashes["sha256"] += 1
        return real_sha256(*args, **kwargs)

    opened = Counter[str]()
    real_open = Path.open

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.is_relative_to(ws):
            opened[self.relative_to(ws).as_posix()] += 1
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    monkeypatch.setattr(Path, "open", counting_open)
    seal = store_copy(SealCopy(ws, plan_seal(ws)), store)
    monkeypatch.undo()
    assert sorted(f.path for f in seal.files) == sorted(contents)
    assert seal.excluded == [Exclusion(path="link", reason="symlink")]
    assert store.puts == Counter({ws / name: 1 for name in contents})
    assert opened == Counter(dict.fromkeys(contents, 1))
    assert hashes["sha256"] == len(contents)
    assert not ws.exists()  # the copy is removed once stored


def _finished(text: str, blob: FileRef | None = None) -> AgentFinished:
    return AgentFinished(
        event_id=AgentFinished.id_for("r1"),
        campaign_id="c1",
        run_id="r1",
        producer=Producer(service="test", version="0"),
        stop_reason="submitted",
        final_message=text,
        final_message_truncated=blob is not None,
        final_message_blob=blob,
        steps=1,
        usage=Usage(),
    )


def test_the_seal_carries_the_answer_as_the_runner_bounded_it(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    info = store.put_bytes(b"x" * 100_000)
    ref = FileRef(path="final-message.txt", sha256=info.sha256, size=info.size)
    start = "x" * FINAL_MESSAGE_INLINE_CHARS
    assert answer_fields(_finished(start, ref), store) == {
        "final_message": start,
        "final_message_truncated": True,
        "final_message_blob": ref,
    }
    assert answer_fields(_finished("short"), store)["final_message_blob"] is None
    failed = RunFailed(
        event_id=RunFailed.id_for("r1"),
        campaign_id="c1",
        run_id="r1",
        producer=Producer(service="test", version="0"),
        stage="agent",
        error="boom",
        infrastructure=False,
    )
    assert answer_fields(failed, store) == {}


def test_a_long_answer_logged_before_answers_were_bounded_is_bounded_at_the_seal(
    tmp_path: Path,
) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    whole = "é" * 300_000  # an older AgentFinished inlined it whole
    fields = answer_fields(_finished(whole), store)
    assert fields["final_message"] == whole[:FINAL_MESSAGE_INLINE_CHARS]
    assert fields["final_message_truncated"]
    assert store.get_bytes(fields["final_message_blob"].sha256).decode() == whole
