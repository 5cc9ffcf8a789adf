"""Domain models: tasks, agents, judges, limits, sandboxes, campaigns."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._cache import CacheSpec
from ._controls import ControlsSpec
from ._ids import Identifier
from ._rubric import Rubric, default_rubric
from ._stopping import StoppingSpec
from ._web import WebSpec

__all__ = [
    "GATEWAY_MOUNT",
    "GATEWAY_PORT",
    "GATEWAY_SOCKET",
    "RULES_JUDGE_ID",
    "AgentSpec",
    "BlobRef",
    "CampaignSpec",
    "Criterion",
    "FileExistsCheck",
    "FileRef",
    "JudgeSpec",
    "Limits",
    "ModelSpec",
    "NumberNearCheck",
    "Price",
    "ProgramSpec",
    "ProviderKind",
    "ReferenceCheck",
    "SandboxSpec",
    "Task",
    "TaskJudgeConfig",
    "TextContainsCheck",
    "Usage",
]

RULES_JUDGE_ID = "rules"
"""The judge id of the deterministic rule judge; no campaign may name a judge so."""

GATEWAY_PORT = 18080
"""The loopback port where a program in a sandbox reaches its run's model gateway."""
GATEWAY_MOUNT = "/run/gateway"
"""Where a sandbox sees the host folder of its run's model gateway (`gateway_dir`)."""
GATEWAY_SOCKET = "model.sock"
"""The gateway's unix socket in that folder: the sandbox forwards GATEWAY_PORT to it."""

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Frozen(BaseModel):
    """Base for immutable, strict-field domain models."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class FileRef(Frozen):
    """A file by content: where it sits in a workspace and which blob holds its bytes."""

    path: str
    """Relative POSIX path inside the workspace."""
    sha256: Sha256
    """Content address of the bytes in the blob store."""
    size: int = Field(ge=0)
    """Size in bytes."""
    media_type: str = "application/octet-stream"
    """IANA media type guessed from the name."""


BlobRef = tuple[str, FileRef]
"""A blob an event references, with its role there (`attachment`, `artifact`, ...)."""


class FileExistsCheck(Frozen):
    """A required output file."""

    kind: Literal["file_exists"] = "file_exists"
    name: str
    """Short name shown in reports."""
    path: str
    """Workspace path (glob allowed) that must exist."""


class NumberNearCheck(Frozen):
    """A number in an output file must be within a tolerance of the truth."""

    kind: Literal["number_near"] = "number_near"
    name: str
    path: str
    """Workspace path (glob allowed) of the file to search."""
    pattern: str
    """Regex whose first group captures the number (searched in the file's text)."""
    expected: float
    tolerance: float = Field(ge=0)
    """Absolute tolerance."""


class TextContainsCheck(Frozen):
    """An output file must mention a phrase (case-insensitive regex)."""

    kind: Literal["contains"] = "contains"
    name: str
    path: str
    pattern: str


ReferenceCheck = Annotated[
    FileExistsCheck | NumberNearCheck | TextContainsCheck, Field(discriminator="kind")
]


class Criterion(Frozen):
    """A grading rule in words, for the LLM judges to apply (ASI-Bench string rules)."""

    text: str = Field(min_length=1)
    weight: float = Field(default=1.0, ge=0)
    """Relative weight the judges are told to give it."""


class TaskJudgeConfig(Frozen):
    """How a task wants to be judged (ASI-Bench style)."""

    method: str = "llm+rules"
    """The source's judging method (`hybrid`, `rule_and_llm`, ...), kept as written."""
    rule_weights: dict[str, float] = Field(default_factory=dict)
    """Weight per reference check name."""
    dimensions: list[str] = Field(default_factory=list)
    """Rubric dimensions to emphasise; empty means all."""
    sampling_times: int = Field(default=1, ge=1, le=20)
    """Verdict samples per judge."""
    rubric: Rubric | None = None
    """The task's own rubric (custom dimensions); None means the campaign's."""
    criteria: list[Criterion] = Field(default_factory=list)
    """Grading rules in words, shown to the LLM judges with their weights."""
    system_prompt: str = ""
    """Task-specific instructions added to every LLM judge's system prompt."""
    model: str = ""
    """The judge model the source named; the campaign's jury judges regardless."""


class Task(Frozen):
    """A scientist's request with its attachments."""

    task_id: Identifier
    prompt: str = Field(min_length=1)
    """The request as the scientist wrote it."""
    attachments: list[FileRef] = Field(default_factory=list)
    domain: str = ""
    phase: str = ""
    difficulty: str = ""
    source: str = ""
    """Where the task came from (folder, JSONL line, external system)."""
    expected_output: str = ""
    constraints: list[str] = Field(default_factory=list)
    reference_checks: list[ReferenceCheck] = Field(default_factory=list)
    judge: TaskJudgeConfig = Field(default_factory=TaskJudgeConfig)
    notes: str = ""
    """Free-form notes of the task's author (e.g. a gold hypothesis)."""
    notes_to_judges: bool = False
    """Whether the LLM judges are shown `notes`; agents never are."""

    @model_validator(mode="after")
    def _unique_attachment_paths(self) -> Task:
        seen: set[str] = set()
        for ref in self.attachments:
            if ref.path in seen:
                raise ValueError(f"task {self.task_id}: duplicate attachment path {ref.path!r}")
            seen.add(ref.path)
        return self


class Price(Frozen):
    """USD per million tokens."""

    input_per_mtok: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Price of input tokens read from the prompt cache; None means the input price."""
    cache_write_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Price of input tokens written to the prompt cache (Anthropic: 1.25x the input
    price); None means the input price (OpenAI's automatic caching has no surcharge)."""


class Usage(Frozen):
    """Token counts for one call or a whole run.

    `input_tokens` counts all input, whether read from the prompt cache, written to it or
    neither; the cache's parts are inside it, so usage that says otherwise is refused.
    """

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)
    """Input tokens read from the prompt cache."""
    cache_write_tokens: int = Field(default=0, ge=0)
    """Input tokens written to the prompt cache (Anthropic's cache creation)."""

    @model_validator(mode="after")
    def _cache_within_input(self) -> Usage:
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError(
                f"usage contradicts itself: {self.cached_tokens} cached and "
                f"{self.cache_write_tokens} cache-write tokens exceed "
                f"{self.input_tokens} input tokens"
            )
        return self

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


