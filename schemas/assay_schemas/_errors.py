"""The exception tree shared by every Assay service: every exception Assay raises on
purpose is in it (the classes outside this package are named with their module).

    AssayError
    ├── InvalidInput            bad user or external input (tasks, campaigns, rubrics)
    │   ├── TaskInputError      a task file or attachment is malformed or hostile
    │   │   └── RuleCheckError          assay_judge.rules.checks: a reference check cannot run
    │   ├── InvalidEvent        a message on an event subject does not parse or validate
    │   │   ├── SealBroken              assay.security.controls: a control declaration does not open
    │   │   └── SignatureRefused    a valid event no enrolled key may have written
    │   ├── StepTooLarge                assay_runner.agent: a model turn over one event's size
    │   ├── PatternError                assay.tasks: a pattern RE2 cannot compile
    │   ├── _Refused                    assay.http11: a request the server will not read
    │   ├── ToolArgumentError           assay_runner.tools: a tool called with bad arguments
    │   ├── ReadError                   assay.sealed: a sealed file cannot be read as asked
    │   └── RequestRefused              assay_viewer.hosts: another host or origin, a bad form
    ├── ConfigError             settings or environment are wrong
    │   └── PortInUse                   assay.embedded: the nats-server's port is taken
    ├── BusError                NATS / JetStream failures (publish not acked, stream missing)
    │   ├── LogChanged          a conditional publish refused: the log moved since it was read
    │   ├── RequestUnanswered   a core-NATS request got no reply in its time
    │   ├── NoResponders        a core-NATS request found nobody serving its subject
    │   ├── NatsUnreachable     nothing answers at the NATS address
    │   ├── NotAuthenticated    the server refused this client's credentials
    │   └── PermissionDenied    the server did not let this user do what it asked
    ├── StoreError              blob store failures
    │   ├── AnswerNotStored             assay_runner.agent: a long final answer not stored
    │   ├── BlobNotFound
    │   ├── BlobCorrupted       stored bytes do not match their sha256
    │   └── UploadRefused       an outside upload not taken (bad metadata, link, oversize)
    ├── SandboxError            sandboxes (subclasses: assay_sandbox_manager.backends)
    │   └── ExtensionBuildFailed        assay_sandbox_manager.extension: pip could not build
    ├── RunFault                ends the run it happens in; `fault`: the platform's or the agent's
    │   ├── ProviderError       model providers (subclasses: assay.providers)
    │   └── ProgramFailed               assay_runner.program: a program run cannot finish
    ├── JudgingError            a judge could not produce a verdict
    │   └── CheckFailed                 assay_judge.rules.worker: a rule check failed
    ├── Superseded              a handler's work taken over by another delivery: stop, settle nothing
    │   └── DriveSuperseded             assay.sandbox_client: a drive's sandbox lease taken over
    ├── DriveHeld                       assay.sandbox_client: another drive holds the sandbox
    ├── ControlsUnopened                assay_runner.scheduler: control agents it cannot tell
    ├── _Refused                        assay_runner.gateway: a model call refused
    ├── UpstreamError                   assay.http11: the upstream broke the exchange
    ├── ScriptExhausted                 assay_testing.scripted: a scripted model has no reply left
    └── OverTime, Died, Closed, Raised  assay_judge.killable: a killable call's ends

Errors name the task, run, field, blob or subject they concern and chain their cause.
nats-py's errors are translated into this tree where they are caught (`assay.bus`), so
callers match a failure by its class and never read its text.

An error that ends the run it happens in also derives from `RunFault`, whose `fault` says
whose failure that is (the platform's is never scored as the agent's): `ProviderError`,
`ProgramFailed`, and beside their own branch `SandboxGone` (assay.sandbox_client),
`AnswerNotStored`, `StepTooLarge` (assay_runner.agent), `WebCacheUnreadable`.
"""

from __future__ import annotations

from string import ascii_uppercase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = [
    "AssayError",
    "BlobCorrupted",
    "BlobNotFound",
    "BusError",
    "ConfigError",
    "ErrorInfo",
    "FailureStage",
    "Fault",
    "InvalidEvent",
    "InvalidInput",
    "JudgingError",
    "LogChanged",
    "NatsUnreachable",
    "NoResponders",
    "NotAuthenticated",
    "PermissionDenied",
    "ProviderError",
    "RequestUnanswered",
    "RunFault",
    "SandboxError",
    "SignatureRefused",
    "StoreError",
    "Superseded",
    "TaskInputError",
    "UploadRefused",
    "describe_validation",
    "with_error_info",
]


class AssayError(Exception):
    """Root of every error Assay raises on purpose."""


class InvalidInput(AssayError, ValueError):
    """Input from outside (files, CLI, other systems) is malformed."""


class TaskInputError(InvalidInput):
    """A task or one of its attachments is malformed or hostile."""


class InvalidEvent(InvalidInput):
    """A message on an event subject is not a valid event."""


class SignatureRefused(InvalidEvent):
    """A valid event whose signature does not tie it to a key enrolled to write it
    (unsigned, forged, or a role that may not write its type): no handler acts on it."""


class ConfigError(AssayError):
    """Settings, environment or a campaign file are wrong."""


class BusError(AssayError):
    """The event bus failed (publish not acknowledged, stream missing, ...)."""


class LogChanged(BusError):
    """A publish made on condition that a subject had not changed since it was read was
    refused: something was logged there meanwhile. Not an outage: read again, decide again."""


class RequestUnanswered(BusError):
    """A request reached a responder but no reply came in its time (the responder is busy,
    stuck or died while answering): what it asked may have been done."""


