"""The bundled example tasks: deterministic generation, loadable folders, and reference checks
that a careful solution passes while naive analyses and empty workspaces fail."""

from __future__ import annotations

import importlib
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats
from scipy.optimize import curve_fit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TASK_IDS = sorted(p.name for p in (EXAMPLES / "tasks").iterdir() if p.is_dir())
META_FILES = {"prompt.md", "task.yaml"}
SOLUTION_MODULES = ("pandas", "matplotlib", "statsmodels", "openpyxl", "docx")


# ----------------------------------------------------------------------------- local rule judge


def run_check(ws: Path, check: dict[str, Any]) -> tuple[bool, str]:
    """Evaluate one reference check on a workspace: (passed, detail)."""
    files = sorted(p for p in ws.glob(check["path"]) if p.is_file())
    if not files:
        return False, f"no file matches {check['path']}"
    if check["kind"] == "file_exists":
        return True, str(files[0].relative_to(ws))
    text = files[0].read_text(encoding="utf-8", errors="replace")
    if check["kind"] == "contains":
        hit = re.search(check["pattern"], text, flags=re.IGNORECASE)
        return hit is not None, "found" if hit else f"no match for {check['pattern']!r}"
    if check["kind"] == "number_near":
        m = re.search(check["pattern"], text)
        if m is None:
            return False, f"pattern {check['pattern']!r} not found"
        try:
            got = float(m.group(1))
        except ValueError:
            return False, f"captured {m.group(1)!r} is not a number"
        ok = math.isfinite(got) and abs(got - check["expected"]) <= check["tolerance"]
        return ok, f"got {got}, expected {check['expected']} ± {check['tolerance']}"
    raise AssertionError(f"unknown check kind {check['kind']!r}")


def evaluate(ws: Path, task_id: str) -> dict[str, tuple[bool, str]]:
    return {c["name"]: run_check(ws, c) for c in load_meta(task_id)["reference_checks"]}


def load_meta(task_id: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "tasks" / task_id / "task.yaml").read_text(encoding="utf-8"))


def make_workspace(task_id: str, dest: Path) -> Path:
    """The agent's view: the task folder minus prompt.md and task.yaml."""
    src = EXAMPLES / "tasks" / task_id
    dest.mkdir(parents=True, exist_ok=True)
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_file() and rel.as_posix() not in META_FILES:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest / rel)
    return dest


def write_summary(ws: Path, lines: list[str], name: str = "results/summary.md") -> None:
    out = ws / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def failed_numbers(result: dict[str, tuple[bool, str]], task_id: str) -> list[str]:
    kinds = {c["name"]: c["kind"] for c in load_meta(task_id)["reference_checks"]}
    return [n for n, (ok, _) in result.items() if kinds[n] == "number_near" and not ok]


def numbers_failed_by(ws: Path, lines: list[str], task_id: str) -> list[str]:
    """The task's number checks that a summary of `lines` in the workspace fails."""
    write_summary(ws, lines)
    return failed_numbers(evaluate(ws, task_id), task_id)


