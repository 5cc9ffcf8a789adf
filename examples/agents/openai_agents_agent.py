#!/usr/bin/env python3
"""A second third-party framework as a program agent: the OpenAI Agents SDK, on its
chat-completions model, streamed.

Assay installs openai-agents into the sandbox runtime (the agent's `packages`) and points
OPENAI_BASE_URL at the run's model gateway, which serves streamed calls too; the task's
prompt is in $ASSAY_PROMPT_FILE and its files in the working directory (/workspace).
The final output goes to $ASSAY_ANSWER_FILE (or stdout).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI


@function_tool
def read_file(path: str) -> str:
    """Read one of the task's text files.

    Args:
        path: The file's path, relative to the task's folder.
    """
    return Path(path).read_text()


async def main() -> None:
    """Run one agent on the task's prompt, streaming every model call."""
    set_tracing_disabled(True)  # its traces would go to api.openai.com: no network here
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"])
    agent = Agent(
        name="researcher",
        instructions="Answer the research question from the task's files.",
        model=OpenAIChatCompletionsModel(
            model=os.environ.get("ASSAY_MODEL", "any"), openai_client=client
        ),
        tools=[read_file],
    )
    result = Runner.run_streamed(agent, Path(os.environ["ASSAY_PROMPT_FILE"]).read_text())
    deltas = 0
    async for event in result.stream_events():
        deltas += event.type == "raw_response_event"
    print(f"{deltas} streamed model events", file=sys.stderr)
    answer = str(result.final_output)
    target = os.environ.get("ASSAY_ANSWER_FILE")
    if target:
        Path(target).write_text(answer + "\n")
    else:
        print(answer)


if __name__ == "__main__":
    asyncio.run(main())
