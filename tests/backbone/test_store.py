"""The blob store: one behavioural test case run against every backend."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from minio import Minio

from assay.store import BlobStore, LocalBlobStore, S3BlobStore, store_file
from assay_schemas import BlobCorrupted, BlobNotFound, StoreError


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param == "local":
        yield LocalBlobStore(tmp_path / "blobs")
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    client = Minio(endpoint, access_key="test", secret_key="test", secure=False, region="us-east-1")
    s3 = S3BlobStore(client, f"b-{uuid.uuid4().hex[:12]}")
    s3.ensure_bucket()
    yield s3


def corrupt(store: BlobStore, sha256: str, data: bytes) -> None:
    """Overwrite a stored blob's bytes behind the store's back."""
    if isinstance(store, LocalBlobStore):
        path = store.path_of(sha256)
        os.chmod(path, 0o644)
        path.write_bytes(data)
    else:
        assert isinstance(store, S3BlobStore)
        import io

        store.client.put_object(store.bucket, store.key_of(sha256), io.BytesIO(data), len(data))


def test_put_get_round_trip_and_idempotence(store: BlobStore) -> None:
    data = b"ct values\n1,2,3\n"
    info = store.put_bytes(data)
    assert info.sha256 == hashlib.sha256(data).hexdigest() and info.size == len(data)
    assert store.put_bytes(data) == info
    assert store.exists(info.sha256)
    assert store.get_bytes(info.sha256) == data


def test_put_file_streams_and_get_file_verifies(store: BlobStore, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    chunk = os.urandom(1 << 20)
    with big.open("wb") as fh:
        for _ in range(24):
            fh.write(chunk)
    tracemalloc.start()
    info = store.put_file(big)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert info.size == 24 << 20
    if isinstance(store, LocalBlobStore):
        # moto's S3 server runs in this process and holds the object itself, so the
        # measurement only means something for the local backend; minio uploads in parts.
        assert peak < 12 << 20, f"put_file held {peak} bytes: it must stream"
    out = tmp_path / "out.bin"
    store.get_file(info.sha256, out)
    assert out.stat().st_size == info.size
    assert hashlib.sha256(out.read_bytes()).hexdigest() == info.sha256


def test_corrupted_blob_is_detected(store: BlobStore, tmp_path: Path) -> None:
    info = store.put_bytes(b"the real result: IC50 = 3.2 uM")
    corrupt(store, info.sha256, b"the fake result: IC50 = 0.1 uM")
    with pytest.raises(BlobCorrupted, match=info.sha256):
        store.get_bytes(info.sha256)
    dest = tmp_path / "x"
    with pytest.raises(BlobCorrupted):
        store.get_file(info.sha256, dest)
    assert not dest.exists(), "a file that failed verification must not be left behind"


def test_only_a_corrupted_blob_is_discarded(store: BlobStore) -> None:
    sound = store.put_bytes(b"sound")
    bad = store.put_bytes(b"promised")
    corrupt(store, bad.sha256, b"forged")
    assert not store.discard_corrupted(sound.sha256) and store.exists(sound.sha256)
    assert store.discard_corrupted(bad.sha256) and not store.exists(bad.sha256)
    assert not store.discard_corrupted(bad.sha256), "nothing left to discard"
    assert store.put_bytes(b"promised") == bad
    assert store.get_bytes(bad.sha256) == b"promised"


def test_missing_blob_and_bad_address(store: BlobStore) -> None:
    missing = "0" * 64
    assert not store.exists(missing)
    with pytest.raises(BlobNotFound, match=missing):
        store.get_bytes(missing)
    with pytest.raises(StoreError, match="not a sha256"):
        store.get_bytes("../../etc/passwd")


def test_store_file_describes_a_workspace_file(store: BlobStore, tmp_path: Path) -> None:
    src = tmp_path / "counts.tsv"
    src.write_text("gene\ts1\nA\t3\n")
    ref = store_file(store, src, "data/counts.tsv")
    assert ref.path == "data/counts.tsv" and ref.media_type == "text/tab-separated-values"
    assert store.get_bytes(ref.sha256) == src.read_bytes()
