"""Untrusted text as delimited data: artifacts and the agent's words never read as instructions.

Everything a judge sees that the agent produced (file contents, the final message) is
wrapped in a tag the system prompt names as data. A file cannot close the tag early or
open a fake one: any `<artifact`, `</artifact`, `<final_message` or `</final_message`
inside the content is escaped to `&lt;...`, so the only real delimiters are ours.
"""

from __future__ import annotations

import re

__all__ = [
    "ARTIFACT_TAG",
    "FINAL_TAG",
    "artifact_block",
    "escape_delimiters",
    "final_message_block",
]

ARTIFACT_TAG = "artifact"
FINAL_TAG = "final_message"

_DELIMITER = re.compile(r"<(\s*/?\s*)(artifact|final_message)", re.IGNORECASE)


def escape_delimiters(text: str) -> str:
    """Escape anything inside `text` that could pass for one of our delimiters."""
    return _DELIMITER.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)


def _attr(value: str) -> str:
    # Paths are chosen by the agent too: keep them from breaking out of the attribute.
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def artifact_block(path: str, sha256: str, body: str, **attrs: str | int) -> str:
    """`<artifact path=... sha256=...>body</artifact>` with the body's delimiters escaped."""
    extra = "".join(f' {k}="{_attr(str(v))}"' for k, v in attrs.items())
    head = f'<{ARTIFACT_TAG} path="{_attr(path)}" sha256="{sha256}"{extra}>'
    return f"{head}\n{escape_delimiters(body)}\n</{ARTIFACT_TAG}>"


def final_message_block(text: str) -> str:
    """The agent's final message as delimited data."""
    return f"<{FINAL_TAG}>\n{escape_delimiters(text)}\n</{FINAL_TAG}>"
