#!/usr/bin/env python3
"""Generate the bundled example tasks, with data of known ground truth.

    python examples/generate.py            # (re)writes examples/tasks/ and examples/truth/
    python examples/generate.py --out DIR  # writes DIR/tasks/ and DIR/truth/

Everything is seeded and written with explicit number formats, and the XLSX/DOCX
containers are normalized (fixed zip timestamps and document dates), so a rerun with
the same library versions reproduces every byte.

Each task folder holds prompt.md, task.yaml and the attachments the agent sees. The
planted parameters, and the values the reference checks expect, go to
truth/<task_id>.json, outside the task folder, so an agent never sees them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import yaml

NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
"""Regex group capturing a plain or scientific-notation number."""

FIXED_DATE = dt.datetime(2024, 3, 12, 9, 30, 0)
ZIP_DATE = (2024, 3, 12, 9, 30, 0)

TASK_IDS = (
    "qpcr_ddct",
    "dose_response_ic50",
    "rnaseq_batch_de",
    "growth_curves",
    "survey_paired",
    "protocol_review",
    "messy_export_cleanup",
    "power_analysis_plan",
)


# --------------------------------------------------------------------------- helpers


def write_text(path: Path, text: str, encoding: str = "utf-8") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))


def write_csv_rows(
    path: Path, rows: list[list[str]], sep: str = ",", encoding: str = "utf-8"
) -> None:
    write_text(path, "".join(sep.join(r) + "\n" for r in rows), encoding)


def normalize_zip(path: Path) -> None:
    """Rewrite an OOXML container with fixed entry timestamps and fixed document dates."""
    with zipfile.ZipFile(path) as zin:
        entries = [(info.filename, zin.read(info.filename)) for info in zin.infolist()]
    stamp = FIXED_DATE.strftime("%Y-%m-%dT%H:%M:%SZ")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zout:
        for name, data in entries:
            if name == "docProps/core.xml":
                text = data.decode("utf-8")
                for tag in ("created", "modified"):
                    text = re.sub(
                        rf"(<dcterms:{tag}[^>]*>)[^<]*(</dcterms:{tag}>)",
                        rf"\g<1>{stamp}\g<2>",
                        text,
                    )
                data = text.encode("utf-8")
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)
    path.write_bytes(buf.getvalue())


def write_task(
    root: Path,
    task_id: str,
    prompt: str,
    meta: dict,
    truth: dict,
) -> Path:
    folder = root / "tasks" / task_id
    write_text(folder / "prompt.md", prompt.strip() + "\n")
    text = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=4096)
    write_text(folder / "task.yaml", text)
    write_text(
        root / "truth" / f"{task_id}.json",
        json.dumps(truth, indent=2, sort_keys=False, ensure_ascii=False) + "\n",
    )
    return folder


def meta_for(
    domain: str,
    phase: str,
    difficulty: str,
    expected_output: str,
    constraints: list[str],
    checks: list[dict],
) -> dict:
    return {
        "domain": domain,
        "phase": phase,
        "difficulty": difficulty,
        "expected_output": expected_output,
        "constraints": constraints,
        "reference_checks": checks,
        "judge": {"sampling_times": 1},
    }


def near(name: str, path: str, pattern: str, expected: float, tolerance: float) -> dict:
    return {
        "kind": "number_near",
        "name": name,
        "path": path,
        "pattern": pattern,
        "expected": float(round(expected, 6)),
        "tolerance": float(round(tolerance, 6)),
    }


def contains(name: str, path: str, pattern: str) -> dict:
    return {"kind": "contains", "name": name, "path": path, "pattern": pattern}


def exists(name: str, path: str) -> dict:
    return {"kind": "file_exists", "name": name, "path": path}


def r6(x: float) -> float:
    return float(round(float(x), 6))


# --------------------------------------------------------------------------- 1. qPCR


QPCR_SEED = 1128


def gen_qpcr(root: Path) -> None:
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
    from scipy import stats

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


# --------------------------------------------------------------------------- 2. dose-response


def four_pl(x, bottom, top, ic50, hill):
    return bottom + (top - bottom) / (1.0 + (x / ic50) ** hill)


def gen_dose_response(root: Path) -> None:
    task_id = "dose_response_ic50"
    rng = np.random.default_rng(2202)
    concs = [100.0 / 3.0**k for k in range(10)]
    planted = {
        "A": {"top": 100.0, "bottom": 3.0, "ic50_uM": 0.35, "hill": 1.1},
        "B": {"top": 98.0, "bottom": 6.0, "ic50_uM": 4.2, "hill": 0.9},
        "C": {"top": 100.0, "bottom": 38.0, "ic50_uM": 12.0, "hill": 1.6},
        "D": {"top": 100.0, "bottom": 100.0, "ic50_uM": None, "hill": None},
    }
    bkg, vehicle = 1450.0, 52000.0
    rows = [["plate", "compound", "conc_uM", "rep1", "rep2", "rep3"]]

    def rlu(viab: float) -> str:
        sig = bkg + (vehicle - bkg) * viab / 100.0
        sig = sig * (1.0 + rng.normal(0.0, 0.04)) + rng.normal(0.0, 300.0)
        return str(round(sig))

    rows.append(["P1", "no_cells", "", *[str(round(bkg + rng.normal(0, 120))) for _ in range(3)]])
    rows.append(["P1", "DMSO", "0", *[rlu(100.0) for _ in range(3)]])
    rows.append(["P1", "DMSO", "0", *[rlu(100.0) for _ in range(3)]])
    for cpd, p in planted.items():
        for c in concs:
            if p["ic50_uM"] is None:
                v = 100.0 - 6.0 * c / 100.0  # essentially flat
            else:
                v = four_pl(c, p["bottom"], p["top"], p["ic50_uM"], p["hill"])
            rows.append(["P1", f"cmpd_{cpd}", f"{c:.4g}", rlu(v), rlu(v), rlu(v)])
    folder = root / "tasks" / task_id
    write_csv_rows(folder / "data" / "viability_CTG_0311.csv", rows)

    # reference (free 4PL on log10 conc, all wells) and naive (bottom fixed at 0) fits
    from scipy.optimize import curve_fit

    def f4(lx, bottom, top, lic50, hill):
        return bottom + (top - bottom) / (1.0 + 10.0 ** (hill * (lx - lic50)))

    data = rows[1:]
    b = np.mean([float(v) for v in data[0][3:]])
    veh = np.mean([float(v) for r in data[1:3] for v in r[3:]])
    naive, ref, ref_means = {}, {}, {}
    for cpd in ("A", "B", "C"):
        x, y = [], []
        for r in data:
            if r[1] == f"cmpd_{cpd}":
                for v in r[3:]:
                    x.append(math.log10(float(r[2])))
                    y.append((float(v) - b) / (veh - b) * 100.0)
        x, y = np.array(x), np.array(y)
        bounds = ([-20.0, 50.0, -5.0, 0.2], [90.0, 150.0, 4.0, 5.0])
        popt, _ = curve_fit(
            f4, x, y, p0=[5.0, 100.0, float(np.median(x)), 1.0], bounds=bounds, maxfev=20000
        )
        ref[cpd] = r6(10 ** popt[2])
        xm, ym = x[::3], y.reshape(-1, 3).mean(axis=1)
        popt, _ = curve_fit(
            f4, xm, ym, p0=[5.0, 100.0, float(np.median(x)), 1.0], bounds=bounds, maxfev=20000
        )
        ref_means[cpd] = r6(10 ** popt[2])
        popt, _ = curve_fit(
            lambda lx, top, lic50, hill: f4(lx, 0.0, top, lic50, hill),
            x,
            y,
            p0=[100.0, float(np.median(x)), 1.0],
            bounds=([0.0, -5.0, 0.1], [200.0, 4.0, 10.0]),
            maxfev=20000,
        )
        naive[cpd] = r6(10 ** popt[1])

    tol = 0.25
    checks = [exists("results_table", "results/*.csv"), exists("figure", "results/*.png")]
    for cpd in ("A", "B", "C"):
        ic = ref[cpd]
        assert (
            abs(planted[cpd]["ic50_uM"] - ic) <= tol * ic and abs(ref_means[cpd] - ic) <= tol * ic
        )
        checks.append(
            near(
                f"ic50_{cpd}",
                "results/summary.md",
                rf"(?i)IC50 compound {cpd}\s*[=:]\s*{NUM}\s*(?:µ|u|micro)M",
                ic,
                tol * ic,
            )
        )
    checks.append(
        contains("ci_reported_A", "results/summary.md", r"IC50 compound A[^\n]*(CI|confidence)")
    )
    checks.append(
        contains(
            "compound_D_inactive",
            "results/summary.md",
            r"compound D[^\n]*(>\s*100|not (reached|determin|estimable|calculable)|n\.?\s?d\.?\b|inactive|no (activity|inhibition|response|fit))",
        )
    )
    assert abs(naive["C"] - ref["C"]) > tol * ref["C"]

    prompt = """