class Limits(Frozen):
    """Per-run stop conditions; every stop reason is recorded."""

    max_steps: int = Field(default=30, ge=1)
    max_tokens: int = Field(default=400_000, ge=1)
    wall_clock_s: float = Field(default=1800.0, gt=0)
    cost_budget_usd: float = Field(default=5.0, ge=0, allow_inf_nan=False)
    tool_timeout_s: float = Field(default=120.0, gt=0)
    tool_output_chars: int = Field(default=20_000, ge=100)
    """Tool output shown to the model; the whole output is kept as a blob."""


ProviderKind = Literal["openai", "anthropic"]


class ModelSpec(Frozen):
    """A model behind a provider. API keys are named by env var, never stored."""

    provider: ProviderKind = "openai"
    model: str
    base_url: str | None = None
    family: str = ""
    """Model family (e.g. 'gpt', 'claude', 'gemma') for self-preference analysis."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key."""
    params: dict[str, float | int | str | bool] = Field(default_factory=dict)
    """Sampling parameters passed to the provider (temperature, max_tokens, ...)."""
    max_concurrency: int = Field(default=8, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    cache_prompt: Literal["auto"] | bool = "auto"
    """Mark requests for the provider's prompt cache (Anthropic breakpoints on the
    system prompt, tools and latest turn; OpenAI's prompt_cache_key); auto is on."""


PipRequirement = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._\[\],<>=!~ -]*$", max_length=200)
]
"""A requirement a name leads (never an option such as --index-url, nor a path or URL)."""


class ProgramSpec(Frozen):
    """An agent program of the team's own, run in the sandbox; its model calls go through
    the run's model gateway (OPENAI_BASE_URL / ANTHROPIC_BASE_URL point at it)."""

    command: list[str] = Field(min_length=1)
    """Command and arguments, run in /workspace."""
    env: dict[str, str] = Field(default_factory=dict)
    answer_file: str | None = None
    """Where (under /workspace) the program leaves its final answer; None means stdout."""
    packages: list[PipRequirement] = Field(default_factory=list)
    """pip requirements (e.g. "smolagents[openai]==1.20.0") installed into the sandbox
    runtime for this program: an extension built once per list and cached by its hash."""
    bundle: str | None = None
    """A folder or tar of the program's own code (relative to the campaign file); packed,
    checked and stored at submit, when bundle_sha256 replaces it."""
    bundle_sha256: Sha256 | None = None
    """The stored bundle (a tar in the blob store), unpacked read-only at /opt/agent."""

    @model_validator(mode="after")
    def _one_bundle(self) -> ProgramSpec:
        if self.bundle is not None and self.bundle_sha256 is not None:
            raise ValueError("a program names its bundle by path or by bundle_sha256, not both")
        return self