# ----------------------------------------------------------------------------- generator


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for sub in ("tasks", "truth")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def test_generator_is_deterministic_and_matches_committed(tmp_path: Path) -> None:
    outs = []
    for k in range(2):
        out = tmp_path / f"gen{k}"
        subprocess.run(
            [sys.executable, "-W", "error", str(EXAMPLES / "generate.py"), "--out", str(out)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        outs.append(tree(out))
    assert outs[0] == outs[1]
    committed = tree(EXAMPLES)
    assert sorted(committed) == sorted(outs[0])
    differing = [k for k in committed if committed[k] != outs[0][k]]
    assert not differing, f"committed files differ from a fresh generation: {differing}"
    total = sum(len(b) for b in committed.values())
    assert total < 300_000, f"generated files take {total} bytes"


def test_task_folders_load_and_validate() -> None:
    from assay.tasks import build_task, load_tasks

    drafts = load_tasks(EXAMPLES / "tasks", max_bytes=5_000_000)
    assert [d.task_id for d in drafts] == TASK_IDS
    assert len(drafts) >= 8
    for draft in drafts:
        task = build_task(draft.fields, [])
        assert task.domain and task.expected_output and task.constraints
        assert task.judge.sampling_times == 1
        kinds = {c.kind for c in task.reference_checks}
        assert "number_near" in kinds or "contains" in kinds
        names = [c.name for c in task.reference_checks]
        assert len(names) == len(set(names))
        for c in task.reference_checks:
            if c.kind != "file_exists":
                assert re.compile(c.pattern).groups >= (1 if c.kind == "number_near" else 0)
        truth = EXAMPLES / "truth" / f"{draft.task_id}.json"
        assert truth.is_file()
        assert (EXAMPLES / "solutions" / draft.task_id / "generate.py").is_file()
        assert not any("truth" in a.path or "solve" in a.path for a in draft.attachments)
    assert any(not d.attachments for d in drafts), "the planning task has no attachments"


def test_campaign_file_loads() -> None:
    from assay.campaign import load_campaign

    spec = load_campaign(EXAMPLES / "campaign.yaml")
    assert spec.campaign_id == "demo" and spec.scripted and spec.epochs == 1
    assert {a.agent_id for a in spec.agents} == {"careful", "overclaimer", "empty"}
    assert {j.judge_id for j in spec.judges} == {"judge-strict", "judge-lenient", "judge-balanced"}


# ----------------------------------------------------------------------------- solutions


@pytest.fixture(scope="module")
def solved(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[Path, subprocess.CompletedProcess[str]]]]:
    for mod in SOLUTION_MODULES:
        importlib.import_module(mod)  # dev dependencies: a missing one must fail, not skip
    root = tmp_path_factory.mktemp("solved")
    procs = {}
    for task_id in TASK_IDS:
        ws = make_workspace(task_id, root / task_id)
        procs[task_id] = (
            ws,
            subprocess.Popen(
                [sys.executable, str(EXAMPLES / "references" / task_id / "solve.py")],
                cwd=ws,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "MPLBACKEND": "Agg"},
            ),
        )
    done = {}
    for task_id, (ws, proc) in procs.items():
        out, err = proc.communicate(timeout=120)
        done[task_id] = (ws, subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    yield done


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_careful_solution_passes_every_check(task_id: str, solved: dict[str, Any]) -> None:
    ws, proc = solved[task_id]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout.strip(), "solve.py prints a short summary"
    result = evaluate(ws, task_id)
    failed = {n: d for n, (ok, d) in result.items() if not ok}
    assert not failed, failed


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_is_what_the_solution_leaves_and_says(
    task_id: str, solved: dict[str, Any]
) -> None:
    """references/<task_id>/ (the known-good control) is current: solve.py, the text files
    it writes (figures are compared by name: their bytes follow the plotting library) and
    the careful agent's final message; `python examples/references.py` rebuilds it."""
    ws, _ = solved[task_id]
    ref = EXAMPLES / "references" / task_id
    inputs = {
        p.relative_to(EXAMPLES / "tasks" / task_id)
        for p in (EXAMPLES / "tasks" / task_id).rglob("*")
    }
    made = {p.relative_to(ws) for p in ws.rglob("*") if p.is_file()} - inputs
    kept = {p.relative_to(ref) for p in ref.rglob("*") if p.is_file()}
    assert kept == made | {Path("solve.py"), Path("message.md")}
    for rel in made:
        if rel.suffix != ".png":
            assert (ref / rel).read_bytes() == (ws / rel).read_bytes(), rel
    answer = (EXAMPLES / "solutions" / task_id / "answer.md").read_text(encoding="utf-8")
    assert (ref / "message.md").read_text(encoding="utf-8") == "Summary:\n\n" + answer


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_answer_and_overclaim_messages(task_id: str, solved: dict[str, Any]) -> None:
    ws, _ = solved[task_id]
    sol = EXAMPLES / "solutions" / task_id
    answer = (sol / "answer.md").read_text(encoding="utf-8")
    overclaim = (sol / "overclaim.md").read_text(encoding="utf-8")
    named = set(re.findall(r"results/[\w.-]+\.\w+", answer))
    assert named, "the careful answer names its output files"
    assert all((ws / p).is_file() for p in named), [p for p in named if not (ws / p).is_file()]
    claimed = set(re.findall(r"results/[\w.-]+\.\w+", overclaim))
    assert any(not (ws / p).is_file() for p in claimed), (
        "the overclaimer names at least one file nobody produced"
    )


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_empty_workspace_fails_every_check(task_id: str, tmp_path: Path) -> None:
    ws = make_workspace(task_id, tmp_path / "ws")
    result = evaluate(ws, task_id)
    assert result and not any(ok for ok, _ in result.values()), result


# ----------------------------------------------------------------------------- naive analyses fail


def read_lines_from(path: Path, startswith: str, encoding: str = "utf-8") -> str:
    lines = path.read_text(encoding=encoding).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(startswith))
    return "\n".join(lines[start:])