Hi! CellTiter-Glo data from the 72h viability assay is in data/viability_CTG_0311.csv, 4 compounds, 10-pt 1:3 dilutions from 100 uM, triplicates. DMSO wells are the 100% and there are no-cell wells for background.

Could you fit dose response curves and give me IC50s with confidence intervals? Need them for the group meeting slides. Compound C looked a bit odd on the plate, it doesn't seem to kill everything.
"""
    constraints = [
        "Normalize raw luminescence to % viability using the no-cell background and DMSO wells.",
        "Fit a four-parameter logistic (top, bottom, IC50, Hill slope) per compound; report IC50 as the 4PL inflection point (relative IC50) in µM with a 95% CI.",
        "Write results/summary.md with one line per compound in the form 'IC50 compound <X>: <value> uM (95% CI <low>-<high> uM)'; say so on that line if an IC50 cannot be determined.",
        "Also write a CSV of fitted parameters and a PNG figure of the curves to results/.",
    ]
    meta = meta_for(
        "pharmacology",
        "analysis",
        "medium",
        "4PL fits per compound with IC50 (µM) and 95% CIs, a parameter table, a figure with the fitted curves, and a note on any compound whose IC50 is not determinable.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "compounds": planted,
            "concentrations_uM": [r6(c) for c in concs],
            "background_rlu": bkg,
            "vehicle_rlu": vehicle,
            "noise": "4% multiplicative + 300 RLU additive per well",
        },
        "reference_analysis": {
            "ic50_uM_free_4pl_all_wells": ref,
            "ic50_uM_free_4pl_on_means": ref_means,
        },
        "check_expected": "reference free-4PL IC50 on the generated data; tolerance 25% of it (the planted IC50 also lies inside)",
        "tolerance_relative": tol,
        "naive_ic50_bottom_fixed_0_uM": naive,
        "traps": [
            "Compound C is a partial inhibitor (bottom ~38%): fixing bottom at 0, or reporting the 50%-viability (absolute) IC50, misplaces its IC50.",
            "Compound D is inactive: no IC50 should be reported.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- 3. RNA-seq DE with batch


DE_GENES = [
    ("Cxcl10", 1.2),
    ("Irf7", 2.4),
    ("Isg15", 2.8),
    ("Ifit1", 3.0),
    ("Ifit3", 2.6),
    ("Oasl1", 2.2),
    ("Rsad2", 2.9),
    ("Mx1", 2.1),
    ("Stat1", 1.6),
    ("Usp18", 1.9),
    ("Bst2", 1.7),
    ("Gbp2", 2.0),
    ("Zbp1", 1.8),
    ("Ccl5", 2.3),
    ("Col1a1", -1.8),
    ("Col3a1", -1.6),
    ("Acta2", -2.0),
    ("Tagln", -1.7),
    ("Pdk4", -2.2),
    ("Hmgcs2", -1.9),
    ("Cpt1a", -1.5),
    ("Angptl4", -2.1),
    ("Fabp4", -1.8),
    ("Trex1", -4.5),
]


N_BATCH = 200
BATCH_RANGE = (1.5, 3.0)


def _lm_de(counts: np.ndarray, genotype: list[str], batch: list[str], with_batch: bool):
    """Reference DE: OLS on log2-CPM of expressed genes, t-tests, BH. Returns (keep, log2fc, p, q)."""
    from scipy import stats

    n = counts.shape[1]
    keep = (counts >= 10).sum(axis=1) >= 3
    pos = counts[keep][(counts[keep] > 0).all(axis=1)]
    logc = np.log(pos)
    sf = np.exp(np.median(logc - logc.mean(axis=1, keepdims=True), axis=0))  # median of ratios
    y = np.log2((counts[keep] + 0.5) / sf)
    ko = np.array([g == "KO" for g in genotype], dtype=float)
    b2 = np.array([b == "run2" for b in batch], dtype=float)
    X = np.column_stack([np.ones(n), ko] + ([b2] if with_batch else []))
    beta = np.linalg.lstsq(X, y.T, rcond=None)[0]
    resid = y.T - X @ beta
    dfr = n - X.shape[1]
    s2 = (resid**2).sum(axis=0) / dfr
    se = np.sqrt(s2 * np.linalg.inv(X.T @ X)[1, 1])
    p = 2 * stats.t.sf(np.abs(beta[1] / se), dfr)
    m = len(p)
    o = np.argsort(p)
    q = np.empty(m)
    q[o] = np.minimum(1.0, np.minimum.accumulate((p[o] * m / np.arange(1, m + 1))[::-1])[::-1])
    return keep, beta[1], p, q


def _lm_de_summary(counts, genotype, batch, names, with_batch):
    keep, lfc, _, q = _lm_de(counts, genotype, batch, with_batch)
    kept = [names[i] for i in np.where(keep)[0]]
    return int((q < 0.05).sum()), float(lfc[kept.index("Cxcl10")])


def gen_rnaseq(root: Path) -> None:
    task_id = "rnaseq_batch_de"
    rng = np.random.default_rng(3303)
    n_genes = 1000
    n_s = 16
    samples = [f"S{i:02d}" for i in range(1, n_s + 1)]
    genotype = ["WT"] * 8 + ["KO"] * 8
    batch = ["run1"] * 7 + ["run2"] * 1 + ["run1"] * 1 + ["run2"] * 7
    # shuffle the sample order so the sheet is not sorted by group
    perm = rng.permutation(n_s)
    genotype = [genotype[i] for i in perm]
    batch = [batch[i] for i in perm]

    n_de = len(DE_GENES)
    gm = rng.choice(np.arange(10000, 100000), size=n_genes - n_de, replace=False)
    names = [name for name, _ in DE_GENES] + [f"Gm{int(x)}" for x in gm]
    lfc = np.zeros(n_genes)
    lfc[:n_de] = [v for _, v in DE_GENES]
    base = np.exp(rng.normal(5.6, 1.3, n_genes))
    base[:n_de] = np.exp(rng.normal(6.5, 0.6, n_de))
    # batch effects: 140 background genes plus the favourite gene Cxcl10
    bfx = np.zeros(n_genes)
    bidx = rng.choice(np.arange(n_de, n_genes), size=N_BATCH, replace=False)
    bfx[bidx] = rng.choice([-1.0, 1.0], size=N_BATCH) * rng.uniform(*BATCH_RANGE, N_BATCH)
    bfx[0] = 2.0
    bfx[[2, 14]] = [1.5, -1.4]
    disp = 0.012 + 0.6 / base
    size = rng.uniform(0.7, 1.4, n_s)
    counts = np.zeros((n_genes, n_s), dtype=np.int64)
    for j in range(n_s):
        log2mu = (
            np.log2(base)
            + (lfc if genotype[j] == "KO" else 0.0)
            + (bfx if batch[j] == "run2" else 0.0)
        )
        mu = size[j] * 2.0**log2mu
        lam = rng.gamma(1.0 / disp, mu * disp)
        counts[:, j] = rng.poisson(lam)
    order = rng.permutation(n_genes)

    folder = root / "tasks" / task_id
    rows = [["gene", *samples]]
    for i in order:
        rows.append([names[i], *[str(int(c)) for c in counts[i]]])
    write_csv_rows(folder / "counts_raw.csv", rows)
    sheet = [["sample", "genotype", "batch", "RIN"]]
    for j, s in enumerate(samples):
        sheet.append([s, genotype[j], batch[j], f"{rng.uniform(7.2, 9.6):.1f}"])
    write_csv_rows(folder / "sample_sheet.csv", sheet)

    n_sig, fav = _lm_de_summary(counts, genotype, batch, names, True)
    n_sig_naive, fav_naive = _lm_de_summary(counts, genotype, batch, names, False)
    n_tol, fav_tol = 6.0, 0.3
    assert abs(n_sig - n_de) <= n_tol and abs(n_sig_naive - n_de) > n_tol, (n_sig, n_sig_naive)
    assert abs(fav - fav_naive) > 2 * fav_tol, (fav, fav_naive)

    checks = [
        exists("de_table", "results/*.csv"),
        near(
            "n_significant",
            "results/summary.md",
            rf"(?i)significant genes[^\n]*?:\s*{NUM}",
            n_de,
            n_tol,
        ),
        near(
            "log2fc_Cxcl10",
            "results/summary.md",
            rf"(?i)log2FC Cxcl10\s*[=:]\s*{NUM}",
            fav,
            fav_tol,
        ),
        contains("mentions_batch", "results/summary.md", r"batch"),
    ]
    prompt = """
