"""qPCR ΔΔCt: Ct values of four targets and GAPDH, LPS vs control, with a cDNA-loading
shift that only GAPDH normalization removes.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats
from task_files import NUM, exists, meta_for, near, r6, write_task, write_text

QPCR_SEED = 1128


def generate(root: Path) -> None:
    """Write tasks/qpcr_ddct/ and truth/qpcr_ddct.json under root."""
    task_id = "qpcr_ddct"
    rng = np.random.default_rng(QPCR_SEED)
    ref = "GAPDH"
    targets = ["IL6", "TNF", "MYC", "HPRT1"]
    log2fc = {"IL6": 3.0, "TNF": 1.5, "MYC": -1.2, "HPRT1": 0.0}
    base = {"GAPDH": 17.6, "IL6": 29.2, "TNF": 27.1, "MYC": 24.3, "HPRT1": 25.8}
    loading_shift = -0.8  # treated samples had more cDNA: every Ct ~0.8 cycles lower
    samples = [
        ("Ctrl-1", 0),
        ("Ctrl-2", 0),
        ("Ctrl-3", 0),
        ("LPS-1", 1),
        ("LPS-2", 1),
        ("LPS-3", 1),
    ]
    genes = [ref, *targets]

    wells: list[tuple[str, str, str]] = []  # (sample, gene, ct string)
    cts: dict[tuple[str, str], list[float]] = {}
    for sname, trt in samples:
        load = rng.normal(0.0, 0.3) + (loading_shift if trt else 0.0)
        for g in genes:
            bio = rng.normal(0.0, 0.18)
            mean_ct = base[g] + load + bio - (log2fc.get(g, 0.0) if trt else 0.0)
            for _ in range(3):
                ct = mean_ct + rng.normal(0.0, 0.09)
                wells.append((sname, g, f"{ct:.3f}"))
    # one failed technical replicate
    for i, (s, g, _) in enumerate(wells):
        if s == "Ctrl-2" and g == "IL6":
            wells[i] = (s, g, "Undetermined")
            break
    for g in genes:
        wells.append(("NTC", g, "Undetermined" if g != "GAPDH" else "37.912"))

    for s, g, c in wells:
        if s != "NTC" and c != "Undetermined":
            cts.setdefault((s, g), []).append(float(c))

    # reference analysis: mean technical reps -> dCt per sample -> ddCt -> 2^-ddCt; Welch t on dCt
    expected: dict[str, dict[str, float]] = {}
    for g in targets:
        d = {0: [], 1: []}
        raw = {0: [], 1: []}
        for s, trt in samples:
            d[trt].append(np.mean(cts[(s, g)]) - np.mean(cts[(s, ref)]))
            raw[trt].append(np.mean(cts[(s, g)]))
        ddct = np.mean(d[1]) - np.mean(d[0])
        p = stats.ttest_ind(d[1], d[0], equal_var=False).pvalue
        naive = 2.0 ** -(np.mean(raw[1]) - np.mean(raw[0]))
        expected[g] = {
            "fold_change": r6(2.0**-ddct),
            "ddct": r6(ddct),
            "welch_p": r6(p),
            "naive_fold_change_no_housekeeper": r6(naive),
        }
    assert expected["IL6"]["welch_p"] < 0.01 and expected["HPRT1"]["welch_p"] > 0.05

    lines = [
        "* Block Type = 96-Well Block (0.2mL)",
        "* Chemistry = SYBR_GREEN",
        "* Experiment Run End Time = 2024-03-08 16:42:10 PM CET",
        "* Instrument Type = QuantStudio 5 System",
        "* Passive Reference = ROX",
        "",
        "Well,Well Position,Sample Name,Target Name,Task,CT",
    ]
    order = list(range(len(wells)))
    for n, i in enumerate(order):
        s, g, c = wells[i]
        pos = "ABCDEFGH"[n // 12] + str(n % 12 + 1)
        task = "NTC" if s == "NTC" else "UNKNOWN"
        lines.append(f"{n + 1},{pos},{s},{g},{task},{c}")
    folder = root / "tasks" / task_id
    write_text(folder / "ct_values_fri.csv", "\n".join(lines) + "\n")

    fc_tol = 0.15
    checks = [
        exists("fold_change_table", "results/*.csv"),
        exists("figure", "results/*.png"),
    ]
    for g in targets:
        fc = expected[g]["fold_change"]
        checks.append(
            near(
                f"fold_change_{g}",
                "results/summary.md",
                rf"(?i)\b{g}\b[^\n]*?fold change\s*[=:]\s*{NUM}",
                fc,
                fc_tol * fc,
            )
        )
    checks.append(
        near(
            "p_IL6_significant",
            "results/summary.md",
            rf"(?i)\bIL6\b[^\n]*?\bp\s*[=:]\s*{NUM}",
            0.005,
            0.005,
        )
    )
    checks.append(
        near(
            "p_HPRT1_not_significant",
            "results/summary.md",
            rf"(?i)\bHPRT1\b[^\n]*?\bp\s*[=:]\s*{NUM}",
            0.525,
            0.475,
        )
    )

    prompt = """
hey, attached are the Ct values from friday's run (ct_values_fri.csv, straight off the QuantStudio). can you get me fold changes for the LPS treated vs ctrl and tell me if they're significant? GAPDH is the housekeeper. 3 bio reps per group, each in technical triplicate. one well didnt come up i think, not sure it matters

would be great to have a plot too for lab meeting
"""
    constraints = [
        "Put outputs in results/: a table of fold changes (CSV), a figure (PNG) and results/summary.md.",
        "In results/summary.md write one line per target gene in the form '<GENE>: fold change = <value>, p = <value>' (LPS relative to Ctrl, linear scale, p as a plain number).",
        "Normalize to GAPDH (ΔΔCt, 2^-ΔΔCt); biological replicates are the unit of replication.",
    ]
    meta = meta_for(
        "molecular biology",
        "analysis",
        "easy",
        "Fold changes (2^-ΔΔCt, GAPDH-normalized) per target with a significance test on biological replicates, a table, a figure and a short summary.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "reference_gene": ref,
            "true_log2_fold_change": log2fc,
            "true_fold_change": {g: r6(2.0 ** log2fc[g]) for g in targets},
            "baseline_ct": base,
            "treated_loading_shift_cycles": loading_shift,
            "bio_sd_ct": 0.18,
            "tech_sd_ct": 0.09,
            "failed_well": "Ctrl-2 IL6 (one technical replicate Undetermined)",
        },
        "reference_analysis": expected,
        "traps": [
            "Treated samples have more cDNA input (planted -0.8 cycles, ~-0.56 in this draw); skipping GAPDH normalization inflates every fold change ~1.5x.",
            "One Undetermined technical replicate and NTC wells must be excluded.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)
