"""The public surface of the backends package is exactly its __all__."""

from __future__ import annotations

import assay_sandbox_manager.backends as backends
from assay_sandbox_manager.backends import BubblewrapBackend, DockerBackend, SandboxBackend


def test_all_is_exported() -> None:
    public = {n for n in dir(backends) if not n.startswith("_")}
    assert set(backends.__all__) <= public
    assert public - set(backends.__all__) == set()


def test_backends_satisfy_protocol() -> None:
    for cls in (BubblewrapBackend, DockerBackend):
        for name in (
            "create",
            "exec",
            "read_file",
            "write_file",
            "list_files",
            "copy_for_seal",
            "destroy",
            "list_live",
        ):
            assert callable(getattr(cls, name)), (cls, name)
    assert isinstance(SandboxBackend, type)
