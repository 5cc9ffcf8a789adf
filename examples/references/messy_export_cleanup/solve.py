"""Clean a Chromeleon ion-chromatography export (nitrate) into a tidy table + per-site summary.

The export is cp1252-encoded, ';'-separated with ',' decimals, has a metadata header, QC rows
(blanks, check standards), values with units in the cell (mg/L and µg/L), '< LOQ' entries, and a
second "page" that repeats some samples.

Run from the workspace root:  python3 solve.py
"""

import csv
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

SRC = "data/IC_nitrate_export_MAR24.csv"
os.makedirs("results", exist_ok=True)
with open(SRC, "rb") as fh:
    raw_bytes = fh.read()
try:
    text = raw_bytes.decode("utf-8")
    encoding = "utf-8"
except UnicodeDecodeError:
    text = raw_bytes.decode("cp1252")
    encoding = "cp1252"
rows = list(csv.reader(text.splitlines(), delimiter=";"))

log = [f"- Read {SRC} as {encoding}, ';'-separated, {len(rows)} lines."]
header_idx = [i for i, r in enumerate(rows) if r and r[0].strip() == "Sample Name"]
header = rows[header_idx[0]]
log.append(
    f"- Found the column header on line(s) {', '.join(str(i + 1) for i in header_idx)}; metadata lines above line {header_idx[0] + 1} dropped."
)
records = []
for i, r in enumerate(rows):
    if (
        i in header_idx
        or i < header_idx[0]
        or not any(c.strip() for c in r)
        or len(r) < len(header)
    ):
        continue
    records.append(dict(zip(header, [c.strip() for c in r], strict=False), source_line=i + 1))
df = pd.DataFrame(records)

qc_mask = df["Sample Name"].str.match(r"^(BLANK|CCV)", case=False) | (df["Site"] == "")
qc = df[qc_mask]
df = df[~qc_mask].copy()
log.append(
    f"- Removed {len(qc)} QC rows (blanks, CCV check standards): "
    + ", ".join(qc["Sample Name"])
    + "."
)

UNIT = {"mg/l": 1.0, "µg/l": 1e-3, "ug/l": 1e-3}


def parse_value(cell):
    """'4,35 mg/L' -> (4.35, False); '2310 µg/L' -> (2.31, False); '< 0,05 mg/L' -> (nan, True)."""
    s = cell.replace("\xa0", " ").strip()
    below = s.startswith("<")
    m = re.match(r"^<?\s*([\d.,]+)\s*([mµu]g/l)$", s, flags=re.I)
    if not m:
        return np.nan, False, ""
    num = (
        float(m.group(1).replace(".", "").replace(",", "."))
        if "," in m.group(1)
        else float(m.group(1))
    )
    unit = m.group(2).lower()
    return (np.nan if below else num * UNIT[unit]), below, unit


parsed = df["Nitrate (NO3-)"].map(parse_value)
df["nitrate_mg_L"] = [p[0] for p in parsed]
df["below_LOQ"] = [p[1] for p in parsed]
df["reported_unit"] = [p[2] for p in parsed]
n_ug = int((df["reported_unit"] != "mg/l").sum())
log.append(
    f"- Parsed values: decimal commas converted; {n_ug} values reported in µg/L converted to mg/L (÷1000; these are the 1:10 reruns)."
)

# duplicates: same sample exported twice (page 2). Check they are identical before dropping.
key_cols = ["Sample Name", "Site", "Sampling date", "Nitrate (NO3-)"]
dups = df[df.duplicated("Sample Name", keep=False)]
conflict = dups.groupby("Sample Name")[key_cols].nunique().gt(1).any(axis=1)
assert not conflict.any(), f"conflicting duplicates: {list(conflict[conflict].index)}"
n_dup_rows = int(df.duplicated("Sample Name").sum())
df = df.drop_duplicates("Sample Name", keep="first")
log.append(
    f"- Dropped {n_dup_rows} exact duplicate rows (samples {', '.join(sorted(dups['Sample Name'].unique()))} were exported twice, identical values)."
)

