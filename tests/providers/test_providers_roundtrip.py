"""Conversations round-trip through the real SDKs and the scripted server, on both APIs."""

from __future__ import annotations

import base64

import pytest

from assay.providers import (
    AssistantMessage,
    Completion,
    GenerationParams,
    ImagePart,
    Message,
    ProviderKind,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
    messages_from_json,
    messages_to_json,
)
from assay_testing.scripted import (
    ScriptedModelServer,
    ScriptedSequence,
    ScriptedToolCall,
    ScriptReply,
    ScriptRequest,
)

from .conftest import MakeProvider

READ_FILE = ToolDefinition(
    name="read_file",
    description="Read a file from the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
# A 1x1 PNG: small, but a real image payload.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _count_rows(request: ScriptRequest) -> ScriptReply:
    rows = request.tool_results[0].text.strip().count("\n")
    return ScriptReply(
        text=f"The file has {rows} data rows.", usage=Usage(input_tokens=150, output_tokens=9)
    )


async def test_tool_calling_conversation_round_trips(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.add_script(
        model,
        ScriptedSequence(
            [
                ScriptReply(
                    text="Let me read the data.",
                    tool_calls=(
                        ScriptedToolCall(name="read_file", arguments={"path": "data.csv"}),
                    ),
                    usage=Usage(input_tokens=100, output_tokens=20, cached_tokens=40),
                ),
                _count_rows,
            ]
        ),
    )
    provider = make()
    messages: list[Message] = [
        SystemMessage(text="You are a careful analyst."),
        UserMessage(content="How many rows does data.csv have?"),
    ]

    first = await provider.complete(messages, [READ_FILE])
    assert first.stop_reason == "tool_use"
    assert first.text == "Let me read the data."
    assert [(c.name, c.parsed_arguments()) for c in first.tool_calls] == [
        ("read_file", {"path": "data.csv"})
    ]
    # Anthropic reports cache reads apart from input; normalized input includes them.
    assert first.usage == Usage(input_tokens=100, output_tokens=20, cached_tokens=40)
    assert first.provider == kind and first.model == model and first.attempts == 1
    assert first.response_id and first.latency_ms > 0

    messages += [
        first.to_message(),
        ToolResultMessage(call_id=first.tool_calls[0].id, content="a,b\n1,2\n3,4\n"),
    ]
    second = await provider.complete(messages, [READ_FILE])
    assert second.text == "The file has 2 data rows."
    assert second.stop_reason == "end_turn" and second.tool_calls == ()
    assert second.usage == Usage(input_tokens=150, output_tokens=9)

    # The server rebuilt exactly our conversation from the wire: mapping works both ways.
    last = server.requests(model)[-1]
    assert last.request is not None
    assert last.request.turn == 1
    assert list(last.request.messages) == messages
    assert [t.name for t in last.request.tools] == ["read_file"]


async def test_wire_format_follows_each_api(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    messages: list[Message] = [
        SystemMessage(text="sys"),
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="f", arguments='{"x": 1}'),)),
        ToolResultMessage(call_id="c1", content="result", is_error=True),
    ]
    params = GenerationParams(
        max_tokens=77, temperature=0.25, stop=("END",), tool_choice="required"
    )
    await make().complete(messages, [READ_FILE], params)

    body = server.requests(model)[-1].body
    assert body["temperature"] == 0.25
    if kind == "openai":
        assert body["messages"][0] == {"role": "system", "content": "sys"}
        assert body["messages"][2]["tool_calls"][0]["function"] == {
            "name": "f",
            "arguments": '{"x": 1}',
        }
        assert body["messages"][3]["role"] == "tool" and body["messages"][3]["tool_call_id"] == "c1"
        assert body["max_completion_tokens"] == 77 and body["stop"] == ["END"]
        assert body["tool_choice"] == "required"
        assert body["tools"][0]["function"]["name"] == "read_file"
    else:
        assert body["system"] == "sys"
        assert all(m["role"] != "system" for m in body["messages"])
        assert body["messages"][1]["content"][0] == {
            "type": "tool_use",
            "id": "c1",
            "name": "f",
            "input": {"x": 1},
        }
        result = body["messages"][2]["content"][0]
        assert (
            result["type"] == "tool_result" and result["tool_use_id"] == "c1" and result["is_error"]
        )
        assert body["max_tokens"] == 77 and body["stop_sequences"] == ["END"]
        assert body["tool_choice"] == {"type": "any"}
        assert body["tools"][0]["input_schema"] == READ_FILE.parameters


async def test_images_reach_the_server_in_each_apis_format(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    seen: list[ScriptRequest] = []

    def look(request: ScriptRequest) -> ScriptReply:
        seen.append(request)
        return ScriptReply(text="a plot")

    server.add_script(model, look)
    image = ImagePart.from_bytes(PNG, "image/png")
    messages: list[Message] = [
        UserMessage(content=(TextPart(text="What is in this figure?"), image)),
    ]
    await make().complete(messages)

    body = server.requests(model)[-1].body
    encoded = base64.b64encode(PNG).decode()
    part = body["messages"][0]["content"][1]
    if kind == "openai":
        assert part == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{encoded}"},
        }
    else:
        assert part == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": encoded},
        }
    # The script sees the same normalized image, whichever API carried it.
    assert seen[0].messages[0] == messages[0]


async def test_images_in_tool_results_reach_the_server(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.add_script(model, ScriptedSequence(["seen"], repeat_last=True))
    image = ImagePart.from_bytes(PNG, "image/jpeg")
    call = ToolCall(id="v1", name="view_image", arguments='{"path": "fig.jpg"}')
    messages: list[Message] = [
        UserMessage(content="look at fig.jpg"),
        AssistantMessage(tool_calls=(call,)),
        ToolResultMessage(call_id="v1", content=(TextPart(text="fig.jpg"), image)),
    ]
    await make().complete(messages)

    request = server.requests(model)[-1].request
    assert request is not None
    images = [
        p
        for m in request.messages
        if isinstance(m, UserMessage | ToolResultMessage)
        for p in m.content
        if isinstance(p, ImagePart)
    ]
    assert images == [image]
    body = server.requests(model)[-1].body
    if kind == "openai":
        # Tool messages carry text only on this API: the image follows in a user message.
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "user"]
    else:
        assert body["messages"][2]["content"][0]["content"][1]["type"] == "image"


async def test_stop_reasons_are_normalized(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.add_script(
        model, ScriptedSequence([ScriptReply(text="trunc", stop_reason="max_tokens")])
    )
    done = await make().complete([UserMessage(content="write a novel")])
    assert done.stop_reason == "max_tokens"


async def test_conversation_and_completion_survive_json(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.add_script(model, ScriptedSequence([ScriptReply.call("read_file", {"path": "x"})]))
    messages: list[Message] = [
        SystemMessage(text="s"),
        UserMessage(content=(TextPart(text="hi"), ImagePart.from_bytes(PNG, "image/png"))),
    ]
    done = await make().complete(messages, [READ_FILE])
    logged = messages_to_json([*messages, done.to_message()])
    assert messages_from_json(logged) == [*messages, done.to_message()]
    assert Completion.model_validate_json(done.model_dump_json()) == done


@pytest.mark.parametrize("bad", ["not base64!", "aGVsbG8"])
def test_image_parts_validate_base64(bad: str) -> None:
    with pytest.raises(ValueError, match="base64"):
        ImagePart(media_type="image/png", data=bad)
