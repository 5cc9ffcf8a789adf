"""A program agent's run: the team's own command in the sandbox, its model calls through
the run's gateway (see gateway.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from assay.bundle import BUNDLE_MOUNT
from assay.bus import Bus
from assay.providers import PriceTable
from assay.sandbox_client import SandboxClient
from assay.store import BlobStore
from assay_schemas import (
    GATEWAY_PORT,
    AgentStepLogged,
    ExecOutcome,
    ProgramSpec,
    RunFault,
    RunRequested,
    SandboxError,
    SandboxReady,
    same_run,
    unb64,
)

from .agent import AnswerNotStored, publish_finished
from .gateway import Gateway, ModelCall

__all__ = ["PROMPT_FILE", "ProgramFailed", "ProgramRun"]

PROMPT_FILE = "/tmp/assay-task/prompt.md"
"""Outside /workspace, so that the prompt is not sealed as the agent's work."""
_DUMMY_KEY = "assay-gateway"
"""SDKs insist on a key; the gateway ignores it and sends the real one upstream."""


class ProgramFailed(RunFault):
    """The run could not end with AgentFinished; whose failure that is depends on how
    (`infrastructure`: the platform's, else the program's own)."""

    def __init__(self, error: str, *, infrastructure: bool, output_sha256: str | None) -> None:
        super().__init__(error)
        self.fault = "platform" if infrastructure else "agent"
        self.output_sha256 = output_sha256
        """The program's stdout and stderr (a blob), when it ran."""


def _restarted(evidence: str) -> ProgramFailed:
    return ProgramFailed(
        f"the runner restarted while the program may have run ({evidence}); "
        "a program cannot resume",
        infrastructure=True,
        output_sha256=None,
    )


@dataclass(kw_only=True)
class ProgramRun:
    """Runs the program once, then ends the run from its exit and the gateway's record."""

    bus: Bus
    store: BlobStore
    request: RunRequested
    ready: SandboxReady
    sandbox: SandboxClient
    prices: PriceTable
    _logged: int = 0

    @property
    def program(self) -> ProgramSpec:
        assert self.request.agent.program is not None
        return self.request.agent.program

    async def run(self, steps: list[AgentStepLogged], attempt: int = 1) -> None:
        """Run the program to its end; raises ProgramFailed when the run fails.

        attempt is the SandboxReady's delivery: past the first, a runner took the run
        before and may have started the program.
        """
        folder = self.request.sandbox.gateway_dir
        if folder is None:
            raise ProgramFailed(
                "the run has no gateway folder", infrastructure=True, output_sha256=None
            )
        # A program cannot resume: its memory died with the runner that watched it. Decided
        # from the log first: the orphan may still run, and the sandbox serves one command
        # at a time, so asking it would wait for the orphan (RunFailed destroys the sandbox,
        # and the orphan with it).
        if steps or attempt > 1:
            raise _restarted(f"delivery {attempt}, {len(steps)} model calls logged")
        if (await self.sandbox.exec(["test", "-e", PROMPT_FILE], timeout_s=30)).exit_code == 0:
            raise _restarted("its prompt file is there")
        # The wall clock runs from here, not from the sandbox's readiness: the wait between
        # the two is the runner's queue, not the program's time (see `agent.began`).
        began_at = datetime.now(UTC)
        gateway = Gateway(
            agent=self.request.agent,
            limits=self.request.limits,
            prices=self.prices,
            store=self.store,
            started_at=began_at,
            log_step=self._log_step,
        )
        try:
            await gateway.start(Path(folder))
        except OSError as e:
            raise ProgramFailed(
                f"model gateway: {e}", infrastructure=True, output_sha256=None
            ) from e
        try:
            outcome = await self._execute(began_at)
        finally:
            await gateway.close()
        stdout, stderr = unb64(outcome.stdout_b64), unb64(outcome.stderr_b64)
        blob = await asyncio.to_thread(
            self.store.put_bytes, b"--- stdout ---\n" + stdout + b"\n--- stderr ---\n" + stderr
        )
        stop = gateway.stop_reason or ("wall_clock" if outcome.timed_out else None)
        if gateway.fault is not None and stop is None and outcome.exit_code != 0:
            raise ProgramFailed(
                f"model gateway: {gateway.fault}", infrastructure=True, output_sha256=blob.sha256
            )
        if stop is None and outcome.exit_code != 0:
            tail = stderr[-2000:].decode(errors="replace")
            raise ProgramFailed(
                f"the program exited with status {outcome.exit_code}: {tail}",
                infrastructure=False,
                output_sha256=blob.sha256,
            )
        final = await self._answer(stdout)
        try:
            await publish_finished(
                self.bus,
                self.store,
                self.request,
                self.ready,
                stop or "submitted",
                final,
                gateway.steps,
                blob.sha256,
                began_at=began_at,
            )
        except AnswerNotStored as e:
            raise ProgramFailed(str(e), infrastructure=True, output_sha256=blob.sha256) from e

    async def _execute(self, began_at: datetime) -> ExecOutcome:
        """The prompt file, then the program with the task's environment."""
        prompt = self.request.task.prompt.encode()
        script = f"mkdir -p {Path(PROMPT_FILE).parent} && cat > {PROMPT_FILE}"
        await self.sandbox.exec(["/bin/sh", "-c", script], stdin=prompt, timeout_s=30)
        base = f"http://127.0.0.1:{GATEWAY_PORT}"
        env = {
            **self.program.env,
            "OPENAI_BASE_URL": f"{base}/v1",
            "OPENAI_API_KEY": _DUMMY_KEY,
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_API_KEY": _DUMMY_KEY,
            "ASSAY_MODEL": self.request.agent.model,
            "ASSAY_TASK_ID": self.request.task_id or "",
            "ASSAY_PROMPT_FILE": PROMPT_FILE,
            "ASSAY_WORKSPACE": "/workspace",
            "ASSAY_ANSWER_FILE": self.program.answer_file or "",
            "ASSAY_AGENT_DIR": BUNDLE_MOUNT if self.program.bundle_sha256 else "",
        }
        left = self.request.limits.wall_clock_s - (datetime.now(UTC) - began_at).total_seconds()
        return await self.sandbox.exec(
            list(self.program.command), timeout_s=max(left, 1.0), env=env, cwd="/workspace"
        )

    async def _answer(self, stdout: bytes) -> str:
        """The final answer: the named file under /workspace, else the program's stdout."""
        if self.program.answer_file is None:
            return stdout.decode(errors="replace").strip()
        try:
            return (
                (await self.sandbox.read_file(self.program.answer_file))
                .decode(errors="replace")
                .strip()
            )
        except SandboxError:
            return ""  # no answer left: judged as such

    async def _log_step(self, fields: ModelCall) -> AgentStepLogged:
        index, self._logged = self._logged, self._logged + 1
        step = AgentStepLogged(
            event_id=AgentStepLogged.id_for(self.request.run_id, index),
            **same_run(self.request, cause=self.ready),
            step=index,
            producer=self.bus.producer,
            **fields,
        )
        await self.bus.publish(step)
        return step
