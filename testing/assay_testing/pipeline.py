"""Shared test helpers: in-process services on the real bus, waiting on the log."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.providers import AdaptiveLimiter, ModelProvider, RetryPolicy, make_provider
from assay.store import BlobStore
from assay.tasks import load_tasks
from assay_schemas import AgentSpec, CampaignSpec, Event, JudgeSpec, Limits, SandboxSpec, Task
from assay_testing.scripted import Script, ScriptedModelServer

SCRIPTED_KEY = "ASSAY_TEST_SCRIPTED_KEY"
os.environ.setdefault(SCRIPTED_KEY, "scripted")  # local servers take any key


@contextmanager
def scripted_server(
    scripts: Mapping[str, Script] | None = None, *, key: str = "scripted"
) -> Iterator[ScriptedModelServer]:
    """A scripted model server for `scripted_agent`s, which read `key` from SCRIPTED_KEY."""
    os.environ[SCRIPTED_KEY] = key
    with ScriptedModelServer(scripts) as server:
        yield server


async def submit_folder(
    bus: Bus, store: BlobStore, spec: CampaignSpec, folder: Path, *, max_bytes: int = 10_000
) -> list[Task]:
    """Submit the campaign `spec` over the tasks in `folder`, as `assay run` does."""
    return await submit_campaign(bus, store, spec, load_tasks(folder, max_bytes=max_bytes))


def scripted_agent(agent_id: str, model: str, base_url: str, **extra: object) -> AgentSpec:
    """An agent whose model is served by the scripted server over the real OpenAI SDK."""
    return AgentSpec(
        agent_id=agent_id, model=model, base_url=base_url, api_key_env=SCRIPTED_KEY, **extra
    )


def campaign(campaign_id: str, agents: list[AgentSpec], **extra: object) -> CampaignSpec:
    """A small campaign with fast limits."""
    defaults: dict[str, object] = {
        "limits": Limits(max_steps=10, tool_timeout_s=30),
        "sandbox": SandboxSpec(memory_mb=1024, exec_timeout_s=30, cpu_seconds=60),
    }
    defaults.update(extra)
    return CampaignSpec(campaign_id=campaign_id, agents=agents, **defaults)


async def wait_for_events(
    bus: Bus, predicate: Callable[[list[Event]], bool], *, timeout: float = 60.0
) -> list[Event]:
    """Poll the log until `predicate(all events)` holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        events = [e.event async for e in bus.replay()]
        if predicate(events):
            return events
        if asyncio.get_running_loop().time() > deadline:
            kinds = [e.event_type for e in events]
            raise AssertionError(
                f"log did not reach the expected state in {timeout}s; it holds {kinds}"
            )
        await asyncio.sleep(0.2)


def fast_providers(agent: AgentSpec) -> ModelProvider:
    """Providers with quick, seeded retries and a private limiter (tests stay fast and isolated)."""
    return make_provider(
        agent.provider,
        agent.model,
        base_url=agent.base_url,
        api_key_env=agent.api_key_env or SCRIPTED_KEY,
        timeout_s=agent.timeout_s,
        retry=RetryPolicy.for_tests(max_attempts=8),
        limiter=AdaptiveLimiter(agent.max_concurrency),
    )


def fast_judge_provider(spec: JudgeSpec) -> ModelProvider:
    """A judge provider with quick retries; the key comes from the env var the spec names."""
    assert spec.api_key_env is not None
    return make_provider(
        spec.provider,
        spec.model,
        base_url=spec.base_url,
        api_key_env=spec.api_key_env,
        timeout_s=spec.timeout_s,
        max_concurrency=spec.max_concurrency,
        retry=RetryPolicy.for_tests(),
    )


@asynccontextmanager
async def services(
    settings: Settings,
    store: BlobStore,
    *,
    names: tuple[str, ...] = ("sandbox-manager", "runner"),
    providers: Callable[[AgentSpec], ModelProvider] = fast_providers,
    judges: Sequence[JudgeSpec] = (),
    docker: bool = False,
    web_net: Any = None,
) -> AsyncIterator[dict[str, Any]]:
    """Start the named services (and a judge service per judge) in this process, each on
    its own connection; docker adds the Docker backend beside bubblewrap; web_net: the
    runner's network policy for web tools (a NetPolicy reaching the tests' stand-ins)."""
    from assay_judge.service import build as build_judge
    from assay_runner.service import build as build_runner
    from assay_sandbox_manager.backends import BubblewrapBackend, DockerBackend
    from assay_sandbox_manager.service import build as build_sandbox

    started: dict[str, Any] = {}
    try:
        if "sandbox-manager" in names:
            state = settings.instance_state
            backends: dict[str, Any] = {
                "bubblewrap": BubblewrapBackend(state / "bwrap", state / "seals")
            }
            if docker:
                backends["docker"] = DockerBackend(state / "docker", state / "seals")
            sm = build_sandbox(settings, store=store, backends=backends)
            await sm.start()
            started["sandbox-manager"] = sm
        if "runner" in names:
            runner = build_runner(settings, store=store, providers=providers, web_net=web_net)
            await runner.start()
            started["runner"] = runner
        for spec in judges:
            judge = build_judge(settings, spec, store=store, providers=fast_judge_provider)
            await judge.start()
            started[f"judge-{spec.judge_id}"] = judge
        yield started
    finally:
        for service in reversed(started.values()):
            await service.stop()
        sm_service = started.get("sandbox-manager")
        if sm_service is not None:
            for backend in sm_service.backends.values():
                for info in backend.list_live():
                    backend.destroy(info.sandbox_id)


def write_task(root: Path, task_id: str, prompt: str, files: dict[str, str]) -> Path:
    """A task folder on disk."""
    folder = root / task_id
    folder.mkdir(parents=True)
    (folder / "prompt.md").write_text(prompt)
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def settings_env(settings: Settings) -> dict[str, str]:
    """Environment that gives a subprocess the same settings (how services are deployed)."""
    import os

    env = dict(os.environ)
    for name, value in settings.model_dump(exclude_none=True).items():
        env[f"ASSAY_{name.upper()}"] = str(value)
    return env


async def wait_for_output(printed: Path, text: str, *, timeout_s: float = 10.0) -> None:
    """Until `text` stands in the file a subprocess prints to, or `timeout_s` has passed
    (the caller asserts on the output: a line printed after its last event can lag it)."""
    for _ in range(int(timeout_s / 0.1)):
        if text.encode() in printed.read_bytes():
            return
        await asyncio.sleep(0.1)


@asynccontextmanager
async def service_process(
    name: str, settings: Settings, *extra: str, env: dict[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`assay serve NAME` as a separate process; stopped with SIGTERM (then SIGKILL) at exit."""
    import signal
    import sys

    log = (settings.home / f"{name}.log").open("ab") if settings.home.exists() else None
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "assay_cli",
        "serve",
        name,
        *extra,
        env={**settings_env(settings), **(env or {})},
        stdout=log or asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            import os

            os.killpg(proc.pid, signal.SIGTERM)  # graceful: flushes telemetry, drains consumers
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if log:
            log.close()
