"""Differential expression KO vs WT, adjusting for sequencing run (batch).

No DESeq2/limma available, so this is a limma-style analysis in Python:
median-of-ratios size factors -> log2 normalized counts -> per-gene linear model
~ batch + genotype -> empirical-Bayes moderated t (Smyth 2004) -> BH FDR.

Run from the workspace root:  python3 solve.py
Reads counts_raw.csv and sample_sheet.csv, writes results/.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import special, stats

os.makedirs("results", exist_ok=True)
counts = pd.read_csv("counts_raw.csv", index_col=0)
sheet = pd.read_csv("sample_sheet.csv")
sheet["sample"] = sheet["sample"].astype(str).str.strip()
counts = counts[sheet["sample"].tolist()]  # align column order to the sheet
assert counts.index.is_unique, "duplicated gene symbols"

print("design (genotype x batch):")
print(pd.crosstab(sheet["genotype"], sheet["batch"]).to_string())

# --- filter lowly expressed genes: >= 10 counts in at least as many samples as the smallest group
min_n = int(sheet["genotype"].value_counts().min())
keep = (counts >= 10).sum(axis=1) >= min_n
cts = counts[keep]
print(f"{keep.sum()} of {len(keep)} genes pass the expression filter")

# --- median-of-ratios size factors (robust to composition changes from strongly DE genes)
pos = cts[(cts > 0).all(axis=1)]
logc = np.log(pos.values.astype(float))
sf = np.exp(np.median(logc - logc.mean(axis=1, keepdims=True), axis=0))
y = np.log2((cts.values + 0.5) / sf)


def fit_lm(y, X, coef):
    """OLS per gene; returns coefficient, unscaled variance factor, residual variance, residual df."""
    beta = np.linalg.lstsq(X, y.T, rcond=None)[0]
    resid = y.T - X @ beta
    d = X.shape[0] - X.shape[1]
    s2 = (resid**2).sum(axis=0) / d
    v = np.linalg.inv(X.T @ X)[coef, coef]
    return beta[coef], v, s2, d


def trigamma_inverse(x):
    """Solve trigamma(y) = x (Newton iteration as in limma)."""
    x = np.asarray(x, dtype=float)
    yv = 0.5 + 1.0 / x
    for _ in range(50):
        tri = special.polygamma(1, yv)
        dif = tri * (1.0 - tri / x) / special.polygamma(2, yv)
        yv = yv + dif
        if np.max(-dif / yv) < 1e-8:
            break
    return yv


def ebayes(s2, d):
    """Smyth's moment estimates of the prior df d0 and scale s0^2 for the gene variances."""
    z = np.log(s2)
    e = z - special.digamma(d / 2.0) + np.log(d / 2.0)
    emean = e.mean()
    evar = e.var(ddof=1) - special.polygamma(1, d / 2.0)
    if evar > 0:
        d0 = 2.0 * float(trigamma_inverse(evar))
        s0sq = float(np.exp(emean + special.digamma(d0 / 2.0) - np.log(d0 / 2.0)))
    else:
        d0, s0sq = np.inf, float(np.exp(emean))
    return d0, s0sq


def bh(p):
    p = np.asarray(p)
    m = len(p)
    o = np.argsort(p)
    q = np.empty(m)
    q[o] = np.minimum(1.0, np.minimum.accumulate((p[o] * m / np.arange(1, m + 1))[::-1])[::-1])
    return q


def de(with_batch):
    ko = (sheet["genotype"] == "KO").astype(float).values
    cols = [np.ones(len(sheet)), ko]
    if with_batch:
        for lev in sorted(sheet["batch"].unique())[1:]:
            cols.append((sheet["batch"] == lev).astype(float).values)
    X = np.column_stack(cols)
    lfc, v, s2, d = fit_lm(y, X, 1)
    d0, s0sq = ebayes(s2, d)
    if np.isfinite(d0):
        s2_post = (d0 * s0sq + d * s2) / (d0 + d)
        df_tot = d + d0
    else:
        s2_post, df_tot = np.full_like(s2, s0sq), np.inf
    t = lfc / np.sqrt(s2_post * v)
    p = 2.0 * stats.t.sf(np.abs(t), df_tot)
    res = pd.DataFrame(
        {
            "gene": cts.index,
            "log2FC_KO_vs_WT": lfc,
            "se": np.sqrt(s2_post * v),
            "mod_t": t,
            "pvalue": p,
            "padj_BH": bh(p),
            "mean_log2_norm": y.mean(axis=1),
        }
    )
    return res.sort_values("pvalue").reset_index(drop=True), d0, s0sq