class AgentSpec(ModelSpec):
    """An agent under evaluation: Assay's own loop (kind model) or a program of yours."""

    agent_id: Identifier
    kind: Literal["model", "program"] = "model"
    program: ProgramSpec | None = None
    """The command run when kind is program; the model fields name the upstream model."""
    system_prompt: str | None = None
    limits: Limits | None = None
    """Overrides the campaign's limits for this agent."""

    @model_validator(mode="after")
    def _program_iff_kind(self) -> AgentSpec:
        if (self.kind == "program") != (self.program is not None):
            raise ValueError("an agent has a program exactly when its kind is program")
        return self


class JudgeSpec(ModelSpec):
    """An LLM judge on the jury."""

    judge_id: Identifier
    sampling_times: int = Field(default=1, ge=1, le=20)
    max_repairs: int = Field(default=2, ge=0, le=10)
    """Repair prompts after an invalid verdict before JudgmentFailed."""
    max_steps: int = Field(default=12, ge=1)
    """Tool-using turns before the verdict is demanded."""


class SandboxSpec(Frozen):
    """The sandbox every run of a campaign gets, identical across backends."""

    backend: Literal["bubblewrap", "docker"] = "bubblewrap"
    image: str = "assay-sandbox:latest"
    cpu_seconds: int = Field(default=600, ge=1)
    """CPU time per process (RLIMIT_CPU)."""
    cpus: float = Field(default=1.0, gt=0)
    """CPU share (Docker nano_cpus); bubblewrap has no cgroup and ignores it."""
    memory_mb: int = Field(default=2048, ge=64)
    max_processes: int = Field(default=256, ge=8)
    file_size_mb: int = Field(default=512, ge=1)
    disk_mb: int = Field(default=1024, ge=16)
    exec_timeout_s: float = Field(default=120.0, gt=0)
    output_cap_bytes: int = Field(default=1_000_000, ge=1024)
    max_artifact_bytes: int = Field(default=200_000_000, ge=0)
    max_artifact_files: int = Field(default=2_000, ge=0)
    gateway_dir: str | None = None
    """Host folder holding the run's model gateway socket, bound read-only at GATEWAY_MOUNT
    (set by the runner for program agents; both services share the host)."""
    packages: list[PipRequirement] = Field(default_factory=list)
    """A runtime extension's pip requirements, on PYTHONPATH at /opt/assay-ext (copied by
    the runner from a program agent's spec)."""
    bundle_sha256: Sha256 | None = None
    """A program agent's stored bundle, unpacked read-only at /opt/agent (copied by the
    runner from the program's spec)."""


class CampaignSpec(Frozen):
    """Everything a campaign fixes up front: who runs, who judges, on what rubric."""

    campaign_id: Identifier
    name: str = ""
    agents: list[AgentSpec] = Field(min_length=1)
    judges: list[JudgeSpec] = Field(default_factory=list)
    rubric: Rubric = Field(default_factory=default_rubric)
    epochs: int = Field(default=1, ge=1, le=100)
    limits: Limits = Field(default_factory=Limits)
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    prices: dict[str, Price] = Field(default_factory=dict)
    """Price overrides per model name; falls back to the configured table."""
    scripted: bool = False
    """True when agents and judges are scripted stand-ins, not real models."""
    web: WebSpec = Field(default_factory=WebSpec)
    """How the agents' web tools reach the web (default: off)."""
    controls: ControlsSpec | None = None
    """Control runs judged blind beside the real ones, from tasks' reference folders."""
    stopping: StoppingSpec | None = None
    """Stop before every task has run once the answer is settled (default: run them all)."""
    cache: CacheSpec | None = None
    """Answer repeated model requests from the local development cache (default: off)."""

    @model_validator(mode="after")
    def _unique_ids(self) -> CampaignSpec:
        for kind, ids in (
            ("agent", [a.agent_id for a in self.agents]),
            ("judge", [j.judge_id for j in self.judges]),
        ):
            dupes = {i for i in ids if ids.count(i) > 1}
            if dupes:
                raise ValueError(
                    f"campaign {self.campaign_id}: duplicate {kind} ids {sorted(dupes)}"
                )
        if any(j.judge_id == RULES_JUDGE_ID for j in self.judges):
            raise ValueError(
                f"judge id {RULES_JUDGE_ID!r} is reserved for the deterministic rule judge"
            )
        return self

    @model_validator(mode="after")
    def _stopping_agents(self) -> CampaignSpec:
        if self.stopping and self.stopping.when == "ranking_settled" and len(self.agents) < 2:
            raise ValueError(
                f"campaign {self.campaign_id}: stopping: ranking_settled needs two agents"
            )
        return self

    def agent(self, agent_id: str) -> AgentSpec:
        """Return the agent with this id."""
        for agent in self.agents:
            if agent.agent_id == agent_id:
                return agent
        raise KeyError(f"campaign {self.campaign_id} has no agent {agent_id!r}")