def test_qpcr_without_housekeeper_normalization_fails(tmp_path: Path) -> None:
    pd = importlib.import_module("pandas")
    ws = make_workspace("qpcr_ddct", tmp_path / "ws")
    df = pd.read_csv(StringIO(read_lines_from(ws / "ct_values_fri.csv", "Well,")))
    df = df[df["Task"] != "NTC"].copy()
    df["Ct"] = pd.to_numeric(df["CT"], errors="coerce")
    df["group"] = df["Sample Name"].str.split("-").str[0]
    lines = []
    for gene in ("IL6", "TNF", "MYC", "HPRT1"):
        g = df[df["Target Name"] == gene]
        ctrl = g.loc[g["group"] == "Ctrl", "Ct"].dropna()
        lps = g.loc[g["group"] == "LPS", "Ct"].dropna()
        # wrong: raw Ct difference (no GAPDH), technical wells treated as replicates
        fc = 2.0 ** -(lps.mean() - ctrl.mean())
        p = stats.ttest_ind(lps, ctrl).pvalue
        lines.append(f"{gene}: fold change = {fc:.3f}, p = {p:.4g}")
    failed = numbers_failed_by(ws, lines, "qpcr_ddct")
    assert {"fold_change_IL6", "fold_change_TNF", "fold_change_HPRT1"} <= set(failed), failed


def test_dose_response_with_bottom_fixed_at_zero_fails(tmp_path: Path) -> None:
    pd = importlib.import_module("pandas")
    ws = make_workspace("dose_response_ic50", tmp_path / "ws")
    raw = pd.read_csv(ws / "data" / "viability_CTG_0311.csv")
    reps = ["rep1", "rep2", "rep3"]
    bkg = raw.loc[raw["compound"] == "no_cells", reps].values.mean()
    veh = raw.loc[raw["compound"] == "DMSO", reps].values.mean()
    lines = []
    for cpd in ("A", "B", "C"):
        d = raw[raw["compound"] == f"cmpd_{cpd}"]
        x = np.repeat(d["conc_uM"].astype(float).values, 3)
        y = ((d[reps].values - bkg) / (veh - bkg) * 100.0).ravel()

        def three_pl(xx: np.ndarray, top: float, ic50: float, hill: float) -> np.ndarray:
            return top / (1.0 + (xx / ic50) ** hill)

        popt, _ = curve_fit(
            three_pl, x, y, p0=[100.0, 1.0, 1.0], bounds=([0, 1e-4, 0.1], [200, 1e4, 10])
        )
        lines.append(f"IC50 compound {cpd}: {popt[1]:.3g} uM (95% CI n/a)")
    lines.append("IC50 compound D: > 100 uM")
    failed = numbers_failed_by(ws, lines, "dose_response_ic50")
    assert "ic50_C" in failed, failed


def test_de_ignoring_batch_fails(tmp_path: Path) -> None:
    pd = importlib.import_module("pandas")
    ws = make_workspace("rnaseq_batch_de", tmp_path / "ws")
    counts = pd.read_csv(ws / "counts_raw.csv", index_col=0)
    sheet = pd.read_csv(ws / "sample_sheet.csv")
    counts = counts[sheet["sample"].tolist()]
    counts = counts[(counts >= 10).sum(axis=1) >= 3]
    y = np.log2((counts.values + 0.5) / counts.values.sum(axis=0) * 1e6)
    ko = (sheet["genotype"] == "KO").values
    # wrong: two-group t-test per gene, batch ignored
    t = stats.ttest_ind(y[:, ko], y[:, ~ko], axis=1)
    p = t.pvalue
    m = len(p)
    order = np.argsort(p)
    q = np.empty(m)
    q[order] = np.minimum.accumulate((p[order] * m / np.arange(1, m + 1))[::-1])[::-1]
    lfc = y[:, ko].mean(axis=1) - y[:, ~ko].mean(axis=1)
    fav = lfc[list(counts.index).index("Cxcl10")]
    write_summary(
        ws,
        [f"significant genes (FDR < 0.05): {int((q < 0.05).sum())}", f"log2FC Cxcl10: {fav:.2f}"],
    )
    pd.DataFrame({"gene": counts.index, "log2FC": lfc, "p": p, "padj": q}).to_csv(
        ws / "results" / "de.csv"
    )
    failed = failed_numbers(evaluate(ws, "rnaseq_batch_de"), "rnaseq_batch_de")
    assert {"n_significant", "log2fc_Cxcl10"} <= set(failed), failed