df["sampling_date"] = pd.to_datetime(df["Sampling date"], format="%d.%m.%Y").dt.strftime("%Y-%m-%d")
clean = pd.DataFrame(
    {
        "sample_id": df["Sample Name"],
        "site": df["Site"],
        "sampling_date": df["sampling_date"],
        "nitrate_mg_L": df["nitrate_mg_L"].round(4),
        "below_LOQ": df["below_LOQ"],
        "dilution": pd.to_numeric(df["Dilution"], errors="coerce").astype(int),
        "comment": df["Comment"],
    }
).sort_values("sample_id")
clean.to_csv("results/nitrate_clean.csv", index=False)

site_order = list(dict.fromkeys(clean["site"]))
summ = (
    clean.groupby("site")
    .agg(
        n_samples=("sample_id", "size"),
        n_below_LOQ=("below_LOQ", "sum"),
        n_quantified=("nitrate_mg_L", "count"),
        mean_mg_L=("nitrate_mg_L", "mean"),
        sd_mg_L=("nitrate_mg_L", "std"),
        median_mg_L=("nitrate_mg_L", "median"),
        min_mg_L=("nitrate_mg_L", "min"),
        max_mg_L=("nitrate_mg_L", "max"),
    )
    .loc[site_order]
)
summ.reset_index().to_csv("results/nitrate_site_summary.csv", index=False, float_format="%.3f")

ccv = qc[qc["Sample Name"].str.startswith("CCV")]["Nitrate (NO3-)"].map(lambda c: parse_value(c)[0])

fig, ax = plt.subplots(figsize=(6.5, 4))
for k, s in enumerate(site_order):
    v = clean.loc[clean["site"] == s, "nitrate_mg_L"].dropna()
    ax.scatter(np.full(len(v), k) + np.linspace(-0.15, 0.15, len(v)), v, color=f"C{k}", s=18)
    ax.hlines(v.mean(), k - 0.3, k + 0.3, color="k")
ax.set_xticks(range(len(site_order)))
ax.set_xticklabels(site_order, rotation=15)
ax.set_ylabel("nitrate (mg/L NO3-)")
ax.axhline(50, color="C3", ls="--", lw=0.8)
ax.text(
    len(site_order) - 0.5,
    50,
    "EU drinking-water limit 50 mg/L",
    color="C3",
    fontsize=7,
    ha="right",
    va="bottom",
)
ax.set_title("Nitrate by site (line = mean of quantified samples)")
fig.tight_layout()
fig.savefig("results/nitrate_by_site.png", dpi=120)

below_loq = clean.loc[clean["below_LOQ"], "sample_id"]
site_means = "\n".join(
    f"mean nitrate {site}: {r['mean_mg_L']:.3f} mg/L (SD {r['sd_mg_L']:.2f}, median {r['median_mg_L']:.2f}, n = {int(r['n_quantified'])} quantified of {int(r['n_samples'])})"
    for site, r in summ.iterrows()
)
cleaning_log = "\n".join(log)
summary = f"""\
# Nitrate survey, early March 2024 — cleaned

unique samples: {len(clean)}
below LOQ: {len(below_loq)} (LOQ 0.05 mg/L; {", ".join(below_loq)}; excluded from means)

{site_means}

Cleaning log:
{cleaning_log}
- Check standards (10 mg/L): {", ".join(f"{v:.2f}" for v in ccv)} mg/L (within ±2%), blanks n.a.; run looks fine.

Caveats: values are reported as NO3- (not NO3-N). Upstream mean excludes 2 <LOQ samples, so it is biased slightly high;
substituting LOQ/2 would give a lower bound. Means of 12 grab samples per site over 3 days do not capture seasonal variation.

Files: results/nitrate_clean.csv, results/nitrate_site_summary.csv, results/nitrate_by_site.png
"""
with open("results/summary.md", "w", encoding="utf-8") as fh:
    fh.write(summary)
print(summary, end="")
