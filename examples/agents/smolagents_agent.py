#!/usr/bin/env python3
"""A third-party agent framework as a program agent: smolagents' CodeAgent.

Assay installs smolagents into the sandbox runtime (the agent's `packages`), points
OPENAI_BASE_URL at the run's model gateway and leaves the task's prompt in
$ASSAY_PROMPT_FILE; the agent writes its final answer to $ASSAY_ANSWER_FILE. Its Python
steps run in smolagents' own interpreter inside the sandbox, with the task's files in the
working directory (/workspace).
"""

from __future__ import annotations

import os
from pathlib import Path

from smolagents import CodeAgent, OpenAIServerModel, tool


@tool
def read_file(path: str) -> str:
    """Read one of the task's text files.

    Args:
        path: The file's path, relative to the task's folder.
    """
    return Path(path).read_text()


def main() -> None:
    """Run CodeAgent once on the task's prompt."""
    model = OpenAIServerModel(
        model_id=os.environ.get("ASSAY_MODEL", "any"),
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
    )
    agent = CodeAgent(
        tools=[read_file],
        model=model,
        max_steps=int(os.environ.get("SMOL_MAX_STEPS", "6")),
        additional_authorized_imports=["csv", "io", "statistics"],
    )
    answer = str(agent.run(Path(os.environ["ASSAY_PROMPT_FILE"]).read_text()))
    target = os.environ.get("ASSAY_ANSWER_FILE")
    if target:
        Path(target).write_text(answer + "\n")
    else:
        print(answer)


if __name__ == "__main__":
    main()