res, d0, s0sq = de(True)
naive, _, _ = de(False)
res["significant_FDR5"] = res["padj_BH"] < 0.05
res.to_csv("results/de_results_KO_vs_WT_batch_adjusted.csv", index=False, float_format="%.6g")
sig = res[res["significant_FDR5"]]
fav = res[res["gene"] == "Cxcl10"].iloc[0]
fav_naive = naive[naive["gene"] == "Cxcl10"].iloc[0]
n_naive = int((naive["padj_BH"] < 0.05).sum())
tcrit = stats.t.ppf(0.975, 16 - 3 + d0) if np.isfinite(d0) else 1.96

# --- figures: PCA (batch vs genotype) and volcano
yc = y - y.mean(axis=1, keepdims=True)
top = np.argsort(yc.var(axis=1))[::-1][:500]
u, sv, vt = np.linalg.svd(yc[top], full_matrices=False)
pcs = vt[:2].T * sv[:2]
expl = sv**2 / (sv**2).sum()
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
ax = axes[0]
for g, marker in (("WT", "o"), ("KO", "^")):
    for b, color in zip(sorted(sheet["batch"].unique()), ("C0", "C1"), strict=False):
        m = ((sheet["genotype"] == g) & (sheet["batch"] == b)).values
        ax.scatter(pcs[m, 0], pcs[m, 1], marker=marker, color=color, label=f"{g} {b}", s=45)
ax.set_xlabel(f"PC1 ({expl[0] * 100:.0f}%)")
ax.set_ylabel(f"PC2 ({expl[1] * 100:.0f}%)")
ax.set_title("PCA, top 500 variable genes")
ax.legend(fontsize=8)
ax = axes[1]
ax.scatter(res["log2FC_KO_vs_WT"], -np.log10(res["pvalue"]), s=6, color="grey")
ax.scatter(sig["log2FC_KO_vs_WT"], -np.log10(sig["pvalue"]), s=10, color="C3", label="FDR < 5%")
ax.annotate("Cxcl10", (fav["log2FC_KO_vs_WT"], -np.log10(fav["pvalue"])), fontsize=8)
ax.set_xlabel("log2 FC (KO vs WT), batch-adjusted")
ax.set_ylabel("-log10 p")
ax.set_title("Volcano")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig("results/pca_volcano.png", dpi=120)

up = sig[sig["log2FC_KO_vs_WT"] > 0]
down = sig[sig["log2FC_KO_vs_WT"] < 0]
design = "; ".join(
    f"{g}: " + ", ".join(f"{b} n={n}" for b, n in row.items())
    for g, row in pd.crosstab(sheet["genotype"], sheet["batch"]).iterrows()
)
lfc = fav["log2FC_KO_vs_WT"]
sig_genes = "\n".join(
    f"- {r.gene}: {r.log2FC_KO_vs_WT:+.2f} (padj {r.padj_BH:.2g})"
    for r in sig.sort_values("log2FC_KO_vs_WT").itertuples()
)
summary = f"""\
# RNA-seq DE: KO vs WT (liver), adjusted for sequencing run

Design: {design}
Genotype and sequencing run are strongly confounded (7 of 8 WT in run1, 7 of 8 KO in run2), and the run effect is large
(PC1 separates runs). The model is ~ batch + genotype, so the KO effect is estimated within runs, mostly from the
one WT in run2 and the one KO in run1: estimates are unbiased but less precise than in a balanced design.

Method: genes with >= 10 counts in >= 8 samples kept ({len(cts)} genes); median-of-ratios size factors; log2 normalized counts; per-gene linear model ~ batch + genotype;
empirical-Bayes moderated t (prior df {d0:.1f}); Benjamini-Hochberg FDR.

significant genes (FDR < 0.05): {len(sig)} ({len(up)} up, {len(down)} down in KO)
log2FC Cxcl10: {lfc:.2f} (95% CI {lfc - tcrit * fav["se"]:.2f} to {lfc + tcrit * fav["se"]:.2f}; fold {2**lfc:.2f}x; padj = {fav["padj_BH"]:.2g})

Significant genes (log2FC, padj):
{sig_genes}

For comparison, ignoring batch (~ genotype only) would call {n_naive} genes at FDR 5% and give Cxcl10 log2FC {fav_naive["log2FC_KO_vs_WT"]:.2f}: most of those calls are run effects, not genotype effects. Do not use that analysis.

Caveats: a limma-trend-like approximation (no voom precision weights, no NB GLM); with only one WT in run2 and one KO in
run1, any sample-specific problem in those two libraries would propagate into every estimate; check them in QC.
Ideally confirm key genes (Cxcl10) by qPCR on independent samples.

Files: results/de_results_KO_vs_WT_batch_adjusted.csv, results/pca_volcano.png
"""
with open("results/summary.md", "w", encoding="utf-8") as fh:
    fh.write(summary)
# the headline only: design, method and the key estimates, not the gene list
print("\n".join(summary.splitlines()[:14]))
