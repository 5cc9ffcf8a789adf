"""Control runs: runs whose right verdict is known, judged blind beside the real ones.

A campaign's ``controls:`` asks for them; for every task with a reference folder the
submitter derives a known-good control (the reference itself) and known-bad variants,
stores each as a :class:`ControlPlan` blob and publishes one :class:`ControlDeclared`
(what the control is, the verdict it deserves, the agent it looks like and where it
goes among the task's runs) before the task, sealed under the deployment's controls
secret. The runner requests the control's run itself, interleaved with the agents' runs
and looking like one of them (no plan, no kind of its own); the status of a control lives
only in the sealed declaration, which the runner and the aggregator open and nobody
else (judges, reviewers) can read.
"""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._envelope import Event
from ._ids import Identifier

__all__ = [
    "CONTROL_CHUNK_BYTES",
    "CONTROL_MESSAGE_CHARS",
    "DERIVED_VARIANTS",
    "KNOWN_GOOD",
    "SEALED_CHARS",
    "ControlAction",
    "ControlDeclared",
    "ControlDetails",
    "ControlFile",
    "ControlPlan",
    "ControlVariant",
    "ControlsSpec",
    "Expectation",
]

KNOWN_GOOD = "reference"
"""The variant of the known-good control: the reference answer itself."""
DERIVED_VARIANTS = ("altered_numbers", "files_removed", "not_executed", "prose_only")
"""Known-bad variants Assay derives from a reference: reported results altered beyond the
task's tolerances yet plausible, method constants kept (files kept), claimed files removed, outputs removed but code and message
kept, the message alone."""
CONTROL_MESSAGE_CHARS = 50_000
"""Most characters of a control's final message."""
CONTROL_CHUNK_BYTES = 60_000
"""Bytes of a binary file written per step (base64 in one shell argument stays far under
Linux's 128 KiB limit on one argument)."""

ControlVariant = Literal[
    "reference", "altered_numbers", "files_removed", "not_executed", "prose_only"
]
Expectation = Literal["pass", "fail"]
_Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
_Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]


def _every_variant() -> list[ControlVariant]:
    return ["reference", "altered_numbers", "files_removed", "not_executed", "prose_only"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ControlsSpec(_Frozen):
    """A campaign's ``controls:``: which control runs to make from tasks' references."""

    variants: list[ControlVariant] = Field(default_factory=lambda: _every_variant(), min_length=1)
    """The variants to run (default: every one); author folders always run."""
    epochs: int = Field(default=1, ge=1, le=20)
    """Runs of each control (more runs: tighter error rates of sampled judges)."""
    references: str | None = Field(default=None, max_length=4096)
    """A folder of ``<task_id>/`` reference folders (relative to the campaign file), for
    tasks whose own folder has no ``reference/``."""
    like_agents: bool = True
    """Each control plays, of its task's plans, a kind of work its look-alike does: the
    runner chooses at the control's first step, in proportion to how often the agent it
    wears did each kind of work on tasks like it so far (issue #47: a control wearing a
    model that never writes files, writing the reference's, is told by the pair). False:
    each plays the variant declared for it, so a campaign's report does not depend on
    the order its runs ran in."""
    agents: int = Field(default=0, ge=0, le=1024)
    """How many of the published roster's agents are control agents (the submitter lists
    them there like agents; 0 in a campaign file): all a reader without the controls
    secret knows of them, which is enough to count the runs a task asks for."""


class ControlFile(_Frozen):
    """One file a control leaves in the workspace."""

    path: str = Field(min_length=1, max_length=512)
    sha256: _Sha256
    size: int = Field(ge=0)
    text: bool
    """UTF-8 text without NUL (written whole with write_file); else bytes, in chunks."""


class ControlAction(NamedTuple):
    """One step of a control: write ``size`` bytes of the plan's file ``file`` (its index)
    from ``offset``."""

    file: int
    offset: int
    size: int


class ControlPlan(_Frozen):
    """What a control agent does (stored as a blob), the way an agent works: write the
    ``code``, run the ``commands`` in the sandbox (the last one also removes ``absent``
    and lists the outputs), write the ``files`` they do not leave as planned (those not
    in ``made``; all of them when nothing runs), then answer. How many steps that takes
    is the runner's choice."""

    files: list[ControlFile] = Field(default_factory=list, max_length=256)
    """The outputs the answer leaves: made by the commands, or written when they are not."""
    message: str = Field(max_length=CONTROL_MESSAGE_CHARS)
    code: list[ControlFile] = Field(default_factory=list, max_length=64)
    """Text files written first, each in one step (the analysis' scripts)."""
    commands: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=16
    )
    """Shell commands run, one step each, after the code is written."""
    absent: list[Annotated[str, Field(min_length=1, max_length=512)]] = Field(
        default_factory=list, max_length=256
    )
    """Paths removed after the commands (outputs the answer claims but must not leave)."""
    made: list[Annotated[str, Field(min_length=1, max_length=512)]] = Field(
        default_factory=list, max_length=256
    )
    """Paths of ``files`` the commands leave as planned, known when the plan is made (the
    reference's run made them so): not written again. The control does not check them
    after its run (an agent never hashes its outputs: a check would tell it apart)."""
    step_ms: float = Field(default=0.0, ge=0.0, le=600_000.0)
    """A step's median think time (an agent's model takes time to answer)."""

    @model_validator(mode="after")
    def _code_is_text(self) -> ControlPlan:
        if not all(f.text for f in self.code):
            raise ValueError("a control's code is text, written with write_file")
        if self.made and not self.commands:
            raise ValueError("a control that runs no command makes no file")
        if not set(self.made) <= {f.path for f in self.files}:
            raise ValueError("a control's made files are among its files")
        return self

    def max_steps(self) -> int:
        """The most steps the plan takes one call a step: a look at the workspace, the
        code, the commands (the last one also removes and lists), the outputs not made
        and the answer (a control copying a slower agent may take up to its run's
        limit)."""
        return 1 + len(self.code) + len(self.commands) + len(self.actions()) + 1

    def actions(self) -> list[ControlAction]:
        """The plan's writes before its answer: one per text file, one per chunk of
        bytes, of the files the commands do not make (`made`)."""
        out = []
        made = set(self.made)
        for i, f in enumerate(self.files):
            if f.path in made:
                continue
            if f.text or f.size == 0:
                out.append(ControlAction(i, 0, f.size))
                continue
            for offset in range(0, f.size, CONTROL_CHUNK_BYTES):
                out.append(ControlAction(i, offset, min(CONTROL_CHUNK_BYTES, f.size - offset)))
        return out


