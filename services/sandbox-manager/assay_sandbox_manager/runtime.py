"""The sandbox runtime: the cached Debian rootfs and the Docker image imported from it.

Both are keyed by the recipe hash (sha256 of ``deploy/sandbox/build-rootfs.sh`` followed by
the resident's source, ``resident.c``, and the start helper's, ``spawn.c``, beside it; 16
hex), so an edited recipe builds a new runtime and an unchanged one is reused.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "cache_entry",
    "default_rootfs",
    "ensure_image",
    "ensure_rootfs",
    "image_tag",
    "recipe_hash",
    "recipe_path",
    "sandbox_cache",
]


# Resolved once: resolve() stats every component, and the recipe is asked for at every
# sandbox start.
_REPO_RECIPE = Path(__file__).resolve().parents[3] / "deploy" / "sandbox" / "build-rootfs.sh"


def recipe_path() -> Path:
    """The rootfs build script (ASSAY_SANDBOX_RECIPE overrides the repo copy); the C
    sources it compiles, resident.c and spawn.c, are beside it."""
    env = os.environ.get("ASSAY_SANDBOX_RECIPE")
    if env:
        return Path(env)
    return _REPO_RECIPE


def recipe_hash() -> str:
    """The cache key of the runtime: must equal ``build-rootfs.sh --hash``."""
    script = recipe_path()
    # Asked at every sandbox start: hashed again only when a file's stat changed.
    sources = (script, script.with_name("resident.c"), script.with_name("spawn.c"))
    return _hash_of(tuple(_stat_key(f) for f in sources))


def _stat_key(path: Path) -> tuple[str, int, int, int, int]:
    st = path.stat()
    return str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@functools.lru_cache(maxsize=8)
def _hash_of(files: tuple[tuple[str, int, int, int, int], ...]) -> str:
    both = b"".join(Path(f[0]).read_bytes() for f in files)
    return hashlib.sha256(both).hexdigest()[:16]


def sandbox_cache() -> Path:
    """Cache root of built runtimes (ASSAY_SANDBOX_CACHE, default /var/cache/assay)."""
    return Path(os.environ.get("ASSAY_SANDBOX_CACHE", "/var/cache/assay"))


def default_rootfs() -> Path:
    """Where the rootfs of the current recipe lives once built."""
    return sandbox_cache() / f"rootfs-{recipe_hash()}"


def image_tag() -> str:
    """The Docker tag of the current recipe's image."""
    return f"assay-sandbox:{recipe_hash()}"


def ensure_rootfs() -> Path:
    """Build the rootfs unless cached (minutes on first build) and return its path."""
    root = default_rootfs()
    if (root / ".assay-rootfs-complete").is_file():
        return root
    out = subprocess.run([str(recipe_path())], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def ensure_image() -> str:
    """Import the rootfs as ``assay-sandbox:<hash>`` (and ``:latest``) unless present."""
    tag = image_tag()
    have = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    if have.returncode != 0:
        root = ensure_rootfs()
        subprocess.run(
            f"tar -C {root} -c . | docker import - {tag}",
            shell=True,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    subprocess.run(["docker", "tag", tag, "assay-sandbox:latest"], check=True)
    return tag


def cache_entry(entry: Path, marker: str, fill: Callable[[Path], str]) -> None:
    """Make a sandbox-cache entry once: `fill` builds it in a fresh folder beside the
    entry and returns the text of its `marker` file, then the folder is moved in whole.

    A lock keeps two services from building the same entry; the marker, written last,
    is what tells a complete entry from a half-made one of a crashed service.
    """
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{entry}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (entry / marker).is_file():
            return
        staging = Path(tempfile.mkdtemp(prefix=f"{entry.name}.", dir=entry.parent))
        try:
            (staging / marker).write_text(fill(staging))
            # Sandboxes run as other uids: they read and traverse, never write.
            subprocess.run(["chmod", "-R", "a+rX,go-w", str(staging)], check=True)
            shutil.rmtree(entry, ignore_errors=True)
            staging.rename(entry)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
