"""Model API keys never leak: not into the log, the blobs, the logs, nor the sandbox.

A small campaign runs end to end with restricted users: a scripted agent through the
real OpenAI SDK and an Anthropic-style judge through the real Anthropic SDK, each model
server accepting only its own fake key. The agent dumps its environment inside the
sandbox. Then everything the platform wrote is scanned for the keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import Bus, read_raw
from assay.campaign import submit_campaign
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_schemas import AgentSpec, AgentStepLogged, JudgeSpec, JudgmentRecorded
from assay_testing.pipeline import campaign, wait_for_events, write_task
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.judge.cases import reading_judge, verdict

from .conftest import SecureNats
from .stack import connected, restricted_services

pytestmark = pytest.mark.timeout(60)

AGENT_KEY_ENV = "ASSAY_TEST_LEAK_AGENT_KEY"
AGENT_KEY = "sk-test-LEAKCANARY-1234567890"
JUDGE_KEY_ENV = "ASSAY_TEST_LEAK_JUDGE_KEY"
JUDGE_KEY = "sk-ant-api03-LEAKCANARY-judge-0987654321"
CANARIES = (AGENT_KEY, JUDGE_KEY, "LEAKCANARY")

AGENT = ScriptedSequence(
    [
        ScriptReply.call("bash", {"command": "env"}),
        ScriptReply.call(
            "bash",
            {"command": "tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ"},
        ),
        ScriptReply.call(
            "python",
            {
                "code": "import os, json; open('env.json', 'w').write(json.dumps(dict(os.environ))); print(sorted(os.environ))"
            },
        ),
        ScriptReply.call(
            "bash",
            {
                "command": "grep -rsl LEAK''CANARY / --exclude-dir=proc --exclude-dir=sys | head -3; echo scanned"
            },
        ),
        ScriptReply.call("submit", {"answer": "Environment written to env.json."}),
    ]
)
JUDGE = reading_judge(
    [("list_files", {}), ("read_text", {"path": "env.json"})], verdict(7, files=["env.json"])
)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake keys, in the variables the agent and judge specs name."""
    monkeypatch.setenv(AGENT_KEY_ENV, AGENT_KEY)
    monkeypatch.setenv(JUDGE_KEY_ENV, JUDGE_KEY)


@pytest.fixture
def agent_server(keys: None) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer({"agent": AGENT}, require_api_key=AGENT_KEY) as server:
        yield server


@pytest.fixture
def judge_server(keys: None) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer({"judge": JUDGE}, require_api_key=JUDGE_KEY) as server:
        yield server


def leaks(data: bytes | str, where: str) -> list[str]:
    """`where` for each canary found in `data`."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [f"{where}: {c}" for c in CANARIES if c in text]


def scan_tree(root: Path) -> list[str]:
    """Canaries in any file under `root` (blob store, JetStream files, sandbox state)."""
    found: list[str] = []
    if not root.exists():
        return found
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                found += leaks(path.read_bytes(), str(path))
            except OSError:
                continue
    return found


async def test_keys_appear_nowhere(
    secure: SecureNats,
    admin_bus: Bus,
    tmp_path: Path,
    agent_server: ScriptedModelServer,
    judge_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store = LocalBlobStore(secure.base.blob_dir)
    folder = write_task(
        tmp_path / "tasks", "env", "what is in your environment?", {"notes.txt": "hi\n"}
    )
    agent = AgentSpec(
        agent_id="agent",
        model="agent",
        base_url=agent_server.openai_base_url,
        api_key_env=AGENT_KEY_ENV,
    )
    judge = JudgeSpec(
        judge_id="claude-ish",
        provider="anthropic",
        model="judge",
        base_url=judge_server.base_url,
        api_key_env=JUDGE_KEY_ENV,
    )
    spec = campaign("leak", [agent], judges=[judge])
    cli = await connected(secure.settings("cli"), "cli")
    try:
        async with restricted_services(secure.settings, store, judges=[judge]):
            await submit_campaign(cli, store, spec, load_tasks(folder, max_bytes=10_000))
            events = await wait_for_events(
                cli, lambda evs: any(isinstance(e, JudgmentRecorded) for e in evs), timeout=45
            )
    finally:
        await cli.stop()

    # The run really happened, with both keys accepted and the environment dumped.
    steps = sorted((e for e in events if isinstance(e, AgentStepLogged)), key=lambda s: s.step)
    outputs = [r.output for s in steps for r in s.tool_results]
    assert "PATH=" in outputs[0] and "PATH" in outputs[1] and "scanned" in outputs[3]
    assert [r.status for r in agent_server.requests()] == [200] * len(steps)
    assert all(r.status == 200 for r in judge_server.requests())
    assert judge_server.requests(), "the judge never called its model"
    # The scan sees a key where it belongs: in the model servers' auth headers.
    assert leaks(json.dumps(agent_server.requests()[0].headers), "auth")
    assert leaks(json.dumps(judge_server.requests()[0].headers), "auth")

    found: list[str] = []
    # The sandbox: what the agent saw of its environment.
    for i, out in enumerate(outputs):
        found += leaks(out, f"tool output {i}")
    # The log: every message's bytes and headers, events and dead letters.
    for stream, subject in (
        (secure.base.stream, f"{secure.base.subject_prefix}.ev.>"),
        (f"{secure.base.stream}_DLQ", f"{secure.base.subject_prefix}.dlq.>"),
    ):
        async for raw in read_raw(admin_bus.js, stream, subject=subject):
            found += leaks(raw.data, f"{stream} seq {raw.sequence}")
            found += leaks(json.dumps(raw.headers), f"{stream} seq {raw.sequence} headers")
    # Blobs, the JetStream files on disk, sandbox state and snapshots.
    found += scan_tree(secure.base.blob_dir)
    found += scan_tree(secure.server.data_dir)
    found += scan_tree(secure.base.state_dir)
    # Service logs (everything, DEBUG included).
    for record in caplog.records:
        found += leaks(record.getMessage(), f"log {record.name}")
        if record.exc_text:
            found += leaks(record.exc_text, f"log {record.name} traceback")
    # Prompts sent to the models: tool results and sealed files must not carry keys.
    for server in (agent_server, judge_server):
        for r in server.requests():
            found += leaks(json.dumps(r.body), f"model request {r.index} to {r.model}")
    assert found == [], "\n".join(found)