hi, count matrix from the KO vs WT livers is counts_raw.csv (featureCounts, gene symbols), sample info in sample_sheet.csv. 8 vs 8. heads up the libraries were sequenced in two runs and the split isn't balanced, core facility messed up the scheduling :(

can you do a DE analysis KO vs WT? mostly i want the list of DE genes and what's going on with Cxcl10, it's the gene we care about. FDR 5% is fine
"""
    constraints = [
        "Write the full DE table to results/ as CSV (gene, log2FC KO vs WT, p-value, adjusted p-value).",
        "In results/summary.md include a line 'significant genes (FDR < 0.05): <n>' and a line 'log2FC Cxcl10: <value>' (KO relative to WT, log2 scale).",
        "Only the Python scientific stack is available (numpy, scipy, pandas, statsmodels); no R/Bioconductor.",
    ]
    meta = meta_for(
        "genomics",
        "analysis",
        "hard",
        "A differential expression table for KO vs WT that accounts for the sequencing-run batch, the number of DE genes at FDR 5%, the Cxcl10 estimate, and a note on the batch design.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "n_genes": n_genes,
            "de_genes_log2fc": dict(DE_GENES),
            "n_de": n_de,
            "n_batch_affected_background_genes": N_BATCH,
            "batch_effect_log2_range": list(BATCH_RANGE),
            "Cxcl10": {"true_log2fc": 1.2, "batch_log2_effect_run2": 2.0},
            "design": {
                s: {"genotype": g, "batch": b}
                for s, g, b in zip(samples, genotype, batch, strict=False)
            },
        },
        "reference_analysis": {
            "n_significant_with_batch": n_sig,
            "log2fc_Cxcl10_with_batch": r6(fav),
        },
        "naive_analysis_without_batch": {
            "n_significant": n_sig_naive,
            "log2fc_Cxcl10": r6(fav_naive),
        },
        "traps": [
            "WT is mostly in run1 and KO mostly in run2: ignoring batch calls batch genes DE and inflates Cxcl10's log2FC.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- 4. growth curves


def baranyi_ln(t: np.ndarray, mu: float, lag: float, ln_n0: float, ln_nmax: float) -> np.ndarray:
    h0 = mu * lag
    a = t + np.log(np.exp(-mu * t) + np.exp(-h0) - np.exp(-mu * t - h0)) / mu
    return ln_n0 + mu * a - np.log(1.0 + (np.exp(mu * a) - 1.0) / np.exp(ln_nmax - ln_n0))


def gen_growth(root: Path) -> None:
    task_id = "growth_curves"
    rng = np.random.default_rng(4404)
    strains = {
        "WT": {"mu_per_h": 1.00, "lag_h": 1.5, "wells": ["B2", "B3", "B4"]},
        "dmutA": {"mu_per_h": 0.55, "lag_h": 2.0, "wells": ["B5", "B6", "B7"]},
        "dmutB": {"mu_per_h": 0.98, "lag_h": 4.0, "wells": ["C2", "C3", "C4"]},
        "dmutB_comp": {"mu_per_h": 0.95, "lag_h": 1.8, "wells": ["C5", "C6", "C7"]},
    }
    blanks = ["D2", "D3", "D4"]
    failed_well = "C3"
    blank_od, n0, nmax = 0.092, 0.003, 1.15
    t = np.arange(0, 18.0 + 1e-9, 0.25)
    cols: dict[str, np.ndarray] = {}
    for p in strains.values():
        for w in p["wells"]:
            mu = p["mu_per_h"] * (1.0 + rng.normal(0, 0.02))
            n = np.exp(
                baranyi_ln(
                    t, mu, p["lag_h"], math.log(n0), math.log(nmax * (1 + rng.normal(0, 0.03)))
                )
            )
            if w == failed_well:
                n = np.full_like(t, 0.0015)
            od = (
                blank_od
                + rng.normal(0, 0.002)
                + n * (1 + rng.normal(0, 0.01, t.size))
                + rng.normal(0, 0.0015, t.size)
            )
            cols[w] = od
    for w in blanks:
        cols[w] = blank_od + rng.normal(0, 0.002) + rng.normal(0, 0.0015, t.size)
    wells = sorted(cols, key=lambda w: (w[0], int(w[1:])))

    lines = [
        "Software Version,3.11.19",
        r"Experiment File Path:,C:\Users\labuser\Desktop\JM\growth_0312.xpt",
        r"Protocol File Path:,C:\Users\Public\Documents\Protocols\OD600_18h_37C.prt",
        "Plate Number,Plate 1",
        "Date,3/12/2024",
        "Time,10:02:41 AM",
        "Reader Type:,Synergy H1",
        "Reader Serial Number:,21061519",
        "Reading Type,Reader",
        "",
        "Procedure Details",
        "Plate Type,96 WELL PLATE (Use plate lid)",
        "Set Temperature,Setpoint 37°C",
        "Start Kinetic,18:00:00, 0:15:00",
        "    Read,Absorbance Endpoint",
        "    ,Wavelengths:  600",
        "",
        "600",
        "",
        ",".join(["Time", "T° 600", *wells]),
    ]
    for k, tk in enumerate(t):
        h = int(tk)
        m = round((tk - h) * 60)
        temp = 37.0 if k > 2 else 36.4 + 0.2 * k
        lines.append(
            ",".join([f"{h}:{m:02d}:00", f"{temp:.1f}", *[f"{cols[w][k]:.3f}" for w in wells]])
        )
    folder = root / "tasks" / task_id
    write_text(folder / "data" / "OD600_growth_0312.csv", "\n".join(lines) + "\n")

    grid = [["", *[str(c) for c in range(1, 13)]]]
    layout = {w: s for s, p in strains.items() for w in p["wells"]}
    layout.update({w: "blank" for w in blanks})
    for r in "ABCDEFGH":
        grid.append([r, *[layout.get(f"{r}{c}", "") for c in range(1, 13)]])
    write_csv_rows(folder / "data" / "plate_layout.csv", grid)

    tol = 0.15
    checks = [exists("rates_table", "results/*.csv"), exists("figure", "results/*.png")]
    for s, p in strains.items():
        mu = p["mu_per_h"]
        checks.append(
            near(
                f"growth_rate_{s}",
                "results/summary.md",
                rf"(?i)growth rate {re.escape(s)}\s*[=:]\s*{NUM}",
                mu,
                tol * mu,
            )
        )
    checks.append(contains("flags_failed_well", "results/summary.md", r"\bC3\b"))
    prompt = """
