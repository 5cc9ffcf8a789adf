"""Untrusted text as delimited data: artifacts and the agent's words never read as instructions.

Everything a judge sees that the agent produced (file contents, file names, the final
message) is wrapped in a tag the system prompt names as data, or escaped. A file cannot
close the tag early or open a fake one: anything that reads as `<artifact`, `</artifact`,
`<final_message` or `</final_message` has its `<` escaped to `&lt;`, so the only real
delimiters are ours. "Reads as" is decided on folded text (NFKC, zero-width characters
dropped, look-alike letters and brackets mapped to ASCII): `<\\u200b/artifact>`,
`＜/artifact＞` and `‹/аrtifact>` (Cyrillic а) are caught as well as the plain form.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "ARTIFACT_TAG",
    "FINAL_TAG",
    "artifact_block",
    "escape_delimiters",
    "final_message_block",
    "fold",
    "one_line",
    "quote_name",
]

ARTIFACT_TAG = "artifact"
FINAL_TAG = "final_message"

_DELIMITER = re.compile(r"<(\s*/?\s*)(artifact|final_message)", re.IGNORECASE)

_LOOK_ALIKES = str.maketrans(
    {
        # brackets a model may read as `<` or `>`
        "‹": "<", "〈": "<", "⟨": "<", "❮": "<", "❬": "<", "˂": "<", "ᐸ": "<",
        "›": ">", "〉": ">", "⟩": ">", "❯": ">", "❭": ">", "˃": ">", "ᐳ": ">",
        "⁄": "/", "∕": "/", "⧸": "/", "／": "/",
        # Cyrillic and Greek letters that look Latin
        "а": "a", "е": "e", "і": "i", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y",
        "к": "k", "м": "m", "т": "t", "н": "h", "в": "b", "ѕ": "s", "ј": "j", "ӏ": "l",
        "А": "A", "Е": "E", "І": "I", "О": "O", "Р": "P", "С": "C", "Х": "X", "К": "K",
        "М": "M", "Т": "T", "Н": "H", "В": "B", "Ѕ": "S", "Ј": "J",
        "α": "a", "ε": "e", "ι": "i", "ο": "o", "ρ": "p", "τ": "t", "κ": "k", "ν": "v",
        "Α": "A", "Ε": "E", "Ι": "I", "Ο": "O", "Ρ": "P", "Τ": "T", "Κ": "K", "Ν": "N",
    }
)  # fmt: skip


def _fold_char(ch: str) -> str:
    if ch.isascii():
        return ch
    if unicodedata.category(ch) == "Cf":  # zero-width and other invisible format characters
        return ""
    return unicodedata.normalize("NFKC", ch).translate(_LOOK_ALIKES)


_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f]"
)


def fold(text: str) -> str:
    """`text` as it reads: NFKC, invisible characters dropped, look-alikes mapped to ASCII."""
    if text.isascii():
        return text
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).translate(_LOOK_ALIKES)


def escape_delimiters(text: str) -> str:
    """Escape anything inside `text` that could pass for one of our delimiters."""
    if text.isascii():
        return _DELIMITER.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)
    # Fold character by character, remembering where each folded character came from, so
    # the `<` of a disguised delimiter is escaped in the original text.
    folded: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        piece = _fold_char(ch)
        folded.append(piece)
        origin.extend([i] * len(piece))
    starts = {origin[m.start()] for m in _DELIMITER.finditer("".join(folded))}
    return "".join("&lt;" if i in starts else ch for i, ch in enumerate(text))


def _visible(ch: str) -> str:
    if ch.isprintable() and unicodedata.category(ch) != "Cf":
        return ch
    return f"\\u{ord(ch):04x}"


def quote_name(name: str) -> str:
    """A file name as a judge may see it: unchanged when plain; otherwise quoted, with line
    breaks and invisible characters as `\\uXXXX` and `<`, `>`, `&` as entities, so a name
    can neither start a new line of the prompt nor pass for a delimiter."""
    if all(ch not in '<>&"\\' and _visible(ch) == ch for ch in name) and fold(name) == name:
        return name
    out = "".join("\\" + ch if ch in '"\\' else _visible(ch) for ch in name)
    return '"' + escape_delimiters(_entities(out)) + '"'


def one_line(text: str) -> str:
    """Text that may quote agent-chosen names (an error message) on one line, escaped:
    line breaks and invisible characters as `\\uXXXX`, delimiters as `&lt;`."""
    return escape_delimiters("".join(_visible(ch) for ch in text))


def _entities(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(value: str) -> str:
    # Paths are chosen by the agent too: keep them from breaking out of the attribute.
    visible = "".join(_visible(ch) for ch in value)
    return escape_delimiters(_entities(visible).replace('"', "&quot;"))


def artifact_block(path: str, sha256: str, body: str, **attrs: str | int) -> str:
    """`<artifact path=... sha256=...>body</artifact>` with the body's delimiters escaped."""
    extra = "".join(f' {k}="{_attr(str(v))}"' for k, v in attrs.items())
    head = f'<{ARTIFACT_TAG} path="{_attr(path)}" sha256="{sha256}"{extra}>'
    return f"{head}\n{escape_delimiters(body)}\n</{ARTIFACT_TAG}>"


def final_message_block(text: str) -> str:
    """The agent's final message as delimited data."""
    return f"<{FINAL_TAG}>\n{escape_delimiters(text)}\n</{FINAL_TAG}>"
