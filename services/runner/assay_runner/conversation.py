"""The agent's conversation: built at the start, rebuilt from logged steps after a crash."""

from __future__ import annotations

from collections.abc import Sequence

from assay.providers import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from assay_schemas import AgentStepLogged, RunRequested

__all__ = ["DEFAULT_SYSTEM_PROMPT", "initial_messages", "rebuild", "step_messages"]

DEFAULT_SYSTEM_PROMPT = """You are a research assistant working for a scientist.
You work in a sandbox: a Linux machine with no network, where /workspace holds the
scientist's files and is where you leave everything you produce. Python 3 with numpy,
pandas, scipy, statsmodels, scikit-learn, matplotlib, openpyxl and python-docx is installed.
Use the tools to inspect the data, run your analysis for real, and save results, figures
and scripts under /workspace. Report only what your files and outputs support, with
uncertainty where it applies. When done, call `submit` once with your final answer."""


def initial_messages(request: RunRequested) -> list[Message]:
    """System prompt and the scientist's request, with the attachments listed."""
    task = request.task
    files = (
        "\n".join(f"- /workspace/{a.path} ({a.size} bytes)" for a in task.attachments)
        or "(no files attached)"
    )
    user = f"Task id: {task.task_id}\n\n{task.prompt}\n\nAttached files:\n{files}"
    if task.constraints:
        user += "\n\nConstraints:\n" + "\n".join(f"- {c}" for c in task.constraints)
    return [
        SystemMessage(text=request.agent.system_prompt or DEFAULT_SYSTEM_PROMPT),
        UserMessage(content=user),
    ]


def rebuild(request: RunRequested, steps: Sequence[AgentStepLogged]) -> list[Message]:
    """The conversation as it stood after the logged steps (in step order)."""
    messages = initial_messages(request)
    for step in sorted(steps, key=lambda s: s.step):
        messages.extend(step_messages(step))
    return messages


def step_messages(step: AgentStepLogged) -> list[Message]:
    """What one logged step adds to the conversation: the model's turn, then its results."""
    calls = tuple(
        ToolCall(id=c.call_id, name=c.name, arguments=c.arguments) for c in step.tool_calls
    )
    messages: list[Message] = [AssistantMessage(text=step.model_output or None, tool_calls=calls)]
    messages.extend(
        ToolResultMessage(call_id=r.call_id, content=r.output, is_error=r.is_error)
        for r in step.tool_results
    )
    return messages