hey can you pull growth rates out of this? it's the plate reader export from tuesday (data/OD600_growth_0312.csv), OD600 every 15 min for 18h at 37. WT, the two deletions and the mutB complement, triplicate wells, layout is in data/plate_layout.csv. the D row is just LB

i mostly want to know if dmutA grows slower than WT. I think one of the wells didn't grow at all, use your judgement
"""
    constraints = [
        "Report the maximum specific growth rate µmax (natural-log OD units per hour, i.e. 1/h) per strain as the mean of its replicate wells, in results/summary.md, one line per strain in the form 'growth rate <strain>: <value> per h' using the strain names from the layout.",
        "Write per-well and per-strain results as CSV and a PNG figure of the curves to results/.",
        "Name any well you excluded, and why, in results/summary.md.",
    ]
    meta = meta_for(
        "microbiology",
        "analysis",
        "medium",
        "Per-well and per-strain maximum specific growth rates (1/h) with variability, lag times if possible, a figure, and a comparison of dmutA vs WT.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "model": "Baranyi (ln biomass) + blank OD; 2% well-to-well CV in mu",
            "strains": strains,
            "blank_wells": blanks,
            "blank_od600": blank_od,
            "n0_od": n0,
            "nmax_od": nmax,
            "failed_well": failed_well,
            "read_interval_h": 0.25,
        },
        "tolerance_relative": tol,
        "check_expected": "planted Baranyi mu; the observable max slope of ln(N) of the noise-free curves is ~9% lower (deceleration overlaps the exponential phase), so the tolerance is 15%",
        "traps": [
            "Without blank subtraction the max slope of ln(OD) is roughly halved.",
            "log10 instead of ln divides the rate by 2.303; doubling time is not the rate.",
            "Well C3 (dmutB) never grew; averaging it in lowers dmutB by a third.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- 5. paired survey (XLSX)


def gen_survey(root: Path) -> None:
    task_id = "survey_paired"
    rng = np.random.default_rng(5505)
    from openpyxl import Workbook
    from scipy import stats

    n = 34
    dropouts = {5, 13, 22, 30}
    reverse = {3, 6}
    loadings = np.array([0.8, 0.7, 0.75, 0.85, 0.7, 0.8, 0.65, 0.75])
    intercepts = np.array([3.0, 3.2, 2.9, 3.1, 2.8, 3.0, 3.3, 2.9])
    theta = rng.normal(0.0, 1.3, n)
    delta = rng.normal(0.4, 0.5, n)

    def items(th: np.ndarray) -> np.ndarray:
        raw = (
            intercepts[None, :] + th[:, None] * loadings[None, :] + rng.normal(0, 0.6, (th.size, 8))
        )
        x = np.clip(np.rint(raw), 1, 5).astype(int)
        for q in reverse:
            x[:, q - 1] = (
                6 - x[:, q - 1]
            )  # stored as answered: reverse-keyed items run the other way
        return x

    pre = items(theta)
    post = items(theta + delta)
    ids = [f"P{i:03d}" for i in range(1, n + 1)]
    ages = rng.integers(19, 64, n)
    genders = rng.choice(["F", "M", "F", "F", "M", "other"], n)

    def total(x: np.ndarray, reverse_code: bool) -> np.ndarray:
        y = x.copy()
        if reverse_code:
            for q in reverse:
                y[:, q - 1] = 6 - y[:, q - 1]
        return y.sum(axis=1)

    keep = np.array([i for i in range(n) if (i + 1) not in dropouts])
    d_ok = total(post, True)[keep] - total(pre, True)[keep]
    d_naive = total(post, False)[keep] - total(pre, False)[keep]
    p_paired = stats.ttest_rel(total(post, True)[keep], total(pre, True)[keep]).pvalue
    p_wilcox = stats.wilcoxon(d_ok).pvalue
    post_all = total(post, True)[keep]
    p_unpaired = stats.ttest_ind(post_all, total(pre, True)).pvalue
    assert p_paired < 0.01 and p_wilcox < 0.01 and p_unpaired > 0.05, (
        p_paired,
        p_wilcox,
        p_unpaired,
    )

    wb = Workbook()
    ws = wb.active
    ws.title = "pre"
    hdr = ["ID", "age", "gender", "date", *[f"Q{k}" for k in range(1, 9)]]
    ws.append(hdr)
    for i in range(n):
        ws.append(
            [
                ids[i],
                int(ages[i]),
                str(genders[i]),
                f"2023-10-{rng.integers(2, 14):02d}",
                *[int(v) for v in pre[i]],
            ]
        )
    ws2 = wb.create_sheet("post")
    ws2.append(["ID", "date", *[f"Q{k}" for k in range(1, 9)], "comments"])
    post_order = rng.permutation(keep)
    messy_ids = {11: "p012", 18: "P019 ", 26: "P 027"}
    comments = {3: "felt rushed", 9: "", 20: "missed 2 sessions"}
    for i in post_order:
        pid = messy_ids.get(int(i), ids[i])
        ws2.append(
            [
                pid,
                f"2024-01-{rng.integers(8, 20):02d}",
                *[int(v) for v in post[i]],
                comments.get(int(i)),
            ]
        )
    ws3 = wb.create_sheet("codebook")
    ws3.append(["item", "text", "keying"])
    texts = [
        "I've been feeling optimistic about the future",
        "I've been feeling useful",
        "I've been feeling tense and on edge",
        "I've been dealing with problems well",
        "I've been thinking clearly",
        "I've been feeling down and hopeless",
        "I've been feeling close to other people",
        "I've been able to make up my own mind about things",
    ]
    for k, txt in enumerate(texts, start=1):
        ws3.append([f"Q{k}", txt, "reverse" if k in reverse else "positive"])
    ws3.append([])
    ws3.append(["scale", "1 = none of the time ... 5 = all of the time", ""])
    ws3.append(
        ["total", "sum of Q1-Q8 after reverse-scoring reverse-keyed items (6 - x); range 8-40", ""]
    )
    wb.properties.creator = "survey team"
    wb.properties.created = FIXED_DATE
    folder = root / "tasks" / task_id
    path = folder / "wellbeing_pre_post.xlsx"
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    normalize_zip(path)

    mean_d, naive_d = float(np.mean(d_ok)), float(np.mean(d_naive))
    tol = 0.4
    assert abs(naive_d - mean_d) > tol
    checks = [
        exists("summary", "results/summary.md"),
        near(
            "mean_change", "results/summary.md", rf"(?i)mean change\s*[=:]\s*\+?{NUM}", mean_d, tol
        ),
        near(
            "p_value_significant",
            "results/summary.md",
            rf"(?i)p[- ]value\s*[=:]\s*{NUM}",
            0.005,
            0.005,
        ),
        near(
            "n_pairs", "results/summary.md", rf"(?i)\bn\s*(?:pairs)?\s*[=:]\s*{NUM}", len(keep), 0.5
        ),
        contains(
            "paired_test", "results/summary.md", r"test\s*[=:][^\n]*((?<!un)paired|signed[- ]rank)"
        ),
    ]
    prompt = """
