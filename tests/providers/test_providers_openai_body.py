"""The OpenAI provider posts its body as built, skipping the SDK's per-call transform."""

from __future__ import annotations

import base64
from typing import Any

from openai._utils import maybe_transform
from openai.types.chat import completion_create_params

from assay.providers import (
    AssistantMessage,
    GenerationParams,
    ImagePart,
    Message,
    ProviderKind,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from assay.providers._openai import OpenAIProvider
from assay_cli.scripted import ScriptedModelServer, ScriptedSequence

from .conftest import MakeProvider

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
TOOL = ToolDefinition(
    name="bash",
    description="Run a command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
MESSAGES: list[Message] = [
    SystemMessage(text="sys"),
    UserMessage(content=(TextPart(text="look"), ImagePart.from_bytes(PNG, "image/png"))),
    AssistantMessage(text="ok", tool_calls=(ToolCall(id="c1", name="bash", arguments="{}"),)),
    ToolResultMessage(
        call_id="c1", content=(TextPart(text="out"), ImagePart.from_bytes(PNG, "image/png"))
    ),
]
PARAMS = GenerationParams(
    max_tokens=9,
    temperature=0.5,
    top_p=0.9,
    stop=("END",),
    seed=3,
    tool_choice="required",
    extra_body={"reasoning_effort": "low"},
)


def test_the_sdk_transform_would_leave_every_body_field_unchanged() -> None:
    """What `chat.completions.create` would do to the body is a no-op on what we build."""
    provider = OpenAIProvider(model="m", api_key="k", base_url="http://127.0.0.1:9/v1")
    request: dict[str, Any] = provider._build(MESSAGES, [TOOL], PARAMS)
    body = {k: v for k, v in request.items() if k != "extra_body"}
    schema = completion_create_params.CompletionCreateParamsNonStreaming
    assert maybe_transform(body, schema) == body


async def test_extra_body_and_sampling_fields_reach_the_server(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    await make().complete(MESSAGES, [TOOL], PARAMS)
    body = server.requests(model)[-1].body
    assert body.get("reasoning_effort") == "low"
    assert body["temperature"] == 0.5 and body["top_p"] == 0.9
    if kind == "openai":
        assert body["seed"] == 3 and body["max_completion_tokens"] == 9
