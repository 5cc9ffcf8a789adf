"""Paired survey: a pre/post wellbeing questionnaire in an XLSX workbook, with
reverse-keyed items, dropouts and messy participant IDs.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from openpyxl import Workbook
from scipy import stats
from task_files import (
    FIXED_DATE,
    NUM,
    contains,
    exists,
    meta_for,
    near,
    normalize_zip,
    r6,
    write_task,
)


def generate(root: Path) -> None:
    """Write tasks/survey_paired/ and truth/survey_paired.json under root."""
    task_id = "survey_paired"
    rng = np.random.default_rng(5505)
    n = 34
    dropouts = {5, 13, 22, 30}
    reverse = {3, 6}
    loadings = np.array([0.8, 0.7, 0.75, 0.85, 0.7, 0.8, 0.65, 0.75])
    intercepts = np.array([3.0, 3.2, 2.9, 3.1, 2.8, 3.0, 3.3, 2.9])
    theta = rng.normal(0.0, 1.3, n)
    delta = rng.normal(0.4, 0.5, n)

    def items(th: np.ndarray) -> np.ndarray:
        raw = (
            intercepts[None, :] + th[:, None] * loadings[None, :] + rng.normal(0, 0.6, (th.size, 8))
        )
        x = np.clip(np.rint(raw), 1, 5).astype(int)
        for q in reverse:
            x[:, q - 1] = (
                6 - x[:, q - 1]
            )  # stored as answered: reverse-keyed items run the other way
        return x

    pre = items(theta)
    post = items(theta + delta)
    ids = [f"P{i:03d}" for i in range(1, n + 1)]
    ages = rng.integers(19, 64, n)
    genders = rng.choice(["F", "M", "F", "F", "M", "other"], n)

    def total(x: np.ndarray, reverse_code: bool) -> np.ndarray:
        y = x.copy()
        if reverse_code:
            for q in reverse:
                y[:, q - 1] = 6 - y[:, q - 1]
        return y.sum(axis=1)

    keep = np.array([i for i in range(n) if (i + 1) not in dropouts])
    d_ok = total(post, True)[keep] - total(pre, True)[keep]
    d_naive = total(post, False)[keep] - total(pre, False)[keep]
    p_paired = stats.ttest_rel(total(post, True)[keep], total(pre, True)[keep]).pvalue
    p_wilcox = stats.wilcoxon(d_ok).pvalue
    post_all = total(post, True)[keep]
    p_unpaired = stats.ttest_ind(post_all, total(pre, True)).pvalue
    assert p_paired < 0.01 and p_wilcox < 0.01 and p_unpaired > 0.05, (
        p_paired,
        p_wilcox,
        p_unpaired,
    )

    wb = Workbook()
    ws = wb.active
    ws.title = "pre"
    hdr = ["ID", "age", "gender", "date", *[f"Q{k}" for k in range(1, 9)]]
    ws.append(hdr)
    for i in range(n):
        ws.append(
            [
                ids[i],
                int(ages[i]),
                str(genders[i]),
                f"2023-10-{rng.integers(2, 14):02d}",
                *[int(v) for v in pre[i]],
            ]
        )
    ws2 = wb.create_sheet("post")
    ws2.append(["ID", "date", *[f"Q{k}" for k in range(1, 9)], "comments"])
    post_order = rng.permutation(keep)
    messy_ids = {11: "p012", 18: "P019 ", 26: "P 027"}
    comments = {3: "felt rushed", 9: "", 20: "missed 2 sessions"}
    for i in post_order:
        pid = messy_ids.get(int(i), ids[i])
        ws2.append(
            [
                pid,
                f"2024-01-{rng.integers(8, 20):02d}",
                *[int(v) for v in post[i]],
                comments.get(int(i)),
            ]
        )
    ws3 = wb.create_sheet("codebook")
    ws3.append(["item", "text", "keying"])
    texts = [
        "I've been feeling optimistic about the future",
        "I've been feeling useful",
        "I've been feeling tense and on edge",
        "I've been dealing with problems well",
        "I've been thinking clearly",
        "I've been feeling down and hopeless",
        "I've been feeling close to other people",
        "I've been able to make up my own mind about things",
    ]
    for k, txt in enumerate(texts, start=1):
        ws3.append([f"Q{k}", txt, "reverse" if k in reverse else "positive"])
    ws3.append([])
    ws3.append(["scale", "1 = none of the time ... 5 = all of the time", ""])
    ws3.append(
        ["total", "sum of Q1-Q8 after reverse-scoring reverse-keyed items (6 - x); range 8-40", ""]
    )
    wb.properties.creator = "survey team"
    wb.properties.created = FIXED_DATE
    folder = root / "tasks" / task_id
    path = folder / "wellbeing_pre_post.xlsx"
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    normalize_zip(path)

    mean_d, naive_d = float(np.mean(d_ok)), float(np.mean(d_naive))
    tol = 0.4
    assert abs(naive_d - mean_d) > tol
    checks = [
        exists("summary", "results/summary.md"),
        near(
            "mean_change", "results/summary.md", rf"(?i)mean change\s*[=:]\s*\+?{NUM}", mean_d, tol
        ),
        near(
            "p_value_significant",
            "results/summary.md",
            rf"(?i)p[- ]value\s*[=:]\s*{NUM}",
            0.005,
            0.005,
        ),
        near(
            "n_pairs", "results/summary.md", rf"(?i)\bn\s*(?:pairs)?\s*[=:]\s*{NUM}", len(keep), 0.5
        ),
        contains(
            "paired_test", "results/summary.md", r"test\s*[=:][^\n]*(\bpaired|signed[- ]rank)"
        ),
    ]
    prompt = """
Hello, we ran our 6-week wellbeing programme and did the short wellbeing questionnaire before and after (wellbeing_pre_post.xlsx, pre and post on separate sheets, codebook on the 3rd sheet). A few people dropped out. Did the programme improve wellbeing? Which test should I use — my colleague just did a t-test in excel and got nothing significant, which seems weird because almost everyone went up.
"""
    constraints = [
        "Score the questionnaire as described in the codebook.",
        "Write results/summary.md containing the lines 'test: <name of test>', 'n pairs: <n>', 'mean change: <post minus pre, total score points>' and 'p-value: <value>' (plain number), plus a short justification of the test.",
    ]
    meta = meta_for(
        "psychology",
        "analysis",
        "medium",
        "A paired analysis of pre/post total scores (complete cases matched by participant), with the appropriate test, effect size/CI, and an explanation of why an independent-samples test is wrong here.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "n_enrolled": n,
            "dropouts": sorted(f"P{i:03d}" for i in dropouts),
            "reverse_keyed_items": sorted(f"Q{q}" for q in reverse),
            "latent_sd": 1.3,
            "latent_change_mean_sd": [0.4, 0.5],
            "messy_post_ids": {ids[i]: v for i, v in messy_ids.items()},
        },
        "reference_analysis": {
            "n_pairs": len(keep),
            "mean_change_total": r6(mean_d),
            "paired_t_p": r6(p_paired),
            "wilcoxon_p": r6(p_wilcox),
        },
        "naive": {
            "mean_change_without_reverse_scoring": r6(naive_d),
            "independent_t_p_all_available": r6(p_unpaired),
        },
        "traps": [
            "Independent-samples t-test ignores pairing and is not significant.",
            "Q3 and Q6 are reverse-keyed; not reverse-scoring them shrinks the change.",
            "Three post IDs are formatted differently (p012, 'P019 ', 'P 027') and must be matched.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)