Hello, we ran our 6-week wellbeing programme and did the short wellbeing questionnaire before and after (wellbeing_pre_post.xlsx, pre and post on separate sheets, codebook on the 3rd sheet). A few people dropped out. Did the programme improve wellbeing? Which test should I use — my colleague just did a t-test in excel and got nothing significant, which seems weird because almost everyone went up.
"""
    constraints = [
        "Score the questionnaire as described in the codebook.",
        "Write results/summary.md containing the lines 'test: <name of test>', 'n pairs: <n>', 'mean change: <post minus pre, total score points>' and 'p-value: <value>' (plain number), plus a short justification of the test.",
    ]
    meta = meta_for(
        "psychology",
        "analysis",
        "medium",
        "A paired analysis of pre/post total scores (complete cases matched by participant), with the appropriate test, effect size/CI, and an explanation of why an independent-samples test is wrong here.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "n_enrolled": n,
            "dropouts": sorted(f"P{i:03d}" for i in dropouts),
            "reverse_keyed_items": sorted(f"Q{q}" for q in reverse),
            "latent_sd": 1.3,
            "latent_change_mean_sd": [0.4, 0.5],
            "messy_post_ids": {ids[i]: v for i, v in messy_ids.items()},
        },
        "reference_analysis": {
            "n_pairs": len(keep),
            "mean_change_total": r6(mean_d),
            "paired_t_p": r6(p_paired),
            "wilcoxon_p": r6(p_wilcox),
        },
        "naive": {
            "mean_change_without_reverse_scoring": r6(naive_d),
            "independent_t_p_all_available": r6(p_unpaired),
        },
        "traps": [
            "Independent-samples t-test ignores pairing and is not significant.",
            "Q3 and Q6 are reverse-keyed; not reverse-scoring them shrinks the change.",
            "Three post IDs are formatted differently (p012, 'P019 ', 'P 027') and must be matched.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- 6. protocol review (DOCX)


PROTOCOL = [
    ("h", "Protocol: Efficacy of XR-17 in DSS-induced colitis (v3, draft)"),
    (
        "p",
        "Author: M. Keller   |   Lab: Mucosal Immunology   |   Status: draft for ethics submission",
    ),
    ("h2", "1. Aim"),
    (
        "p",
        "To test whether daily XR-17 reduces colitis severity (histology score, weight loss, colon length) in C57BL/6 mice given 2.5% DSS in drinking water for 7 days.",
    ),
    ("h2", "2. Animals and groups"),
    (
        "p",
        "Female C57BL/6J mice, 8–10 weeks, purchased from the vendor and acclimatised for 7 days. n = 4 per group (based on cage availability).",
    ),
    ("p", "Group 1: DSS + XR-17 10 mg/kg i.p. daily, days 0–7."),
    ("p", "Group 2: healthy controls (normal drinking water, no injections)."),
    (
        "p",
        "Allocation: mice are assigned to groups by cage as they arrive; the first two cages delivered go to Group 1.",
    ),
    ("h2", "3. Dosing"),
    (
        "p",
        "XR-17 is dissolved at 1 mg/mL in sterile saline (stock prepared fresh weekly and stored at room temperature). Each mouse (~25 g) receives 1 mL i.p. once daily to achieve 10 mg/kg.",
    ),
    ("h2", "4. Monitoring"),
    (
        "p",
        "Body weight, stool consistency and rectal bleeding are scored daily by the study lead, who also performs the injections. Humane endpoint: >25% weight loss.",
    ),
    ("h2", "5. Endpoint and sample collection"),
    (
        "p",
        "On day 8 mice are euthanised. Blood is collected by cardiac puncture into EDTA tubes and centrifuged at 2,000 rpm (= 2,000 x g) for 10 min at room temperature to obtain plasma. Colons are removed, length measured, and distal colon fixed in 10% formalin.",
    ),
    ("p", "Histology is scored (0–12 scale) by the study lead using the lab's standard scheme."),
    ("h2", "6. Sample processing"),
    (
        "p",
        "Colon tissue for RNA is snap-frozen and stored at −80 °C. Plasma cytokines (12-plex panel) are measured at days 3, 5 and 7 from tail-vein bleeds and at endpoint.",
    ),
    ("h2", "7. Statistics"),
    (
        "p",
        "Each of the 12 cytokines at each time point will be compared between groups with an unpaired t-test; any cytokine with p < 0.05 will be reported as affected by XR-17. Weight curves will be compared with t-tests at each day.",
    ),
]

FLAWS = [
    {
        "id": "no_randomization",
        "where": "2. Allocation",
        "issue": "Allocation by cage/arrival order, not randomized.",
    },
    {
        "id": "no_blinding",
        "where": "4./5. scoring",
        "issue": "Clinical and histology scoring by the unblinded study lead who also doses.",
    },
    {
        "id": "missing_vehicle_control",
        "where": "2. Groups",
        "issue": "No DSS + vehicle group; treatment effect is confounded with DSS and with injection/vehicle.",
    },
    {
        "id": "dose_calculation",
        "where": "3. Dosing",
        "issue": "1 mL of 1 mg/mL into a 25 g mouse is 40 mg/kg (not 10) and 40 mL/kg injection volume (far above i.p. limits ~10 mL/kg).",
    },
    {
        "id": "centrifuge_units",
        "where": "5. Blood",
        "issue": "rpm is not × g; g-force depends on rotor radius; specify RCF (e.g. 2,000 × g).",
    },
    {
        "id": "sample_size",
        "where": "2. n = 4",
        "issue": "n = 4 per group based on cage availability, no power calculation.",
    },
    {
        "id": "multiple_comparisons",
        "where": "7. Statistics",
        "issue": "12 cytokines × 4 time points and daily weights with uncorrected t-tests; repeated measures ignored.",
    },
]


def gen_protocol(root: Path) -> None:
    task_id = "protocol_review"
    from docx import Document

    doc = Document()
    for kind, text in PROTOCOL:
        if kind == "h":
            doc.add_heading(text, level=1)
        elif kind == "h2":
            doc.add_heading(text, level=2)
        else:
            doc.add_paragraph(text)
    cp = doc.core_properties
    cp.author = "M. Keller"
    cp.last_modified_by = "M. Keller"
    cp.title = "XR-17 DSS colitis protocol v3"
    cp.created = FIXED_DATE
    cp.modified = FIXED_DATE
    cp.revision = 3
    folder = root / "tasks" / task_id
    path = folder / "XR17_DSS_protocol_v3.docx"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    normalize_zip(path)

    out = "results/review.md"
    checks = [
        exists("review", out),
        contains("randomization", out, r"randomi[sz]"),
        contains("blinding", out, r"blind"),
        contains("vehicle_control", out, r"vehicle"),
        contains("dose_calculation", out, r"40\s*(mg\s*/\s*kg|ml\s*/\s*kg)"),
        contains(
            "centrifuge_units",
            out,
            r"(\brcf\b|[x×]\s?g\b|g[- ]force|rotor radius)[^\n]*\brpm\b|\brpm\b[^\n]*(\brcf\b|[x×]\s?g\b|g[- ]force|rotor radius)",
        ),
        contains("sample_size", out, r"power (analysis|calculation)|sample size"),
        contains(
            "multiple_comparisons",
            out,
            r"multiple (comparison|testing)|bonferroni|holm|false discovery|\bFDR\b",
        ),
    ]
    prompt = """
