#!/usr/bin/env python3
"""A tiny research agent of your own: standard library only, any OpenAI-compatible server.

Assay runs it in the sandbox with OPENAI_BASE_URL pointing at the run's model gateway
(every call is logged and limited there; the real key never enters the sandbox), the task
prompt in $ASSAY_PROMPT_FILE and the task's files in /workspace. It gives the model two
tools, `bash` and `submit`, and writes the submitted answer to $ASSAY_ANSWER_FILE (or
prints it). Run it yourself against any server: OPENAI_BASE_URL=... python3 tiny_agent.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"}},
                "required": [arg],
            },
        },
    }
    for name, arg, description in (
        ("bash", "command", "Run a shell command in /workspace; returns its output."),
        ("submit", "answer", "Finish with your final answer."),
    )
]


def chat(messages: list[dict[str, object]]) -> dict[str, object]:
    """One chat completion through the gateway."""
    body = json.dumps(
        {"model": os.environ.get("ASSAY_MODEL", "any"), "messages": messages, "tools": TOOLS}
    ).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=body,
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return dict(json.load(response)["choices"][0]["message"])
    except urllib.error.HTTPError as e:
        sys.exit(f"model call refused: HTTP {e.code}: {e.read().decode(errors='replace')}")


def bash(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"[-8000:]


def main() -> None:
    with open(os.environ.get("ASSAY_PROMPT_FILE", "/dev/stdin")) as f:
        prompt = f.read()
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful research agent. Use bash, then submit."},
        {"role": "user", "content": prompt},
    ]
    for _ in range(int(os.environ.get("TINY_AGENT_TURNS", "20"))):
        message = chat(messages)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            return finish(str(message.get("content") or ""))
        for call in calls:  # type: ignore[attr-defined]
            name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
            if name == "submit":
                return finish(args["answer"])
            output = bash(args["command"]) if name == "bash" else f"unknown tool {name}"
            print(f"$ {args.get('command', '')}\n{output}", flush=True)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    sys.exit("out of turns")


def finish(answer: str) -> None:
    path = os.environ.get("ASSAY_ANSWER_FILE")
    if path:
        with open(path, "w") as f:
            f.write(answer)
    else:
        print(answer)


if __name__ == "__main__":
    main()
