"""4PL dose-response fits and IC50s (relative, 4PL inflection) with 95% CIs.

Run from the workspace root:  python3 solve.py
Reads data/viability_CTG_0311.csv, writes results/.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats
from scipy.optimize import curve_fit

os.makedirs("results", exist_ok=True)
raw = pd.read_csv("data/viability_CTG_0311.csv")
reps = [c for c in raw.columns if c.startswith("rep")]
long = raw.melt(
    id_vars=["plate", "compound", "conc_uM"], value_vars=reps, var_name="rep", value_name="rlu"
)

bkg = long.loc[long["compound"] == "no_cells", "rlu"].mean()
veh = long.loc[long["compound"] == "DMSO", "rlu"]
veh_mean = veh.mean()
long["viability"] = (long["rlu"] - bkg) / (veh_mean - bkg) * 100.0
print(f"background {bkg:.0f} RLU, DMSO {veh_mean:.0f} RLU (CV {veh.std() / veh_mean * 100:.1f}%)")


def four_pl_log(logx, bottom, top, log_ic50, hill):
    """4PL in log10 concentration; IC50 is the inflection point (relative IC50)."""
    return bottom + (top - bottom) / (1.0 + 10.0 ** (hill * (logx - log_ic50)))


data = long[long["compound"].str.startswith("cmpd_")].copy()
data["conc_uM"] = data["conc_uM"].astype(float)
cmin, cmax = data["conc_uM"].min(), data["conc_uM"].max()
results = []
curves = {}
for cpd, d in data.groupby("compound"):
    name = cpd.replace("cmpd_", "")
    x = np.log10(d["conc_uM"].values)
    y = d["viability"].values
    rec = {
        "compound": name,
        "n_points": len(y),
        "viability_at_max_conc": d.loc[d["conc_uM"] == cmax, "viability"].mean(),
    }
    # activity gate: require a clear drop from top to the highest concentration
    drop = d.loc[d["conc_uM"] == cmin, "viability"].mean() - rec["viability_at_max_conc"]
    fitted = False
    if drop >= 20.0:
        p0 = [max(0.0, y.min()), min(120.0, y.max()), np.median(x), 1.0]
        bounds = ([-20.0, 50.0, np.log10(cmin) - 2, 0.2], [90.0, 150.0, np.log10(cmax) + 2, 5.0])
        try:
            popt, pcov = curve_fit(four_pl_log, x, y, p0=p0, bounds=bounds, maxfev=20000)
            fitted = np.all(np.isfinite(pcov))
        except RuntimeError:
            fitted = False
    if fitted:
        dof = len(y) - 4
        se = np.sqrt(np.diag(pcov))
        tcrit = stats.t.ppf(0.975, dof)
        resid = y - four_pl_log(x, *popt)
        log_ic50, se_log = popt[2], se[2]
        inside = np.log10(cmin) <= log_ic50 <= np.log10(cmax)
        rec.update(
            bottom=popt[0],
            top=popt[1],
            hill=popt[3],
            ic50_uM=10**log_ic50,
            ic50_ci_low_uM=10 ** (log_ic50 - tcrit * se_log),
            ic50_ci_high_uM=10 ** (log_ic50 + tcrit * se_log),
            log10_ic50_se=se_log,
            bottom_se=se[0],
            rmse=np.sqrt(np.mean(resid**2)),
            r2=1 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2),
            ic50_within_tested_range=bool(inside),
            status="fit" if inside else "IC50 outside tested range",
        )
        curves[name] = popt
    else:
        rec.update(status="inactive: IC50 not determinable (> 100 uM)")
    results.append(rec)
res = pd.DataFrame(results)
res.to_csv("results/ic50_4pl_fits.csv", index=False, float_format="%.5g")
long.to_csv("results/normalized_viability.csv", index=False, float_format="%.3f")

# --- figure
fig, ax = plt.subplots(figsize=(6.5, 4.5))
xs = np.linspace(np.log10(cmin) - 0.3, np.log10(cmax) + 0.3, 200)
for k, (cpd, d) in enumerate(data.groupby("compound")):
    name = cpd.replace("cmpd_", "")
    g = d.groupby("conc_uM")["viability"]
    ax.errorbar(
        g.mean().index,
        g.mean().values,
        yerr=g.std().values,
        fmt="o",
        color=f"C{k}",
        ms=4,
        capsize=2,
        label=f"{name}",
    )
    if name in curves:
        ax.plot(10**xs, four_pl_log(xs, *curves[name]), color=f"C{k}")
ax.set_xscale("log")
ax.set_xlabel("concentration (µM)")
ax.set_ylabel("viability (% of DMSO)")
ax.axhline(100, color="grey", lw=0.6)
ax.axhline(0, color="grey", lw=0.6)
ax.legend(title="compound")
ax.set_title("CellTiter-Glo 72 h, 4PL fits (mean ± SD of triplicates)")
fig.tight_layout()
fig.savefig("results/dose_response_curves.png", dpi=120)

# --- summary
fit_lines = []
for r in res.itertuples():
    if r.status == "fit":
        fit_lines.append(
            f"IC50 compound {r.compound}: {r.ic50_uM:.3g} uM (95% CI {r.ic50_ci_low_uM:.3g}-{r.ic50_ci_high_uM:.3g} uM); "
            f"Hill {r.hill:.2f}, bottom {r.bottom:.0f}%, top {r.top:.0f}%"
        )
    else:
        fit_lines.append(
            f"IC50 compound {r.compound}: not determinable (> 100 uM); inactive up to 100 uM "
            f"(viability at 100 uM {r.viability_at_max_conc:.0f}%)"
        )
fits = "\n".join(fit_lines)

partial = ""
cres = res[res["compound"] == "C"]
if len(cres) and cres["status"].iloc[0] == "fit":
    c = cres.iloc[0]
    partial = f"""
Compound C is a partial inhibitor: the curve plateaus at ~{c["bottom"]:.0f}% viability. Its relative IC50 ({c["ic50_uM"]:.3g} uM) is the midpoint
of its own response range, not the concentration giving 50% viability; an 'absolute' IC50 (50% viability) would be much higher
and is poorly constrained. Fixing the bottom at 0% would badly misplace its IC50. Efficacy (max inhibition) should be reported alongside potency.
"""

summary = f"""\
# Dose-response (CellTiter-Glo, 72 h)

Normalization: % viability = (RLU − no-cell background {bkg:.0f}) / (DMSO mean {veh_mean:.0f} − background) × 100.
Model: four-parameter logistic on log10 concentration, all four parameters free (bottom not forced to 0);
IC50 = inflection point (relative IC50); 95% CI from the asymptotic SE of log10 IC50 (t, n−4 df), back-transformed.

{fits}
{partial}
Caveats: a single plate, technical triplicates only (CIs reflect well-to-well noise, not biological/day-to-day variation);
repeat on independent days before comparing potencies formally.

Files: results/ic50_4pl_fits.csv, results/normalized_viability.csv, results/dose_response_curves.png
"""
with open("results/summary.md", "w", encoding="utf-8") as fh:
    fh.write(summary)
print(summary, end="")