SEALED_CHARS = 8192
"""Most characters of a declaration's sealed payload (base64url; a padded payload is
about 1.4 KiB)."""


class ControlDetails(_Frozen):
    """What a declaration says about its control, sealed inside :class:`ControlDeclared`:
    every field that ties it to a run. Only a holder of the deployment's controls secret
    reads it (`assay.security.controls.open_control`)."""

    campaign_id: Identifier
    """The declaration's campaign (checked against its envelope when opened)."""
    task_id: Identifier
    """The declaration's task (checked against its envelope when opened)."""
    control_run_id: Identifier
    """The control's run."""
    variant: ControlVariant | None = None
    """The derived variant, or None for an author's known-bad folder (see ``folder``)."""
    folder: _Name | None = None
    """The author's known-bad folder under the task's ``controls/`` (None when derived)."""
    expected: Expectation
    """'pass' for the known-good control, 'fail' for every known-bad one."""
    plan_sha256: _Sha256
    """The stored :class:`ControlPlan` the run carries out."""
    agent_id: Identifier
    """The control agent's id (salted, so nobody without the deployment's secret can
    recompute it)."""
    like: Identifier | None = None
    """The campaign's agent whose model, provider, family, prompt and limits the
    control's request wears (None: a campaign without a model agent)."""
    epoch: int = Field(default=0, ge=0)
    slot: int = Field(default=0, ge=0)
    """Where its request goes among the task's run requests (0: first), drawn by the
    campaign's secret salt; the runner places it there."""
    max_steps: int = Field(default=1, ge=1)
    """The plan's most steps, its answer included (the runner lets it take them)."""
    chooses: bool = False
    """The runner chooses at the run's first step which of its task's declared plans it
    plays (``ControlsSpec.like_agents``) and seals the choice into that step
    (``AgentStepLogged.sealed_choice``); False: it plays this declaration's plan."""

    @model_validator(mode="after")
    def _consistent(self) -> ControlDetails:
        if (self.variant is None) == (self.folder is None):
            raise ValueError("a control is a derived variant or an author's folder, not both")
        if (self.variant == KNOWN_GOOD) != (self.expected == "pass"):
            raise ValueError("only the reference control is expected to pass")
        return self

    @property
    def kind(self) -> str:
        """The variant's name in the statistics (an author folder: ``author:<name>``)."""
        return self.variant or f"author:{self.folder}"


class ControlDeclared(Event):
    """The campaign declared a control for a task; which run, and what it is, are sealed.

    Every service may replay the log, judges included, so everything that ties the
    declaration to a run (:class:`ControlDetails`) travels encrypted under a key derived
    from the deployment's controls secret, and the event id is keyed by it too
    (`assay.security.controls`). A reader without the secret learns only that the
    campaign declared a control for the task; the runner and the aggregator open it. It
    names no run in the envelope, so it is on no subject of a run."""

    event_type: Literal["ControlDeclared"] = "ControlDeclared"
    schema_version: int = 2
    written_by = ("cli",)
    sealed: str = Field(min_length=1, max_length=SEALED_CHARS, pattern=r"^[A-Za-z0-9_-]+=*$")
    """:class:`ControlDetails` as JSON, padded to a fixed size and sealed (AES-GCM, its
    envelope's campaign, task and event id as associated data), base64url."""

    @model_validator(mode="after")
    def _no_run(self) -> ControlDeclared:
        if self.run_id is not None:
            raise ValueError("a ControlDeclared names no run in its envelope")
        if self.task_id is None:
            raise ValueError("a ControlDeclared names its task")
        return self
