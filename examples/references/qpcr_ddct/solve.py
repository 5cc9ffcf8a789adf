"""qPCR ΔΔCt analysis: LPS vs Ctrl, GAPDH-normalized, biological replicates as the unit.

Run from the workspace root:  python3 solve.py
Reads ct_values_fri.csv (QuantStudio export), writes results/.
"""

import os
from io import StringIO

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

REF = "GAPDH"
CTRL, TRT = "Ctrl", "LPS"
os.makedirs("results", exist_ok=True)

# --- read: skip the '*' header block of the QuantStudio export
with open("ct_values_fri.csv", encoding="utf-8") as fh:
    lines = fh.read().splitlines()
start = next(i for i, line in enumerate(lines) if line.startswith("Well,"))
raw = pd.read_csv(StringIO("\n".join(lines[start:])))
raw["Ct"] = pd.to_numeric(raw["CT"], errors="coerce")  # 'Undetermined' -> NaN

ntc = raw[raw["Task"] == "NTC"]
wells = raw[raw["Task"] != "NTC"].copy()
undetermined = wells[wells["Ct"].isna()]
wells = wells[wells["Ct"].notna()].copy()
wells["group"] = wells["Sample Name"].str.split("-").str[0]

# --- technical replicates: mean per (sample, target); note spread
tech = (
    wells.groupby(["Sample Name", "group", "Target Name"])["Ct"]
    .agg(["mean", "std", "count"])
    .reset_index()
)
wide = tech.pivot(index="Sample Name", columns="Target Name", values="mean")
groups = tech.drop_duplicates("Sample Name").set_index("Sample Name")["group"]
targets = [t for t in wide.columns if t != REF]

rows = []
for t in targets:
    dct = wide[t] - wide[REF]  # ΔCt per biological sample
    d_ctrl = dct[groups[dct.index] == CTRL].values
    d_trt = dct[groups[dct.index] == TRT].values
    ddct = d_trt.mean() - d_ctrl.mean()
    # Welch t on ΔCt (log scale), CI of ΔΔCt -> fold-change CI
    res = stats.ttest_ind(d_trt, d_ctrl, equal_var=False)
    v1, v2 = d_trt.var(ddof=1) / len(d_trt), d_ctrl.var(ddof=1) / len(d_ctrl)
    se = np.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1**2 / (len(d_trt) - 1) + v2**2 / (len(d_ctrl) - 1))
    half = stats.t.ppf(0.975, df) * se
    rows.append(
        {
            "target": t,
            "n_ctrl": len(d_ctrl),
            "n_lps": len(d_trt),
            "mean_dCt_ctrl": d_ctrl.mean(),
            "mean_dCt_lps": d_trt.mean(),
            "ddCt": ddct,
            "fold_change": 2.0 ** (-ddct),
            "fc_ci_low": 2.0 ** (-(ddct + half)),
            "fc_ci_high": 2.0 ** (-(ddct - half)),
            "welch_t": res.statistic,
            "df": df,
            "p_value": res.pvalue,
        }
    )
out = pd.DataFrame(rows)
# Holm correction across the 4 targets
order = np.argsort(out["p_value"].values)
m = len(out)
adj = np.empty(m)
running = 0.0
for rank, i in enumerate(order):
    running = max(running, min(1.0, (m - rank) * out["p_value"].values[i]))
    adj[i] = running
out["p_holm"] = adj
out.to_csv("results/fold_changes.csv", index=False, float_format="%.5g")
tech.to_csv("results/technical_replicates.csv", index=False, float_format="%.4f")

# --- figure: per-sample relative expression (2^-ΔΔCt vs ctrl mean) with group means
fig, ax = plt.subplots(figsize=(6, 4))
for k, t in enumerate(targets):
    dct = wide[t] - wide[REF]
    ctrl_mean = dct[groups[dct.index] == CTRL].mean()
    for j, g in enumerate((CTRL, TRT)):
        vals = 2.0 ** (-(dct[groups[dct.index] == g] - ctrl_mean))
        x = k * 3 + j
        ax.scatter(np.full(len(vals), x), vals, color=f"C{j}", zorder=3)
        ax.bar(x, np.exp(np.log(vals).mean()), color=f"C{j}", alpha=0.35, width=0.8)
ax.set_yscale("log", base=2)
ax.set_xticks([k * 3 + 0.5 for k in range(len(targets))])
ax.set_xticklabels(targets)
ax.axhline(1.0, color="grey", lw=0.8)
ax.set_ylabel("relative expression (2^-ΔΔCt, GAPDH)")
ax.set_title("LPS vs Ctrl (bars: geometric mean; dots: biological reps)")
ax.legend(
    handles=[plt.Rectangle((0, 0), 1, 1, color="C0"), plt.Rectangle((0, 0), 1, 1, color="C1")],
    labels=[CTRL, TRT],
)
fig.tight_layout()
fig.savefig("results/fold_changes.png", dpi=120)

# --- summary
fold_changes = "\n".join(
    f"{r.target}: fold change = {r.fold_change:.3f}, p = {r.p_value:.4g} "
    f"(95% CI {r.fc_ci_low:.2f}–{r.fc_ci_high:.2f}; Holm p = {r.p_holm:.3g})"
    for r in out.itertuples()
)
dropped = ", ".join(
    f"{sample} {target} (well {well})"
    for sample, target, well in undetermined[["Sample Name", "Target Name", "Well Position"]].values
)
ntcs = ", ".join(f"{t} {c}" for t, c in ntc[["Target Name", "CT"]].values)
ref_ct = wide[REF]
ref_shift = ref_ct[groups[wide.index] == CTRL].mean() - ref_ct[groups[wide.index] == TRT].mean()
summary = f"""\
# qPCR ΔΔCt: LPS vs Ctrl (reference gene GAPDH)

Method: technical triplicates averaged per sample (Undetermined wells dropped), ΔCt = Ct(target) − Ct(GAPDH) per biological sample,
ΔΔCt = mean ΔCt(LPS) − mean ΔCt(Ctrl), fold change = 2^−ΔΔCt. Welch t-test on ΔCt values, n = 3 biological replicates per group;
95% CI from the Welch interval of ΔΔCt. Holm-adjusted p-values across the 4 targets are in results/fold_changes.csv.

{fold_changes}

Notes:
- Excluded {len(undetermined)} Undetermined technical replicate(s): {dropped}; that sample's mean uses the remaining 2 wells.
- NTCs: {ntcs} (GAPDH NTC at ~38 is late, likely primer-dimer; no contamination concern).
- GAPDH Ct is lower in LPS samples by {ref_shift:.2f} cycles on average, consistent with higher cDNA input; normalization corrects for this, but check that GAPDH is not itself LPS-responsive.
- n = 3 per group: p-values rest on few degrees of freedom; treat borderline results (p ~ 0.01–0.05) with caution.

Files: results/fold_changes.csv, results/technical_replicates.csv, results/fold_changes.png
"""
with open("results/summary.md", "w", encoding="utf-8") as fh:
    fh.write(summary)
print(summary, end="")
