"""Dose-response: CellTiter-Glo luminescence for four compounds, one a partial inhibitor
and one inactive; the reference IC50s come from free 4PL fits.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit
from task_files import NUM, contains, exists, meta_for, near, r6, write_csv_rows, write_task


def four_pl(x, bottom, top, ic50, hill):
    return bottom + (top - bottom) / (1.0 + (x / ic50) ** hill)


def fitted(ic50: float) -> float:
    """A fitted IC50, rounded where the optimiser's last digits no longer move it.

    curve_fit's result shifts in the sixth decimal between scipy releases; three decimals
    keep the committed task and truth the same whichever release generates them.
    """
    return round(float(ic50), 3)


def generate(root: Path) -> None:
    """Write tasks/dose_response_ic50/ and truth/dose_response_ic50.json under root."""
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
        ref[cpd] = fitted(10 ** popt[2])
        xm, ym = x[::3], y.reshape(-1, 3).mean(axis=1)
        popt, _ = curve_fit(
            f4, xm, ym, p0=[5.0, 100.0, float(np.median(x)), 1.0], bounds=bounds, maxfev=20000
        )
        ref_means[cpd] = fitted(10 ** popt[2])
        popt, _ = curve_fit(
            lambda lx, top, lic50, hill: f4(lx, 0.0, top, lic50, hill),
            x,
            y,
            p0=[100.0, float(np.median(x)), 1.0],
            bounds=([0.0, -5.0, 0.1], [200.0, 4.0, 10.0]),
            maxfev=20000,
        )
        naive[cpd] = fitted(10 ** popt[1])

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