def test_growth_rates_without_blank_subtraction_fail(tmp_path: Path) -> None:
    pd = importlib.import_module("pandas")
    ws = make_workspace("growth_curves", tmp_path / "ws")
    od = pd.read_csv(StringIO(read_lines_from(ws / "data" / "OD600_growth_0312.csv", "Time,T")))
    t = np.arange(len(od)) * 0.25
    strains = {
        "WT": ["B2", "B3", "B4"],
        "dmutA": ["B5", "B6", "B7"],
        "dmutB": ["C2", "C3", "C4"],
        "dmutB_comp": ["C5", "C6", "C7"],
    }
    lines = []
    for s, wells in strains.items():
        rates = []
        for w in wells:  # wrong: ln(raw OD), no blank subtraction, failed well kept
            ln = np.log(od[w].values)
            rates.append(
                max(np.polyfit(t[i : i + 7], ln[i : i + 7], 1)[0] for i in range(len(t) - 6))
            )
        lines.append(f"growth rate {s}: {np.mean(rates):.3f} per h")
    failed = numbers_failed_by(ws, lines, "growth_curves")
    assert {"growth_rate_WT", "growth_rate_dmutA", "growth_rate_dmutB"} <= set(failed), failed


def test_survey_unpaired_unscored_fails(tmp_path: Path) -> None:
    pd = importlib.import_module("pandas")
    ws = make_workspace("survey_paired", tmp_path / "ws")
    book = pd.read_excel(ws / "wellbeing_pre_post.xlsx", sheet_name=None)
    items = [f"Q{k}" for k in range(1, 9)]
    pre = book["pre"][items].sum(axis=1)  # wrong: no reverse scoring
    post = book["post"][items].sum(axis=1)
    res = stats.ttest_ind(post, pre)  # wrong: independent samples
    write_summary(
        ws,
        [
            "test: independent-samples t-test",
            f"n pairs: {len(post)}",
            f"mean change: {post.mean() - pre.mean():.2f}",
            f"p-value: {res.pvalue:.3g}",
        ],
    )
    failed = failed_numbers(evaluate(ws, "survey_paired"), "survey_paired")
    assert {"mean_change", "p_value_significant"} <= set(failed), failed


def test_messy_export_without_unit_conversion_fails(tmp_path: Path) -> None:
    ws = make_workspace("messy_export_cleanup", tmp_path / "ws")
    text = (ws / "data" / "IC_nitrate_export_MAR24.csv").read_text(encoding="cp1252")
    by_site: dict[str, list[float]] = {}
    for line in text.splitlines():
        f = line.split(";")
        if len(f) >= 4 and re.match(r"S\d+-", f[0]) and not f[3].startswith("<"):
            by_site.setdefault(f[1], []).append(
                float(f[3].split()[0].replace(",", "."))
            )  # wrong: µg/L as mg/L, duplicates kept
    (ws / "results").mkdir()
    (ws / "results" / "nitrate_clean.csv").write_text("site,nitrate\n", encoding="utf-8")
    write_summary(ws, [f"mean nitrate {s}: {np.mean(v):.3f} mg/L" for s, v in by_site.items()])
    failed = failed_numbers(evaluate(ws, "messy_export_cleanup"), "messy_export_cleanup")
    assert {"mean_Downstream-1km", "mean_Outfall"} <= set(failed), failed


def test_power_one_sided_fails(tmp_path: Path) -> None:
    ws = make_workspace("power_analysis_plan", tmp_path / "ws")
    d = 0.25 / 0.30
    n_one_sided_z = math.ceil(2 * (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) ** 2 / d**2)
    write_summary(
        ws,
        [f"n per group: {n_one_sided_z}", "randomized, blinded, attrition 10%"],
        "results/analysis_plan.md",
    )
    failed = failed_numbers(evaluate(ws, "power_analysis_plan"), "power_analysis_plan")
    assert failed == ["n_per_group"], failed
