"""The control agent plays its stored plan through the agent's tools, turn by turn."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from assay.providers import AssistantMessage, ToolCall, UserMessage
from assay.store import LocalBlobStore
from assay_runner.control import ControlProvider
from assay_schemas import ControlFile, ControlPlan, ProviderError

PNG = bytes(range(256)) * 600  # 153,600 bytes with NUL: written in three chunks
CSV = "gene,fold change\nIL6,8.62\n# ünïcode; $(rm -rf /); `x`\n"


def _plan(store: LocalBlobStore, files: dict[str, bytes], message: str) -> str:
    refs = []
    for path, data in files.items():
        info = store.put_bytes(data)
        text = b"\x00" not in data and data.decode("utf-8", "replace").encode() == data
        refs.append(ControlFile(path=path, sha256=info.sha256, size=info.size, text=text))
    plan = ControlPlan(files=refs, message=message)
    return store.put_bytes(plan.model_dump_json().encode()).sha256


async def test_a_plan_is_written_then_answered_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    files = {"results/table.csv": CSV.encode(), "results/it's a figure.png": PNG}
    provider = ControlProvider(plan_sha256=_plan(store, files, "Done: see results/."), store=store)
    messages: list[object] = [UserMessage(content="the task")]
    calls: list[ToolCall] = []
    while True:
        completion = await provider.complete(messages)  # type: ignore[arg-type]
        (call,) = completion.tool_calls
        calls.append(call)
        if call.name == "submit":
            break
        messages.append(AssistantMessage(tool_calls=(call,)))
    assert [c.name for c in calls] == ["write_file", "bash", "bash", "bash", "submit"]
    assert json.loads(calls[-1].arguments) == {"answer": "Done: see results/."}
    assert json.loads(calls[0].arguments) == {"path": "results/table.csv", "content": CSV}
    # The shell steps rebuild the bytes exactly, whatever the file is called.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for call in calls[1:4]:
        command = json.loads(call.arguments)["command"]
        assert len(command.encode()) < 128 * 1024, "one shell argument stays under Linux's limit"
        subprocess.run(["bash", "-c", command], cwd=workspace, check=True, timeout=30,
                       env={"PATH": os.environ["PATH"]})  # fmt: skip
    assert (workspace / "results" / "it's a figure.png").read_bytes() == PNG
    assert sorted(p.name for p in workspace.rglob("*") if p.is_file()) == ["it's a figure.png"]
    # A resumed run (three turns logged) goes on with the fourth.
    again = ControlProvider(plan_sha256=provider.plan_sha256, store=store)
    resumed = await again.complete([messages[0], *[AssistantMessage(tool_calls=(c,)) for c in calls[:3]]])  # type: ignore[list-item]  # fmt: skip
    assert resumed.tool_calls[0].arguments == calls[3].arguments


async def test_a_lost_or_bad_plan_is_the_platforms_failure(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    with pytest.raises(ProviderError, match="control plan"):
        await ControlProvider(plan_sha256="0" * 64, store=store).complete([])
    bad = store.put_bytes(b'{"files": "nope"}').sha256
    with pytest.raises(ProviderError, match="control plan"):
        await ControlProvider(plan_sha256=bad, store=store).complete([])
