"""The sandbox runtime: the cached Debian rootfs and the Docker image imported from it.

Both are keyed by the recipe hash (sha256 of ``deploy/sandbox/build-rootfs.sh``, 16 hex),
so an edited recipe builds a new runtime and an unchanged one is reused.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

__all__ = [
    "default_rootfs",
    "ensure_image",
    "ensure_rootfs",
    "image_tag",
    "recipe_hash",
    "recipe_path",
    "sandbox_cache",
]


def recipe_path() -> Path:
    """The rootfs build script (ASSAY_SANDBOX_RECIPE overrides the repo copy)."""
    env = os.environ.get("ASSAY_SANDBOX_RECIPE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "deploy" / "sandbox" / "build-rootfs.sh"


def recipe_hash() -> str:
    """The cache key of the runtime: must equal ``build-rootfs.sh --hash``."""
    return hashlib.sha256(recipe_path().read_bytes()).hexdigest()[:16]


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
