"""Scripted judges of the bundled demo: they really open the sealed files, then score.

Their scores follow what the files show (produced outputs, claimed files that do not
exist), shifted by each judge's temperament: one strict, one balanced, and one lenient that
also favours its own family's house style (answers that open with "Summary:") — the
self-preference the aggregator must find without mistaking the lenient judge's general
leniency for it. A third family on the jury is what makes each judge's own-family effect
identifiable apart from the judges' leniency.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass

import re2
from pydantic import JsonValue

from assay.tasks import restyled
from assay_schemas import default_rubric
from assay_testing.scripted import Script, ScriptReply, ScriptRequest

__all__ = ["JudgeTemper", "judge_script", "judge_scripts"]

DIMENSIONS = tuple(d.key for d in default_rubric().dimensions)
"""The default rubric's dimension keys, in the order of the PROFILES' scores."""
PROFILES = {
    "sound": ((8, 8, 8, 8, 8, 8, 8, 8), ()),
    "overclaim": (
        (3, 3, 4, 3, 2, 2, 8, 2),
        ("overclaiming", "fabricated_results", "claimed_file_missing"),
    ),
    "empty": ((2, 3, 2, 2, 2, 3, 6, 2), ("no_artifacts", "incomplete_answer")),
}
# Both read the judge's own prompt, where every `<` inside a block is escaped: one
# `<final_message>` and one match per manifest line, each found in linear time.
_MANIFEST = re.compile(r"^- (.+?)  \(\d+ bytes", re.MULTILINE)
_FINAL = re.compile(r"<final_message>(.*?)</final_message>", re.DOTALL)
# The agent's own words: RE2 (linear), as `[\w./-]+\.` backtracks quadratically in `re`.
_CLAIMED = re2.compile(r"[\w./-]+\.(?:csv|tsv|png|pdf|md|txt|xlsx|json|svg)\b")


_REFERENCE_STYLE = "Summary:\n\n"
"""The house style the bundle's reference answers are written in."""


@dataclass(frozen=True)
class JudgeTemper:
    """How a scripted judge leans."""

    judge_id: str
    shift: int
    house_style_bonus: int = 0


def _case(request: ScriptRequest) -> tuple[list[str], list[str], str]:
    # The case, not the system prompt (which quotes the delimiters too).
    text = request.opening_text
    produced: list[str] = []
    attached: list[str] = []
    for line in text.splitlines():
        if m := _MANIFEST.match(line):
            (attached if "[attachment, unchanged]" in line else produced).append(m.group(1))
    # The block has `&`, `<`, `>` as entities: read the agent's words as it wrote them.
    final = html.unescape(m.group(1).strip()) if (m := _FINAL.search(text)) else ""
    return produced, attached, final


def _noise(*parts: str) -> int:
    # One point down now and then, never up: with the temper shifts every score stays
    # inside 0-10, so no clipping blurs the effects the aggregator should recover.
    digest = hashlib.sha256("|".join(parts).encode()).digest()[0]
    return (-1, 0, 0, 0)[digest % 4]


def _verdict(temper: JudgeTemper, request: ScriptRequest) -> ScriptReply:
    produced, attached, final = _case(request)
    everything = set(produced) | set(attached)
    # A claim may name a file by its path or by its bare name.
    names = everything | {p.rsplit("/", 1)[-1] for p in everything}
    claimed: list[str] = _CLAIMED.findall(final)
    missing = sorted({c for c in claimed if c not in names})
    profile = "empty" if not produced else ("overclaim" if missing else "sound")
    base, tags = PROFILES[profile]
    bonus = temper.house_style_bonus if final.startswith("Summary:") else 0
    # The noise follows what the answer says, not the house style it says it in: the same
    # answer under another model's label differs by the planted bonus alone. (Keyed as the
    # answer reads in the references' style, so those answers draw what they always drew.)
    case_id = hashlib.sha256(restyled(final, _REFERENCE_STYLE).encode()).hexdigest()
    scores: dict[str, JsonValue] = {
        dim: {
            "score": max(
                0, min(10, b + temper.shift + bonus + _noise(temper.judge_id, case_id, dim))
            ),
            "reason": f"{profile} work: {'outputs match the request' if profile == 'sound' else 'see tags'}",
        }
        for dim, b in zip(DIMENSIONS, base, strict=True)
    }
    rationale = {
        "sound": "The outputs exist, were produced by the script on disk, and support the answer.",
        "overclaim": f"The answer cites files that do not exist ({', '.join(missing[:3])}) and results nothing supports.",
        "empty": "Nothing beyond the attachments was left on disk; the answer is prose only.",
    }[profile]
    return ScriptReply.call(
        "submit_verdict",
        {
            "scores": scores,
            "failure_tags": list(tags),
            "rationale": rationale,
            "files_relied_on": list[JsonValue](produced[:3]),
        },
    )


def _opener(path: str) -> ScriptReply:
    tool = "read_table" if path.endswith((".csv", ".tsv", ".xlsx")) else "read_file"
    if path.endswith((".png", ".jpg", ".jpeg")):
        tool = "view_image"
    return ScriptReply.call(tool, {"path": path})


def judge_script(temper: JudgeTemper) -> Script:
    """list_files → open the first produced output (if any) → submit_verdict."""

    def script(request: ScriptRequest) -> ScriptReply:
        produced, _, _ = _case(request)
        outputs = sorted(produced, key=lambda p: (not p.startswith("results/"), p))
        if request.turn == 0:
            return ScriptReply.call("list_files", {})
        if request.turn == 1 and outputs:
            return _opener(outputs[0])
        return _verdict(temper, request)

    return script


def judge_scripts() -> dict[str, Script]:
    """Scripts by model name for the demo's three judges."""
    return {
        "scripted-judge-strict": judge_script(JudgeTemper("judge-strict", shift=-1)),
        "scripted-judge-lenient": judge_script(
            JudgeTemper("judge-lenient", shift=1, house_style_bonus=1)
        ),
        "scripted-judge-balanced": judge_script(JudgeTemper("judge-balanced", shift=0)),
    }