class NoResponders(BusError):
    """A core-NATS request found nobody subscribed to its subject: the responder is not
    running (or is restarting); nothing of what it asked was done."""


class NatsUnreachable(BusError):
    """Nothing answers at the NATS address: no server runs there, or it is out of reach."""


class NotAuthenticated(BusError):
    """The NATS server refused this client's credentials (Authorization Violation)."""


class PermissionDenied(BusError):
    """The NATS server did not let this user do what it asked (NATS drops what a user's
    permissions refuse, so this is often known only from a request left unanswered)."""


class StoreError(AssayError):
    """The blob store failed."""


class BlobNotFound(StoreError, KeyError):
    """No blob with that sha256."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class BlobCorrupted(StoreError):
    """Stored bytes do not hash to their address."""


class UploadRefused(StoreError):
    """An outside system's upload cannot be taken as the blob it is named for: metadata
    that is no object's, a link, more bytes than the task declares."""


class SandboxError(AssayError):
    """A sandbox failed or refused (the backends' errors derive from it; so does what the
    sandbox client raises for an error reply)."""


class Superseded(AssayError):
    """A handler's work was taken over by another delivery of its message (a fencing
    token at the resource refused it): the handler stops, publishing nothing, and the bus
    settles nothing (no ack: the delivery at work settles the message; no nak: that would
    deliver it once more)."""


Fault = Literal["platform", "agent"]
"""Whose failure a run's end is: the platform's (never scored) or the agent's (scored)."""


class RunFault(AssayError):
    """An error that ends the run it happens in with a `RunFailed`; the class says whose
    failure that is (`fault`) and the flat text the event carries (`flat`)."""

    fault: Fault = "platform"
    """Whose failure a run that ends on this error is (an instance may set its own)."""

    def flat(self) -> str:
        """The flat `error` a `RunFailed` for this error carries (`error_info` is the data)."""
        return str(self)


class ProviderError(RunFault):
    """A model provider failed; names the provider and the model (subclasses: assay.providers).

    A run or judgment that ends on one is the platform's failure (`fault`): the provider
    already retried what can be retried, whatever the request's own `infrastructure` says."""

    infrastructure: bool = False
    """True when the request failed for the platform's sake (endpoint, credentials), False
    when the conversation caused it (a 400 or 422: e.g. a context too long)."""

    def __init__(self, message: str, *, provider: str, model: str) -> None:
        super().__init__(f"{provider} model {model!r}: {message}")
        self.provider = provider
        self.model = model
        self.detail = message
        """The message without the provider/model prefix."""

    def flat(self) -> str:
        """`Class: message`: the class says which way the provider failed."""
        return f"{type(self).__name__}: {self}"


class JudgingError(AssayError):
    """A judge could not produce a verdict (e.g. a rule check failed)."""


FailureStage = Literal["sandbox", "agent", "seal", "judge"]
"""Where a run failed (`RunFailed.stage`)."""


class ErrorInfo(BaseModel):
    """A failure as data, on `RunFailed` and `JudgmentFailed`: read it, never parse `error`.

    Events logged before it existed carry only the flat `error`: they are given one as they
    are read (`with_error_info`), so every failure read has it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    error_class: str | None = None
    """The exception's class name; None when no exception was raised (e.g. no valid verdict)."""
    message: str

    @classmethod
    def of(cls, error: BaseException) -> ErrorInfo:
        """The class and message of an exception."""
        return cls(error_class=type(error).__name__, message=str(error))

    @property
    def text(self) -> str:
        """The flat form events carry in `error`: `Class: message`, or the message alone."""
        return f"{self.error_class}: {self.message}" if self.error_class else self.message

    @classmethod
    def of_flat(cls, error: str) -> ErrorInfo:
        """The info an event logged before `error_info` existed meant by its flat `error`
        (`Class: message`, or the message alone): the one place that text is read."""
        head, colon, message = error.partition(": ")
        if colon and _is_class_name(head):
            return cls(error_class=head, message=message)
        return cls(message=error)


def _is_class_name(text: str) -> bool:
    """A (dotted) class name as old events wrote it: an ASCII capital, then word characters."""
    return text[:1] in ascii_uppercase and all(c.isalnum() or c in "._" for c in text)


def with_error_info(data: Any) -> Any:
    """A failure's payload with its `error_info`, made from its flat `error` when it was
    logged before `error_info` existed (the upgrade on read of `RunFailed`, `JudgmentFailed`)."""
    if isinstance(data, dict) and data.get("error_info") is None:
        error = data.get("error")
        if isinstance(error, str):
            return {**data, "error_info": ErrorInfo.of_flat(error)}
    return data


_MAX_PROBLEMS = 10
"""At most this many problems are named in one description."""


def describe_validation(
    error: ValidationError, *, tag: str | None = None, limit: int = _MAX_PROBLEMS
) -> str:
    """One sentence per problem, each naming the field path: for messages users read.

    ``tag`` is a discriminated union's tag to leave out of the paths (pydantic puts the
    event type first). The input is hostile: at most ``limit`` problems are named, each
    path part and message cut short, and no value sent is echoed back.
    """
    problems = error.errors(include_url=False, include_input=False, include_context=False)
    lines = [f"{_path(err['loc'], tag)}: {_cut(err['msg'], 200)}" for err in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"and {len(problems) - limit} more")
    return "; ".join(lines)


def _path(loc: tuple[int | str, ...], tag: str | None) -> str:
    parts = list(loc[1:] if tag is not None and loc[:1] == (tag,) else loc)
    return ".".join(_cut(str(p), 64) for p in parts) or "(root)"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
