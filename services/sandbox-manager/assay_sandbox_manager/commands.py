"""Sandbox commands (the exec RPC): each command carried out on its backend, as a reply."""

from __future__ import annotations

from assay_schemas import (
    ClaimDrive,
    ExecCommand,
    ExecOutcome,
    ListedFile,
    PythonOutcome,
    ReadFile,
    RunPython,
    SandboxCommand,
    SandboxReply,
    WriteFile,
    b64,
    unb64,
)

from .backends import ExecResult, SandboxBackend

__all__ = ["error_reply", "run_command"]


def run_command(backend: SandboxBackend, command: SandboxCommand) -> SandboxReply:
    """Carry out one sandbox command on its backend (blocking: run it on a worker thread)."""
    sid = command.sandbox_id
    if isinstance(command, RunPython):
        p = backend.python(
            sid,
            command.code,
            timeout_s=command.timeout_s,
            reset=command.reset,
            kernel_id=command.kernel_id,
        )
        return SandboxReply(
            ok=True,
            python=PythonOutcome(
                **_outcome(p).model_dump(),
                kernel_id=p.kernel_id,
                restarted=p.restarted,
                figures=p.figures,
            ),
        )
    if isinstance(command, ExecCommand):
        r = backend.exec(
            sid,
            command.command,
            timeout_s=command.timeout_s,
            stdin=unb64(command.stdin_b64) if command.stdin_b64 else None,
            env=command.env or None,
            cwd=command.cwd,
        )
        return SandboxReply(ok=True, exec=_outcome(r))
    if isinstance(command, ReadFile):
        return SandboxReply(ok=True, data_b64=b64(backend.read_file(sid, command.path)))
    if isinstance(command, WriteFile):
        backend.write_file(sid, command.path, unb64(command.data_b64))
        return SandboxReply(ok=True)
    if isinstance(command, ClaimDrive):  # the exec server's to answer, never a backend's
        raise TypeError(f"sandbox {sid}: a drive claim is not a backend command")
    entries = backend.list_files(sid)
    return SandboxReply(
        ok=True,
        files=[
            ListedFile(
                path=e.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
                kind=e.kind,
                size=e.size,
            )
            for e in entries
        ],
    )


def _outcome(r: ExecResult) -> ExecOutcome:
    return ExecOutcome(
        exit_code=r.exit_code,
        stdout_b64=b64(r.stdout),
        stderr_b64=b64(r.stderr),
        timed_out=r.timed_out,
        truncated=r.stdout_truncated or r.stderr_truncated,
        limit=r.limit,
        duration_ms=r.duration_ms,
    )


def error_reply(kind: str, message: str) -> bytes:
    """A failed command's reply, encoded."""
    reply = SandboxReply.model_validate({"ok": False, "error_kind": kind, "error": message})
    return reply.model_dump_json().encode()
