"""The OpenAI provider posts its body as built, skipping the SDK's per-call transform."""

from __future__ import annotations

import base64
import json
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
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

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


BODIES: list[dict[str, Any]] = [
    {
        "id": "r1",
        "model": "served",
        "choices": [
            {
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                        },
                        {"id": "c2", "type": "custom", "custom": {"name": "x", "input": ""}},
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 7,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    },
    {
        "id": "r2",
        "choices": [{"finish_reason": "length", "message": {"content": "cut"}}],
    },
    {
        "id": "r3",
        "model": "",
        "choices": [
            {"finish_reason": None, "message": {"content": "hi"}},
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "prompt_tokens_details": None},
    },
]


def test_the_lean_parse_reads_what_the_sdk_models_read() -> None:
    """The raw body, read without the SDK's models, normalizes as the SDK's object does."""
    from openai.types.chat import ChatCompletion

    from assay.providers._openai_wire import completion_from_openai, completion_from_openai_json

    for body in BODIES:
        sdk = completion_from_openai(ChatCompletion.construct(**body), provider="openai", model="m")
        lean = completion_from_openai_json(json.dumps(body).encode(), provider="openai", model="m")
        assert lean == sdk


def test_the_lean_parse_refuses_malformed_bodies() -> None:
    """Missing fields and wrong types raise what the provider maps to 'malformed'."""
    import pytest

    from assay.providers._openai_wire import completion_from_openai_json

    bad = [
        b"not json",
        b"[]",
        b"{}",
        b'{"id": "x", "choices": []}',
        b'{"choices": [{"message": {"content": "a"}}]}',
        b'{"id": 3, "choices": [{"message": {"content": "a"}}]}',
        b'{"id": "x", "choices": [{"message": {"content": ["a"]}}]}',
        b'{"id": "x", "choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]}',
        b'{"id": "x", "choices": [{"message": {}}], "usage": {"prompt_tokens": "many"}}',
    ]
    for body in bad:
        with pytest.raises((ValueError, KeyError, TypeError, AttributeError, IndexError)):
            completion_from_openai_json(body, provider="openai", model="m")
