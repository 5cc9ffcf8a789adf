"""Sample size and analysis plan for a two-arm xenograft study (no data attached).

Run from the workspace root:  python3 solve.py
Writes results/analysis_plan.md, results/sample_size_sensitivity.csv, results/power_curve.png.
"""

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestIndPower

os.makedirs("results", exist_ok=True)
ALPHA, POWER = 0.05, 0.80
SD_FRAC, REDUCTION = 0.30, 0.25  # SD = 30% of control mean; detect 25% reduction of the mean
LOSSES_PER_GROUP = 2  # "we normally lose 1-2 mice per group"


def power_exact(n, d, alpha=ALPHA):
    """Two-sided two-sample t-test power from the noncentral t distribution (n may be an array)."""
    n = np.asarray(n, dtype=float)
    df = 2 * n - 2
    nc = d * np.sqrt(n / 2.0)
    tcrit = stats.t.ppf(1 - alpha / 2, df)
    return stats.nct.sf(tcrit, df, nc) + stats.nct.cdf(-tcrit, df, nc)


# n = 2 (df = 2) and very large noncentralities (> ~25) make old scipy's nct return nan with a warning
NS = np.arange(3, 151)


def n_exact(d, power=POWER):
    """Smallest n per group reaching the target power."""
    ok = power_exact(NS, d) >= power
    if not ok.any():
        raise ValueError(f"effect size {d:.2f} needs more than {NS[-1]} per group")
    return int(NS[np.argmax(ok)])


d = REDUCTION / SD_FRAC
n = n_exact(d)
with np.errstate(
    invalid="ignore"
):  # statsmodels' root search probes df ~ 2, where old scipy's nct warns
    n_sm = TTestIndPower().solve_power(
        effect_size=d, alpha=ALPHA, power=POWER, alternative="two-sided"
    )
n_z = 2 * (stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)) ** 2 / d**2
assert math.ceil(n_sm) == n, (n_sm, n)
enrol = n + LOSSES_PER_GROUP

# sensitivity: SD 20-40% of mean, reduction 20-40%
rows = []
for sd in (0.20, 0.25, 0.30, 0.35, 0.40):
    for red in (0.20, 0.25, 0.30, 0.40):
        rows.append(
            {
                "sd_fraction": sd,
                "reduction": red,
                "cohens_d": red / sd,
                "n_per_group": n_exact(red / sd),
            }
        )
sens = pd.DataFrame(rows)
sens.to_csv("results/sample_size_sensitivity.csv", index=False, float_format="%.3f")
table = sens.pivot(index="sd_fraction", columns="reduction", values="n_per_group")

# log-scale alternative: tumour volumes are right-skewed; with CV 30%, SD(log) ~ sqrt(log(1+0.09))
sd_log = math.sqrt(math.log(1 + SD_FRAC**2))
d_log = -math.log(1 - REDUCTION) / sd_log
n_log = n_exact(d_log)

fig, ax = plt.subplots(figsize=(6, 4))
ns = np.arange(5, 45)
for sd in (0.25, 0.30, 0.35):
    ax.plot(ns, power_exact(ns, REDUCTION / sd), label=f"SD = {sd * 100:.0f}% of mean")
ax.axhline(POWER, color="grey", ls="--", lw=0.8)
ax.axvline(n, color="C1", ls=":", lw=0.8)
ax.set_xlabel("evaluable mice per group")
ax.set_ylabel("power (two-sided t-test, α = 0.05)")
ax.set_title("Detecting a 25% reduction in day-21 tumour volume")
ax.legend()
fig.tight_layout()
fig.savefig("results/power_curve.png", dpi=120)

plan = (
    f"""# Sample size and statistical analysis plan: drug vs vehicle, xenograft, tumour volume at day 21

## Sample size

Assumptions (from the pilot): SD of day-21 tumour volume = 30% of the control mean; smallest effect of interest =
25% reduction of the mean (drug vs vehicle); two-sided α = 0.05; power 80%; primary analysis a two-sample t-test.
Standardized effect size d = 0.25 / 0.30 = {d:.3f}.

n per group: {n}
(evaluable animals per group, exact noncentral-t calculation; statsmodels gives {n_sm:.1f} → {math.ceil(n_sm)};
the normal approximation gives {n_z:.1f}, which underestimates slightly.) Achieved power with {n} per group: {float(power_exact(n, d)) * 100:.1f}%.

Enrol: {enrol} mice per group ({2 * enrol} in total), allowing for the expected attrition of up to {LOSSES_PER_GROUP} mice per group
(ulceration / humane endpoints). If attrition is closer to 10–15% in your hands, {math.ceil(n / 0.85)} per group covers 15%.

Sensitivity (evaluable n per group for other SDs and effect sizes):

| SD (% of mean) | 20% reduction | 25% reduction | 30% reduction | 40% reduction |
|---|---|---|---|---|
"""
    + "\n".join(
        f"| {sd * 100:.0f}% | "
        + " | ".join(str(int(table.loc[sd, r])) for r in (0.20, 0.25, 0.30, 0.40))
        + " |"
        for sd in table.index
    )
    + f"""

The pilot SD is itself uncertain (a pilot of a few mice can easily underestimate it); if the true SD is 35%, {n_exact(REDUCTION / 0.35)} per group
are needed. Analysing log-transformed volumes (see below) with CV 30% gives {n_log} per group for the same 25% reduction, so
{n} per group is adequate for either analysis.

## Design

- Randomization: once tumours reach the enrolment size (e.g. 100–150 mm³), randomize mice to drug or vehicle with a
  computer-generated sequence, stratified (blocked) by baseline tumour volume; mix treatment groups within cages where possible.
- Blinding: caliper measurements and endpoint decisions by a person blinded to group (coded syringes/cages prepared by a
  third person). Allocation concealed until the analysis is locked.
- Caliper volume = length × width² / 2, measured 2–3 times weekly by the same blinded operator.

## Analysis plan (pre-specified)

- Primary endpoint: tumour volume at day 21 post-randomization.
- Primary analysis: comparison of drug vs vehicle by Welch two-sample t-test on log-transformed day-21 volumes
  (tumour volumes are right-skewed); report the ratio of geometric means with 95% CI. Sensitivity: ANCOVA on log
  day-21 volume adjusting for log baseline volume (more power), and an untransformed t-test.
- Attrition and exclusions: exclusion criteria defined in advance (e.g. no tumour take, death unrelated to tumour/treatment).
  Mice reaching a humane endpoint before day 21 because of tumour burden are informative dropouts: they will not be simply
  dropped; the sensitivity analysis carries their last volume forward (or uses a mixed model on the full growth curves),
  and time-to-endpoint will be reported as a secondary outcome. Numbers lost per group and reasons will be reported.
- Secondary: tumour growth curves (linear mixed model on log volume with group × time), body weight.
- α = 0.05 two-sided for the single primary comparison; secondary outcomes reported as exploratory.
- Reporting per ARRIVE 2.0.

Files: results/analysis_plan.md, results/sample_size_sensitivity.csv, results/power_curve.png
"""
)
with open("results/analysis_plan.md", "w", encoding="utf-8") as fh:
    fh.write(plan)
print(plan)
