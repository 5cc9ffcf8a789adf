"""The control agent: carries out a stored control plan through the agent's own tools.

No model is called. Turn k writes the plan's k-th file (text with ``write_file``, other
bytes with ``bash`` and base64), the turn after the last file submits the plan's
message. The turn number is read from the conversation, so a resumed run goes on where
its logged steps end, like any model run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from assay.providers import (
    AssistantMessage,
    Completion,
    GenerationParams,
    Message,
    ToolCall,
    ToolDefinition,
)
from assay.store import BlobStore
from assay_schemas import ControlPlan, ProviderError

__all__ = ["ControlProvider", "control_call"]

_HEREDOC = "ASSAY_CONTROL_B64"


def control_call(turn: int, path: str, data: bytes, *, text: bool, append: bool) -> ToolCall:
    """The tool call that writes one file of a plan (or, for bytes, one chunk of it)."""
    if text:
        arguments = {"path": path, "content": data.decode("utf-8")}
        return ToolCall(id=f"call_{turn}", name="write_file", arguments=json.dumps(arguments))
    folder = str(PurePosixPath(path).parent)
    encoded = base64.b64encode(data).decode()
    into = ">>" if append else ">"
    command = (
        f"mkdir -p {shlex.quote(folder)} && base64 -d {into} {shlex.quote(path)} "
        f"<<'{_HEREDOC}'\n{encoded}\n{_HEREDOC}"
    )
    return ToolCall(id=f"call_{turn}", name="bash", arguments=json.dumps({"command": command}))


@dataclass(kw_only=True)
class ControlProvider:
    """A ModelProvider that plays a control plan (see the module docstring)."""

    plan_sha256: str
    store: BlobStore
    _plan: ControlPlan | None = field(default=None, init=False)

    @property
    def kind(self) -> str:
        """The API family: none."""
        return "control"

    @property
    def model(self) -> str:
        """The model name: none."""
        return "control"

    async def _load(self) -> ControlPlan:
        if self._plan is None:
            try:
                data = await asyncio.to_thread(self.store.get_bytes, self.plan_sha256)
                self._plan = ControlPlan.model_validate_json(data)
            except Exception as e:  # a lost or bad plan: the platform's failure, not a verdict
                raise ProviderError(
                    f"control plan {self.plan_sha256[:12]}: {e}",
                    provider="control",
                    model="control",
                ) from e
        return self._plan

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The plan's next tool call."""
        plan = await self._load()
        actions = plan.actions()
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        if turn < len(actions):
            index, offset, size = actions[turn]
            ref = plan.files[index]
            data = await asyncio.to_thread(self.store.get_bytes, ref.sha256)
            call = control_call(
                turn, ref.path, data[offset : offset + size], text=ref.text, append=offset > 0
            )
        else:
            call = ToolCall(
                id=f"call_{turn}", name="submit", arguments=json.dumps({"answer": plan.message})
            )
        return Completion(
            provider="control", model="control", tool_calls=(call,), stop_reason="tool_use"
        )

    async def aclose(self) -> None:
        """Nothing to release."""
