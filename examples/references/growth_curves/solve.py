"""Maximum specific growth rates from a Gen5 OD600 kinetic export.

Per well: subtract the mean of the media-only blank wells at each time point, take ln(OD - blank)
where it is reliably above noise (>= 0.02), slide a 1.5 h window (7 reads) and take the steepest
linear-regression slope = µmax (1/h). Lag = time where the tangent at µmax crosses ln(initial OD).
Wells that never grow are flagged and excluded from the strain means.

Run from the workspace root:  python3 solve.py
"""

import os
from io import StringIO

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

os.makedirs("results", exist_ok=True)
with open("data/OD600_growth_0312.csv", encoding="utf-8") as fh:
    lines = fh.read().splitlines()
start = next(
    i for i, line in enumerate(lines) if line.startswith("Time,T")
)  # not the "Time,10:02 AM" metadata line
od = pd.read_csv(StringIO("\n".join(lines[start:])))
hms = od["Time"].str.split(":", expand=True).astype(float)
t = (hms[0] + hms[1] / 60.0 + hms[2] / 3600.0).values
temp_col = [c for c in od.columns if c.startswith("T")][1]  # 'T° 600'

layout = pd.read_csv("data/plate_layout.csv", index_col=0, dtype=str)
well_strain = {}
for row in layout.index:
    for col in layout.columns:
        v = layout.loc[row, col]
        if isinstance(v, str) and v.strip():
            well_strain[f"{row}{int(col)}"] = v.strip()
blanks = [w for w, s in well_strain.items() if s.lower() == "blank"]
wells = [w for w, s in well_strain.items() if s.lower() != "blank"]
missing = [w for w in wells + blanks if w not in od.columns]
assert not missing, f"wells in layout but not in export: {missing}"

blank = od[blanks].mean(axis=1).values
print(f"blank OD600 mean {blank.mean():.4f} (sd between blank wells {od[blanks].values.std():.4f})")

WIN = 7  # 7 reads = 1.5 h
THRESH = 0.02


def max_rate(y_net):
    ln = np.where(y_net > THRESH, np.log(np.clip(y_net, 1e-9, None)), np.nan)
    best = (np.nan, None)
    for i in range(len(t) - WIN + 1):
        seg = ln[i : i + WIN]
        if np.isnan(seg).any():
            continue
        slope, intercept = np.polyfit(t[i : i + WIN], seg, 1)
        if np.isnan(best[0]) or slope > best[0]:
            best = (slope, (i, intercept))
    return best


records = []
for w in wells:
    net = od[w].values - blank
    growth = net.max()
    rec = {"well": w, "strain": well_strain[w], "max_net_OD": growth}
    if growth < 0.05:
        rec.update(
            mu_per_h=np.nan,
            lag_h=np.nan,
            excluded=True,
            note="no growth (net OD600 < 0.05 throughout)",
        )
    else:
        mu, (i, intercept) = max_rate(net)
        ln0 = np.log(max(np.median(net[:4]), 1e-3))
        lag = (ln0 - intercept) / mu
        rec.update(
            mu_per_h=mu,
            doubling_time_min=np.log(2) / mu * 60,
            lag_h=max(lag, 0.0),
            window_start_h=t[i],
            excluded=False,
            note="",
        )
    records.append(rec)
per_well = pd.DataFrame(records)
per_well.to_csv("results/growth_rates_per_well.csv", index=False, float_format="%.4f")

used = per_well[~per_well["excluded"]]
agg = used.groupby("strain").agg(
    n_wells=("mu_per_h", "size"),
    mu_mean=("mu_per_h", "mean"),
    mu_sd=("mu_per_h", "std"),
    lag_mean=("lag_h", "mean"),
    max_net_OD_mean=("max_net_OD", "mean"),
)
order = [s for s in ["WT", "dmutA", "dmutB", "dmutB_comp"] if s in agg.index] + [
    s for s in agg.index if s not in ("WT", "dmutA", "dmutB", "dmutB_comp")
]
agg = agg.loc[order]
agg["doubling_time_min"] = np.log(2) / agg["mu_mean"] * 60
agg.reset_index().to_csv("results/growth_rates_per_strain.csv", index=False, float_format="%.4f")

# Welch t-test dmutA vs WT on per-well rates (n=3 each; descriptive)
wt = used.loc[used["strain"] == "WT", "mu_per_h"].values
ma = used.loc[used["strain"] == "dmutA", "mu_per_h"].values
tt = stats.ttest_ind(ma, wt, equal_var=False)

# --- figure
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for k, s in enumerate(order):
    for w in per_well.loc[per_well["strain"] == s, "well"]:
        net = od[w].values - blank
        ex = bool(per_well.loc[per_well["well"] == w, "excluded"].iloc[0])
        axes[0].plot(
            t,
            od[w].values,
            color=f"C{k}",
            lw=1,
            ls=":" if ex else "-",
            label=s if w.endswith(("2", "5")) else None,
        )
        axes[1].plot(
            t, np.log(np.clip(net, 1e-3, None)), color=f"C{k}", lw=1, ls=":" if ex else "-"
        )
axes[0].plot(t, blank, color="k", lw=1, label="blank (LB)")
axes[0].set_xlabel("time (h)")
axes[0].set_ylabel("OD600 (raw)")
axes[0].legend(fontsize=8)
axes[1].set_xlabel("time (h)")
axes[1].set_ylabel("ln(OD600 − blank)")
axes[1].axhline(np.log(THRESH), color="grey", lw=0.6)
axes[1].set_title("dotted = excluded well")
fig.tight_layout()
fig.savefig("results/growth_curves.png", dpi=120)

excl = per_well[per_well["excluded"]]
rates = "\n".join(
    f"growth rate {strain}: {r['mu_mean']:.3f} per h (SD {r['mu_sd']:.3f}, n = {int(r['n_wells'])} wells; "
    f"doubling time {r['doubling_time_min']:.0f} min; lag ≈ {r['lag_mean']:.1f} h)"
    for strain, r in agg.iterrows()
)
exclusions = "".join(
    f"Excluded well {r.well} ({r.strain}): {r.note}; likely not inoculated. Its strain mean uses the remaining wells.\n"
    for r in excl.itertuples()
)
mu_a, mu_wt = agg.loc["dmutA", "mu_mean"], agg.loc["WT", "mu_mean"]
summary = f"""\
# Growth rates (OD600, 37 °C, 15 min reads, 18 h)

Method: blank-subtracted OD (mean of D2–D4, LB only) per time point; µmax = steepest slope of ln(OD − blank)
over a sliding 1.5 h window (7 reads) restricted to OD − blank > {THRESH}; strain value = mean of replicate wells (± SD).
Units: natural-log OD per hour (1/h); doubling time = ln2/µ.

{rates}

{exclusions}
dmutA vs WT: µmax {mu_a:.2f} vs {mu_wt:.2f} per h ({mu_a / mu_wt * 100:.0f}% of WT; Welch t = {tt.statistic:.1f}, p = {tt.pvalue:.2g}, n = 3 wells each).
dmutB grows at about the WT rate but with a longer lag; the complemented strain restores the WT lag.

Caveats: replicate wells are technical (same plate, same culture?); biological replicates on separate days are needed
before claiming a difference. OD600 above ~0.8 in a plate reader is non-linear, but µmax is taken well below that.

Files: results/growth_rates_per_well.csv, results/growth_rates_per_strain.csv, results/growth_curves.png
"""
with open("results/summary.md", "w", encoding="utf-8") as fh:
    fh.write(summary)
print(summary, end="")
