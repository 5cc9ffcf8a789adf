"""Messy instrument export: a cp1252 ion-chromatography report with µg/L reruns, a
duplicated page, QC rows and values below the LOQ.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from task_files import NUM, exists, meta_for, near, r6, write_csv_rows, write_task


def fmt_de(x: float, nd: int = 2) -> str:
    return f"{x:.{nd}f}".replace(".", ",")


def generate(root: Path) -> None:
    """Write tasks/messy_export_cleanup/ and truth/messy_export_cleanup.json under root."""
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
