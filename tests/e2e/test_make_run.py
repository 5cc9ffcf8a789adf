"""`assay run` (what `make run` does) on the bundled campaign, and its HTML in a real browser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from assay.config import Settings
from tests.chromium import headless_chromium
from tests.e2e.test_run_outcome import assay_run

ROOT = Path(__file__).resolve().parents[2]
TASKS = sorted(p.name for p in (ROOT / "examples" / "tasks").iterdir() if p.is_dir())
AGENTS = {"careful", "overclaimer", "empty"}
JUDGES = {"judge-strict", "judge-lenient", "judge-balanced", "rules"}
BLUE = (0x3B, 0x6E, 0xA8)  # the leaderboard bars' colour (report/assay_report/charts.py)
# ... drawn at opacity 0.75 on white: the colour a screenshot of the bars shows.
BAR = tuple(round(0.75 * c + 0.25 * 255) for c in BLUE)


def screenshot(html: Path, png: Path, tmp: Path) -> None:
    """Headless Chromium, with the flags this sandboxed machine needs."""
    headless_chromium(html.as_uri(), tmp, f"--screenshot={png}")


@pytest.mark.slow
def test_assay_run_reports_every_task_agent_and_judge(settings: Settings, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    tasks, campaign = Path("examples/tasks"), Path("examples/campaign.yaml")
    out = assay_run(settings, tasks, campaign, "--html", str(html), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Scripted campaign" in out.stdout and "SCRIPTED CAMPAIGN" in out.stdout
    for name in AGENTS | JUDGES:
        assert name in out.stdout, f"{name} missing from the terminal report"
    [report_file] = list((settings.home / "runs").glob("demo-*/report.json"))
    report = json.loads(report_file.read_text())
    stats = report["statistics"]
    assert report["run_states"] == [{"n_runs": len(TASKS) * len(AGENTS), "state": "judged"}]
    assert {j["judge_id"] for j in report["judges"]} == JUDGES
    assert all(
        j["n_runs"] == len(TASKS) * len(AGENTS) and j["n_failures"] == 0 for j in report["judges"]
    )
    assert {(s["agent_id"], s["n_tasks"]) for s in stats["agent_scores"]} == {
        (a, len(TASKS)) for a in AGENTS
    }
    # What the cast is built to show, detected by the platform:
    assert stats["agent_ranks"][0]["agent_id"] == "careful"
    overclaiming = {
        r["agent_id"]: r["rate"] for r in stats["tag_rates"] if r["tag"] == "overclaiming"
    }
    assert overclaiming["overclaimer"] == 1.0 and overclaiming["careful"] == 0.0
    empty = {r["agent_id"]: r["rate"] for r in stats["empty_artifact_rates"]}
    assert empty == {"careful": 0.0, "empty": 1.0, "overclaimer": 0.0}
    gap = {r["agent_id"]: r["gap"] for r in stats["communication_gap"]}
    assert gap["overclaimer"] > 3 > gap["careful"]
    preference = {r["judge_id"]: r for r in stats["self_preference"]}
    lenient = preference["judge-lenient"]
    # Planted: +1 for its own family's house style, on top of deterministic per-score noise
    # that does not average out exactly over 24 runs, so the check has a tolerance.
    assert abs(lenient["coefficient"] - 1.0) < 0.35, "the planted +1 own-family bias is recovered"
    assert lenient["ci_low"] > 0.5 and lenient["leniency"] > 0.5, "leniency is told apart from bias"
    assert preference["judge-strict"]["ci_low"] <= 0 <= preference["judge-strict"]["ci_high"]
    checks = {r["agent_id"]: r["pass_rate"] for r in report["reference_checks"]}
    # careful misreports its numbers on three tasks in eight (the cast's deal): the
    # judges pass those runs, the tasks' reference checks catch them.
    assert 0.5 < checks["careful"] < 1.0 and checks["overclaimer"] < 0.5
    # Judge validity: every task's reference and its four known-bad variants ran as blind
    # controls (counted in none of the figures above); the lenient judge passes the
    # controls whose numbers were altered, the rule judge's reference checks catch them.
    validity = report["validity"]
    assert validity["n_control_runs"] == len(TASKS) * 5
    assert "Judge validity" in out.stdout
    rates = {(r["judge_id"], r["variant"], r["measure"]): r for r in validity["control_rates"]}
    assert rates[("judge-lenient", "altered_numbers", "specificity")]["estimate"] < 0.5
    assert rates[("judge-lenient", "reference", "sensitivity")]["estimate"] > 0.5
    rules = {(r["judge_id"], r["variant"]): r["estimate"] for r in validity["rule_rates"]}
    assert rules[("rules:reference_checks", "altered_numbers")] == 1.0
    assert rules[("rules:reference_checks", "reference")] == 1.0
    jury = {r["agent_id"]: r for r in validity["corrected_pass_shares"] if r["judge_id"] is None}
    assert set(jury) == AGENTS
    # No interval claims more than its counts carry (issue 48): none of zero width, and
    # careful's corrected share on 8 tasks cannot rule out a true share near 0.1.
    shares = [
        *validity["control_rates"],
        *validity["rule_rates"],
        *validity["corrected_pass_shares"],
    ]
    shares += [
        r
        for t in ("pass_rates", "below_anchor_shares", "tag_rates", "empty_artifact_rates")
        for r in stats[t]
    ]
    assert all(r["ci_high"] > r["ci_low"] for r in shares if r["ci_low"] is not None)
    assert jury["careful"]["ci_low"] < 0.2 and jury["careful"]["ci_high"] == 1.0
    # ... nor any score.
    scores = [
        r
        for t in ("agent_scores", "dimension_scores", "judge_leaderboards", "communication_gap")
        for r in stats[t]
    ]
    assert all(r["ci_high"] > r["ci_low"] for r in scores)
    assert all(j["repair_ci_high"] > j["repair_ci_low"] for j in report["judges"])
    # Prompt caching (simulated): each judge reads a task's shared opening from the cache;
    # the blind control agents are named nowhere, here neither.
    cache = {(r["role"], r["member_id"]): r for r in report["prompt_cache"]}
    assert {m for role, m in cache if role == "agent"} == AGENTS
    assert {m for role, m in cache if role == "judge"} == JUDGES - {"rules"}
    assert all(cache[("judge", j)]["cached_share"] > 0.5 for j in JUDGES - {"rules"})
    warned = {(w["kind"], w["subject"]): w["message"] for w in validity["warnings"]}
    assert ("raw_share_at_sensitivity", "careful") in warned
    assert "altered_numbers" in warned[("specificity_heterogeneous", "")]

    png = tmp_path / "report.png"
    screenshot(html, png, tmp_path)
    image = Image.open(png).convert("RGB")
    top = image.crop((0, 0, image.width, 600))
    raw = top.tobytes()
    pixels = zip(raw[0::3], raw[1::3], raw[2::3], strict=True)
    bars = sum(1 for px in pixels if all(abs(c - b) < 12 for c, b in zip(px, BAR, strict=True)))
    assert bars > 2000, (
        f"the leaderboard plot's bars should be visible at the top of the page ({bars} px)"
    )
