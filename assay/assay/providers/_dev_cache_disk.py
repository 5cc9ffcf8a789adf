"""The development cache's disk: its secret (entries are sealed with it), its size bound
(oldest entries evicted past it), and its warnings (each damaged entry said once).

The secret is 32 random bytes in ``<root>/secret`` (mode 0600), made on first use: an
entry's seal is an HMAC-SHA256 over its key, time and answer, so an answer edited on disk,
or copied in from another cache, does not verify and is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import threading
from pathlib import Path

__all__ = [
    "MAX_CACHE_BYTES",
    "SECRET_NAME",
    "cache_secret",
    "evict_over",
    "seal",
    "warn_once",
]

log = logging.getLogger("assay.providers._dev_cache")

MAX_CACHE_BYTES = 1 << 30
"""The most a cache directory holds (1 GiB); past it the oldest entries are removed."""

SECRET_NAME = "secret"
_SECRET_BYTES = 32
_EVICT_TO = 0.9
"""Eviction frees down to this share of the bound, so that not every put rescans."""

_lock = threading.Lock()
_sizes: dict[Path, int] = {}
"""Bytes of entries under each cache root, as this process last counted them."""
_warned: set[tuple[str, str]] = set()


def warn_once(path: Path, seen: bytes | str, message: str, *args: object) -> None:
    """Log `message` about the entry at `path` once per process for what was `seen` there
    (its bytes, or the error): a damaged entry that is not replaced (its model call
    failed, or the cache is read-only) is read again on each request; one line says it."""
    digest = hashlib.sha256(seen.encode() if isinstance(seen, str) else seen).hexdigest()
    with _lock:
        if (str(path), digest) in _warned:
            return
        _warned.add((str(path), digest))
    log.warning(message, path, *args)


def cache_secret(root: Path) -> bytes | None:
    """The cache's secret, made on first use; None (warned) when it cannot be read or made:
    then nothing is served from the cache, nor stored."""
    path = root / SECRET_NAME
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        warn_once(path, str(e), "model cache secret %s cannot be read (%s): the cache is off", e)
        return None
    try:
        return _make_secret(path)
    except OSError as e:
        warn_once(path, str(e), "model cache secret %s cannot be made (%s): the cache is off", e)
        return None


def _read_secret(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        secret = f.read(_SECRET_BYTES + 1)
    if len(secret) != _SECRET_BYTES:
        raise OSError(f"{len(secret)} bytes, not {_SECRET_BYTES}")
    return secret


def _make_secret(path: Path) -> bytes:
    """Write a new secret beside `path` and link it into place: whoever links first wins,
    and every other maker reads the winner's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SECRET_NAME}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_SECRET_BYTES))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return _read_secret(path)


def seal(secret: bytes, key: str, stored_at: str, completion_json: str) -> str:
    """The HMAC-SHA256 (hex) of an entry's key, time and answer under the cache's secret."""
    message = "\n".join((key, stored_at, completion_json)).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def _entries(root: Path) -> list[tuple[float, int, Path]]:
    """(mtime, size, path) of every entry under `root` (``<2 hex>/<key>.json``)."""
    found = []
    for path in root.glob("??/*.json"):
        with contextlib.suppress(OSError):
            st = path.lstat()
            found.append((st.st_mtime, st.st_size, path))
    return found


def evict_over(root: Path, added: int, bound: int) -> None:
    """Count `added` bytes just stored under `root`; past `bound`, remove the oldest entries
    until the cache holds at most 90 % of it. The first call per root counts the disk."""
    with _lock:
        if root not in _sizes:
            _sizes[root] = sum(size for _, size, _ in _entries(root))
        else:
            _sizes[root] += added
        if _sizes[root] <= bound:
            return
        entries = sorted(_entries(root))  # another process may have added some: recount
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= bound * _EVICT_TO:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= size
        _sizes[root] = total
        log.info("model cache %s over %d bytes: oldest entries removed", root, bound)