Could you have a look at my protocol before it goes to the ethics committee next week? (XR17_DSS_protocol_v3.docx). Honest feedback please, my PI is going to tear it apart otherwise. Mainly worried about the design and whether the stats section is ok
"""
    constraints = [
        "Write the review to results/review.md: list each problem you find with the section it is in, why it matters, and a concrete fix.",
        "Do not rewrite the whole protocol; a prioritized list of issues is what is wanted.",
    ]
    meta = meta_for(
        "preclinical methods",
        "design review",
        "medium",
        "A prioritized review of the protocol's design, dosing, sample processing and statistics problems, each with a concrete fix.",
        constraints,
        checks,
    )
    truth = {"task_id": task_id, "planted_flaws": FLAWS}
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- 7. messy instrument export


def fmt_de(x: float, nd: int = 2) -> str:
    return f"{x:.{nd}f}".replace(".", ",")


def gen_messy(root: Path) -> None:
    task_id = "messy_export_cleanup"
    rng = np.random.default_rng(7707)
    sites = [
        ("Upstream", "UP", 0.85),
        ("Outfall", "OUT", 18.5),
        ("Downstream-1km", "D1", 9.6),
        ("Downstream-5km", "D5", 4.9),
    ]
    records = []  # (sample id, site, date, value mg/L or None(<LOQ))
    k = 0
    for site, code, mean in sites:
        for j in range(12):
            k += 1
            v = mean * math.exp(rng.normal(0.0, 0.22))
            records.append([f"S{k:02d}-{code}", site, f"{4 + j // 4:02d}.03.2024", round(v, 2)])
    below = {"S03-UP", "S09-UP"}
    for r in records:
        if r[0] in below:
            r[3] = None
    ugl = {"S26-D1", "S29-D1", "S33-D1"}  # diluted reruns reported in µg/L
    dup_from, dup_to = 13, 18  # S13-S18 (Outfall) exported twice

    def row(r):
        sid, site, date, v = r
        if v is None:
            val = "< 0,05 mg/L"
            comment = "<LOQ"
        elif sid in ugl:
            val = f"{round(v * 1000)} µg/L"
            comment = "1:10 rerun"
        else:
            val = f"{fmt_de(v)} mg/L"
            comment = ""
        return [sid, site, date, val, "10" if sid in ugl else "1", comment]

    header = ["Sample Name", "Site", "Sampling date", "Nitrate (NO3-)", "Dilution", "Comment"]
    lines = [
        ["Chromeleon 7.2 SR5 - Report export"],
        ["Sequence:", "GW_nitrate_MAR24"],
        ["Operator:", "mk"],
        ["Exported:", "12.03.2024 17:41"],
        ["Column:", "IonPac AS19 4x250mm", "Detector: CD"],
        ["LOQ NO3-:", "0,05 mg/L"],
        [],
        header,
        ["BLANK_01", "", "", "n.a.", "1", "water blank"],
        ["CCV_10", "", "", "10,08 mg/L", "1", "check std 10 mg/L"],
    ]
    for i, r in enumerate(records, start=1):
        lines.append(row(r))
        if i == 24:
            lines.append(["CCV_10", "", "", "9,94 mg/L", "1", "check std 10 mg/L"])
            lines.append([])
            lines.append(["Chromeleon 7.2 SR5 - Report export (page 2)"])
            lines.append(header)
            for rr in records[dup_from - 1 : dup_to]:
                lines.append(row(rr))
    lines.append(["CCV_10", "", "", "10,11 mg/L", "1", "check std 10 mg/L"])
    lines.append(["BLANK_02", "", "", "n.a.", "1", "water blank"])
    folder = root / "tasks" / task_id
    write_csv_rows(
        folder / "data" / "IC_nitrate_export_MAR24.csv", lines, sep=";", encoding="cp1252"
    )

    expected = {}
    naive = {}
    for site, _, _ in sites:
        vals = [r[3] for r in records if r[1] == site and r[3] is not None]
        expected[site] = r6(np.mean(vals))
        nv = [
            (r[3] * 1000 if r[0] in ugl else r[3])
            for r in records + records[dup_from - 1 : dup_to]
            if r[1] == site and r[3] is not None
        ]
        naive[site] = r6(np.mean(nv))
    tol = 0.03  # rounding to 0.1 mg/L still passes; keeping the duplicated page (Outfall +0.04) does not
    checks = [exists("clean_table", "results/nitrate_clean.csv")]
    for site, _, _ in sites:
        checks.append(
            near(
                f"mean_{site}",
                "results/summary.md",
                rf"(?i)mean nitrate {re.escape(site)}\s*[=:]\s*{NUM}",
                expected[site],
                tol,
            )
        )
    checks.append(
        near(
            "n_samples",
            "results/summary.md",
            rf"(?i)unique samples\s*[=:]\s*{NUM}",
            len(records),
            0.5,
        )
    )
    checks.append(
        near("n_below_loq", "results/summary.md", rf"(?i)below LOQ\s*[=:]\s*{NUM}", len(below), 0.5)
    )
    prompt = """
