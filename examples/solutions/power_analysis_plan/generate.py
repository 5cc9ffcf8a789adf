"""Power analysis plan: no data; the reference sample size comes from the noncentral t.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

import math
from pathlib import Path

from scipy import stats
from task_files import NUM, contains, exists, meta_for, near, r6, write_task


def generate(root: Path) -> None:
    """Write tasks/power_analysis_plan/ and truth/power_analysis_plan.json under root."""
    task_id = "power_analysis_plan"
    sd_frac, reduction, alpha, power = 0.30, 0.25, 0.05, 0.80
    d = reduction / sd_frac

    def achieved(n: int, sides: int) -> float:
        df = 2 * n - 2
        nc = d * math.sqrt(n / 2.0)
        tcrit = stats.t.ppf(1 - alpha / sides, df)
        return float(
            stats.nct.sf(tcrit, df, nc) + (stats.nct.cdf(-tcrit, df, nc) if sides == 2 else 0.0)
        )

    n_two = next(n for n in range(3, 500) if achieved(n, 2) >= power)
    n_one = next(n for n in range(3, 500) if achieved(n, 1) >= power)
    checks = [
        exists("plan", "results/analysis_plan.md"),
        near(
            "n_per_group",
            "results/analysis_plan.md",
            rf"(?i)n per group\s*[=:]\s*{NUM}",
            n_two,
            1.0,
        ),
        contains("randomization", "results/analysis_plan.md", r"randomi[sz]"),
        contains("blinding", "results/analysis_plan.md", r"blind"),
        contains(
            "attrition",
            "results/analysis_plan.md",
            r"attrition|drop-?outs?|los[es] .*mice|exclusion",
        ),
    ]
    prompt = """
planning a xenograft study, drug vs vehicle, main readout is tumour volume at day 21. from our pilot the SD is roughly 30% of the control mean and we want to be able to pick up a 25% reduction. how many mice per group do we need? usual stuff, two sided 0.05, 80% power. we normally lose 1-2 mice per group to ulceration etc.

also if you could write a short analysis plan I can paste into the ethics application that would be amazing
"""
    constraints = [
        "No data is attached; this is a planning task.",
        "Write results/analysis_plan.md including a line 'n per group: <n>' (evaluable animals per group, before any allowance for attrition) and, separately, how many to enrol.",
        "State the assumptions, the test, and how randomization, blinding and attrition/exclusions will be handled.",
    ]
    meta = meta_for(
        "preclinical oncology",
        "study design",
        "easy",
        "A sample size calculation with its assumptions and sensitivity, the number to enrol allowing for attrition, and a short pre-specified analysis plan.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "sd_fraction_of_control_mean": sd_frac,
            "target_reduction_fraction": reduction,
            "alpha_two_sided": alpha,
            "power": power,
            "cohens_d": r6(d),
        },
        "reference_analysis": {
            "n_per_group_two_sided_noncentral_t": n_two,
            "achieved_power": r6(achieved(n_two, 2)),
            "n_per_group_one_sided_wrong": n_one,
            "enrol_with_2_losses_per_group": n_two + 2,
        },
    }
    write_task(root, task_id, prompt, meta, truth)
