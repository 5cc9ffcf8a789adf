"""Growth curves: a plate-reader OD600 export of Baranyi curves over a blank background,
with one well that never grew.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from task_files import NUM, contains, exists, meta_for, near, write_csv_rows, write_task, write_text


def baranyi_ln(t: np.ndarray, mu: float, lag: float, ln_n0: float, ln_nmax: float) -> np.ndarray:
    h0 = mu * lag
    a = t + np.log(np.exp(-mu * t) + np.exp(-h0) - np.exp(-mu * t - h0)) / mu
    return ln_n0 + mu * a - np.log(1.0 + (np.exp(mu * a) - 1.0) / np.exp(ln_nmax - ln_n0))


def generate(root: Path) -> None:
    """Write tasks/growth_curves/ and truth/growth_curves.json under root."""
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
