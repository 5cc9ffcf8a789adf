"""Pre/post wellbeing questionnaire: score per codebook, match participants, paired analysis.

Run from the workspace root:  python3 solve.py
Reads wellbeing_pre_post.xlsx (sheets pre, post, codebook), writes results/.
"""

import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

os.makedirs("results", exist_ok=True)
book = pd.read_excel("wellbeing_pre_post.xlsx", sheet_name=None, engine="openpyxl")
pre, post, code = book["pre"], book["post"], book["codebook"]

items = [f"Q{k}" for k in range(1, 9)]
code = code.dropna(subset=["item"])
code = code[code["item"].astype(str).str.match(r"^Q\d+$")]
reverse = code.loc[code["keying"].astype(str).str.lower().str.startswith("rev"), "item"].tolist()
print("reverse-keyed items per codebook:", reverse)


def norm_id(x):
    """'p012', 'P019 ', 'P 027' -> 'P012', 'P019', 'P027'."""
    digits = re.sub(r"\D", "", str(x))
    return f"P{int(digits):03d}" if digits else None


def score(df):
    out = df.copy()
    out["pid"] = out["ID"].map(norm_id)
    vals = out[items].apply(pd.to_numeric, errors="coerce")
    bad = ((vals < 1) | (vals > 5)).sum().sum()
    assert bad == 0, "out-of-range item responses"
    for q in reverse:
        vals[q] = 6 - vals[q]
    out["total"] = vals.sum(axis=1, min_count=len(items))  # NaN if any item missing
    return out


pre_s, post_s = score(pre), score(post)
id_fixes = [(a, b) for a, b in zip(post["ID"], post_s["pid"], strict=False) if str(a) != b]
assert pre_s["pid"].is_unique and post_s["pid"].is_unique
merged = pre_s[["pid", "total"]].merge(
    post_s[["pid", "total"]], on="pid", how="inner", suffixes=("_pre", "_post")
)
merged = merged.dropna()
dropouts = sorted(set(pre_s["pid"]) - set(post_s["pid"]))
post_only = sorted(set(post_s["pid"]) - set(pre_s["pid"]))
d = merged["total_post"] - merged["total_pre"]
n = len(d)

tt = stats.ttest_rel(merged["total_post"], merged["total_pre"])
ci = stats.t.interval(0.95, n - 1, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(n))
dz = d.mean() / d.std(ddof=1)
wil = stats.wilcoxon(
    d, zero_method="wilcox", method="approx"
)  # ties/zeros present: normal approximation
shapiro = stats.shapiro(d)
n_up, n_down, n_same = int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum())
wrong = stats.ttest_ind(post_s["total"].dropna(), pre_s["total"].dropna())

# dropout check: baseline scores of completers vs dropouts
base_drop = pre_s.loc[pre_s["pid"].isin(dropouts), "total"]
base_comp = pre_s.loc[pre_s["pid"].isin(merged["pid"]), "total"]

merged.assign(change=d).to_csv("results/paired_scores.csv", index=False)

fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for _, r in merged.iterrows():
    axes[0].plot(
        [0, 1],
        [r["total_pre"], r["total_post"]],
        color="C0" if r["total_post"] >= r["total_pre"] else "C3",
        alpha=0.5,
    )
axes[0].set_xticks([0, 1])
axes[0].set_xticklabels(["pre", "post"])
axes[0].set_ylabel("total wellbeing score (8–40)")
axes[0].set_title(f"Individual change (n = {n} pairs)")
axes[1].hist(d, bins=np.arange(d.min() - 0.5, d.max() + 1.5, 1), color="C0", alpha=0.7)
axes[1].axvline(0, color="k", lw=0.8)
axes[1].axvline(d.mean(), color="C3", lw=1.5, label=f"mean {d.mean():.2f}")
axes[1].set_xlabel("post − pre (points)")
axes[1].legend()
fig.tight_layout()
fig.savefig("results/pre_post.png", dpi=120)

id_changes = ", ".join(f"{raw_id!r} → {pid}" for raw_id, pid in id_fixes)
summary = f"""\
# Wellbeing programme: pre vs post

test: paired t-test on total scores (post − pre), two-sided; Wilcoxon signed-rank as a sensitivity check
n pairs: {n}
mean change: {d.mean():.2f} points (95% CI {ci[0]:.2f} to {ci[1]:.2f}; SD of change {d.std(ddof=1):.2f}; Cohen's dz = {dz:.2f})
p-value: {tt.pvalue:.2g} (t({n - 1}) = {tt.statistic:.2f})
Wilcoxon signed-rank: p = {wil.pvalue:.2g}; {n_up} improved, {n_down} declined, {n_same} unchanged.

Why this test: the same people were measured twice, so the observations are paired. The independent-samples
t-test your colleague ran treats pre and post as different people; the large between-person spread in wellbeing
then swamps the within-person change (independent t-test here: p = {wrong.pvalue:.2f}). The paired test analyses each
person's own change, which removes the between-person variance. The distribution of changes is roughly symmetric
(Shapiro-Wilk p = {shapiro.pvalue:.2f}); the signed-rank test agrees, so the conclusion does not hinge on normality.

Data handling:
- Scoring per codebook: items {", ".join(reverse)} are reverse-keyed and were rescored as 6 − x before summing Q1–Q8 (range 8–40).
- IDs normalized before matching ({id_changes}).
- {len(dropouts)} participants without a post questionnaire ({", ".join(dropouts)}) are excluded (complete-case analysis); {len(post_only)} post-only IDs.
- Baseline of dropouts (mean {base_drop.mean():.1f}) vs completers ({base_comp.mean():.1f}): n = {len(dropouts)} is too small to judge attrition bias.

Caveats: no control group, so the improvement cannot be attributed to the programme itself (regression to the mean,
time/season, expectation effects). A wait-list control would be needed for a causal claim.

Files: results/paired_scores.csv, results/pre_post.png
"""
with open("results/summary.md", "w", encoding="utf-8") as fh:
    fh.write(summary)
print(summary, end="")