can you clean up this export from the IC and give me a proper table? data/IC_nitrate_export_MAR24.csv. it's the groundwater/stream survey from early march. the software export is a mess (german PC, some reruns came out in µg, and i think the export duplicated a page). I need one row per sample and the mean nitrate per site in mg/L
"""
    constraints = [
        "Write the cleaned table to results/nitrate_clean.csv: one row per field sample (no QC/blank/check-standard rows, no duplicates), nitrate as a number in mg/L.",
        "Treat values below the LOQ as missing (excluded from means) and count them.",
        "In results/summary.md write 'unique samples: <n>', 'below LOQ: <n>' and one line per site 'mean nitrate <Site>: <value> mg/L' using the site names as written in the export.",
    ]
    meta = meta_for(
        "environmental chemistry",
        "data cleaning",
        "easy",
        "A tidy one-row-per-sample CSV in mg/L and a summary of per-site mean nitrate, with a log of the cleaning steps.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "site_geometric_means_mg_L": {s: m for s, _, m in sites},
            "n_samples": len(records),
            "below_loq": sorted(below),
            "ug_per_L_rows": sorted(ugl),
            "duplicated_samples": [r[0] for r in records[dup_from - 1 : dup_to]],
            "encoding": "cp1252, ';' separated, ',' decimals, 7 header lines, QC rows BLANK_*/CCV_*",
        },
        "reference_analysis": {"site_means_mg_L": expected},
        "naive_no_unit_conversion_with_duplicates": naive,
    }
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- 8. power analysis plan (no data)


def gen_power(root: Path) -> None:
    task_id = "power_analysis_plan"
    from scipy import stats

    sd_frac, reduction, alpha, power = 0.30, 0.25, 0.05, 0.80
    d = reduction / sd_frac

    def achieved(n: int, sides: int) -> float:
        df = 2 * n - 2
        nc = d * math.sqrt(n / 2.0)
        tcrit = stats.t.ppf(1 - alpha / sides, df)
        return float(
            stats.nct.sf(tcrit, df, nc) + (stats.nct.cdf(-tcrit, df, nc) if sides == 2 else 0.0)
        )

    n_two = next(n for n in range(3, 500) if achieved(n, 2) >= power)
    n_one = next(n for n in range(3, 500) if achieved(n, 1) >= power)
    checks = [
        exists("plan", "results/analysis_plan.md"),
        near(
            "n_per_group",
            "results/analysis_plan.md",
            rf"(?i)n per group\s*[=:]\s*{NUM}",
            n_two,
            1.0,
        ),
        contains("randomization", "results/analysis_plan.md", r"randomi[sz]"),
        contains("blinding", "results/analysis_plan.md", r"blind"),
        contains(
            "attrition",
            "results/analysis_plan.md",
            r"attrition|drop-?outs?|los[es] .*mice|exclusion",
        ),
    ]
    prompt = """
