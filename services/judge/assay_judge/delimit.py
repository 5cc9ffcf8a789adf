"""Untrusted text as delimited data: artifacts and the agent's words never read as instructions.

Everything a judge sees that the agent produced (file contents, file names, the final
message) is wrapped in a tag the system prompt names as data, or escaped. Safety is by
construction, not by recognising disguises: inside a block every character that is `<`
or `>` under any Unicode normalisation (`<`, `＜`, `﹤`, `≮` = `<` + U+0338, ...) and every
bracket look-alike becomes an entity, and `&` becomes `&amp;` so entities read back
unambiguously. Whatever invisible mark an agent puts after a bracket, no `<` is left to
open or close a tag; the only brackets in a block are ours.

`fold` (NFKC, invisible and combining marks dropped, look-alike letters mapped to ASCII)
is only a *signal* for the injection check: it says how text reads, it guards nothing.
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "ARTIFACT_TAG",
    "BRACKET_FORMS",
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

BRACKET_FORMS = "<>\u226e\u226f\ufe64\ufe65\uff1c\uff1e"
"""Every code point that is `<` or `>` under NFC, NFD, NFKC or NFKD (the tests re-derive
this from the running Python's Unicode database)."""
_BRACKET_LOOK_ALIKES = "‹〈⟨❮❬˂ᐸ〈⧼≺⋖›〉⟩❯❭˃ᐳ〉⧽≻⋗"
"""Brackets a model may read as `<`/`>` although no normalisation makes them one."""

_ESCAPES: dict[int, str] = {
    **{ord(ch): f"&#x{ord(ch):x};" for ch in BRACKET_FORMS + _BRACKET_LOOK_ALIKES},
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
}

_LOOK_ALIKES = {
    ord(k): v
    for k, v in {
        # brackets a model may read as `<` or `>`
        "‹": "<",
        "〈": "<",
        "⟨": "<",
        "❮": "<",
        "❬": "<",
        "˂": "<",
        "ᐸ": "<",
        "›": ">",
        "〉": ">",
        "⟩": ">",
        "❯": ">",
        "❭": ">",
        "˃": ">",
        "ᐳ": ">",
        "⁄": "/",
        "∕": "/",
        "⧸": "/",
        "／": "/",
        # Cyrillic and Greek letters that look Latin
        "а": "a",
        "е": "e",
        "і": "i",
        "о": "o",
        "р": "p",
        "с": "c",
        "х": "x",
        "у": "y",
        "к": "k",
        "м": "m",
        "т": "t",
        "н": "h",
        "в": "b",
        "ѕ": "s",
        "ј": "j",
        "ӏ": "l",
        "А": "A",
        "Е": "E",
        "І": "I",
        "О": "O",
        "Р": "P",
        "С": "C",
        "Х": "X",
        "К": "K",
        "М": "M",
        "Т": "T",
        "Н": "H",
        "В": "B",
        "Ѕ": "S",
        "Ј": "J",
        "α": "a",
        "ε": "e",
        "ι": "i",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "κ": "k",
        "ν": "v",
        "Α": "A",
        "Ε": "E",
        "Ι": "I",
        "Ο": "O",
        "Ρ": "P",
        "Τ": "T",
        "Κ": "K",
        "Ν": "N",
    }.items()
}

_SILENT = {"Cf", "Mn", "Me"}
"""Format characters (zero-width, bidi) and combining marks, variation selectors included:
dropped when reading text for the injection signal."""


class _FoldTable(dict[int, int | str | None]):
    """`str.translate` table computed per code point on first sight (a bounded cache)."""

    def __missing__(self, cp: int) -> int | str | None:
        ch = chr(cp)
        value: int | str | None = cp
        if unicodedata.category(ch) in _SILENT:
            value = None
        if len(self) < 65_536:
            self[cp] = value
        return value


_FOLD = _FoldTable(_LOOK_ALIKES)


def fold(text: str) -> str:
    """`text` as it reads: NFKC, invisible and combining marks dropped, look-alikes mapped
    to ASCII. A detection signal only; escaping never relies on it."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_FOLD)


def escape_delimiters(text: str) -> str:
    """`text` with `&` and every form of `<`, `>` (and their look-alikes) as entities."""
    return text.translate(_ESCAPES)


def _visible(ch: str) -> str:
    if ch.isprintable() and unicodedata.category(ch) != "Cf":
        return ch
    return f"\\u{ord(ch):04x}"


def quote_name(name: str) -> str:
    """A file name as a judge may see it: unchanged when plain; otherwise quoted, with line
    breaks and invisible characters as `\\uXXXX` and brackets and `&` as entities, so a
    name can neither start a new line of the prompt nor pass for a delimiter."""
    plain = all(ch not in '"\\' and _visible(ch) == ch for ch in name)
    if plain and fold(name) == name and escape_delimiters(name) == name:
        return name
    out = "".join("\\" + ch if ch in '"\\' else _visible(ch) for ch in name)
    return '"' + escape_delimiters(out) + '"'


def one_line(text: str) -> str:
    """Text that may quote agent-chosen names (an error message) on one line, escaped:
    line breaks and invisible characters as `\\uXXXX`, brackets and `&` as entities."""
    return escape_delimiters("".join(_visible(ch) for ch in text))


def _attr(value: str) -> str:
    # Paths are chosen by the agent too: keep them from breaking out of the attribute.
    visible = "".join(_visible(ch) for ch in value)
    return escape_delimiters(visible).replace('"', "&quot;")


def artifact_block(path: str, sha256: str, body: str, **attrs: str | int) -> str:
    """`<artifact path=... sha256=...>body</artifact>` with the body's brackets escaped."""
    extra = "".join(f' {k}="{_attr(str(v))}"' for k, v in attrs.items())
    head = f'<{ARTIFACT_TAG} path="{_attr(path)}" sha256="{sha256}"{extra}>'
    return f"{head}\n{escape_delimiters(body)}\n</{ARTIFACT_TAG}>"


def final_message_block(text: str) -> str:
    """The agent's final message as delimited data."""
    return f"<{FINAL_TAG}>\n{escape_delimiters(text)}\n</{FINAL_TAG}>"