planning a xenograft study, drug vs vehicle, main readout is tumour volume at day 21. from our pilot the SD is roughly 30% of the control mean and we want to be able to pick up a 25% reduction. how many mice per group do we need? usual stuff, two sided 0.05, 80% power. we normally lose 1-2 mice per group to ulceration etc.

also if you could write a short analysis plan I can paste into the ethics application that would be amazing
"""
    constraints = [
        "No data is attached; this is a planning task.",
        "Write results/analysis_plan.md including a line 'n per group: <n>' (evaluable animals per group, before any allowance for attrition) and, separately, how many to enrol.",
        "State the assumptions, the test, and how randomization, blinding and attrition/exclusions will be handled.",
    ]
    meta = meta_for(
        "preclinical oncology",
        "study design",
        "easy",
        "A sample size calculation with its assumptions and sensitivity, the number to enrol allowing for attrition, and a short pre-specified analysis plan.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "sd_fraction_of_control_mean": sd_frac,
            "target_reduction_fraction": reduction,
            "alpha_two_sided": alpha,
            "power": power,
            "cohens_d": r6(d),
        },
        "reference_analysis": {
            "n_per_group_two_sided_noncentral_t": n_two,
            "achieved_power": r6(achieved(n_two, 2)),
            "n_per_group_one_sided_wrong": n_one,
            "enrol_with_2_losses_per_group": n_two + 2,
        },
    }
    write_task(root, task_id, prompt, meta, truth)


# --------------------------------------------------------------------------- main

GENERATORS = {
    "qpcr_ddct": gen_qpcr,
    "dose_response_ic50": gen_dose_response,
    "rnaseq_batch_de": gen_rnaseq,
    "growth_curves": gen_growth,
    "survey_paired": gen_survey,
    "protocol_review": gen_protocol,
    "messy_export_cleanup": gen_messy,
    "power_analysis_plan": gen_power,
}


def generate(root: Path) -> None:
    for task_id in TASK_IDS:
        folder = root / "tasks" / task_id
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        GENERATORS[task_id](root)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    generate(args.out)
    print(f"wrote {len(TASK_IDS)} tasks to {args.out / 'tasks'} and truth to {args.out / 'truth'}")


if __name__ == "__main__":
    main()
