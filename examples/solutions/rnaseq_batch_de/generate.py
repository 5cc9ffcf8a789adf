"""RNA-seq DE with a sequencing-run batch confounded with genotype (7/1 vs 1/7); the
reference DE is OLS on log2 counts with the batch in the model.

The data generator of this example task, run by examples/generate.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats
from task_files import NUM, contains, exists, meta_for, near, r6, write_csv_rows, write_task

DE_GENES = [
    ("Cxcl10", 1.2),
    ("Irf7", 2.4),
    ("Isg15", 2.8),
    ("Ifit1", 3.0),
    ("Ifit3", 2.6),
    ("Oasl1", 2.2),
    ("Rsad2", 2.9),
    ("Mx1", 2.1),
    ("Stat1", 1.6),
    ("Usp18", 1.9),
    ("Bst2", 1.7),
    ("Gbp2", 2.0),
    ("Zbp1", 1.8),
    ("Ccl5", 2.3),
    ("Col1a1", -1.8),
    ("Col3a1", -1.6),
    ("Acta2", -2.0),
    ("Tagln", -1.7),
    ("Pdk4", -2.2),
    ("Hmgcs2", -1.9),
    ("Cpt1a", -1.5),
    ("Angptl4", -2.1),
    ("Fabp4", -1.8),
    ("Trex1", -4.5),
]


N_BATCH = 200
BATCH_RANGE = (1.5, 3.0)


def _lm_de(counts: np.ndarray, genotype: list[str], batch: list[str], with_batch: bool):
    """Reference DE: OLS on log2-CPM of expressed genes, t-tests, BH. Returns (keep, log2fc, p, q)."""
    n = counts.shape[1]
    keep = (counts >= 10).sum(axis=1) >= 3
    pos = counts[keep][(counts[keep] > 0).all(axis=1)]
    logc = np.log(pos)
    sf = np.exp(np.median(logc - logc.mean(axis=1, keepdims=True), axis=0))  # median of ratios
    y = np.log2((counts[keep] + 0.5) / sf)
    ko = np.array([g == "KO" for g in genotype], dtype=float)
    b2 = np.array([b == "run2" for b in batch], dtype=float)
    X = np.column_stack([np.ones(n), ko] + ([b2] if with_batch else []))
    beta = np.linalg.lstsq(X, y.T, rcond=None)[0]
    resid = y.T - X @ beta
    dfr = n - X.shape[1]
    s2 = (resid**2).sum(axis=0) / dfr
    se = np.sqrt(s2 * np.linalg.inv(X.T @ X)[1, 1])
    p = 2 * stats.t.sf(np.abs(beta[1] / se), dfr)
    m = len(p)
    o = np.argsort(p)
    q = np.empty(m)
    q[o] = np.minimum(1.0, np.minimum.accumulate((p[o] * m / np.arange(1, m + 1))[::-1])[::-1])
    return keep, beta[1], p, q


def _lm_de_summary(counts, genotype, batch, names, with_batch):
    keep, lfc, _, q = _lm_de(counts, genotype, batch, with_batch)
    kept = [names[i] for i in np.where(keep)[0]]
    return int((q < 0.05).sum()), float(lfc[kept.index("Cxcl10")])


def generate(root: Path) -> None:
    """Write tasks/rnaseq_batch_de/ and truth/rnaseq_batch_de.json under root."""
    task_id = "rnaseq_batch_de"
    rng = np.random.default_rng(3303)
    n_genes = 1000
    n_s = 16
    samples = [f"S{i:02d}" for i in range(1, n_s + 1)]
    genotype = ["WT"] * 8 + ["KO"] * 8
    batch = ["run1"] * 7 + ["run2"] * 1 + ["run1"] * 1 + ["run2"] * 7
    # shuffle the sample order so the sheet is not sorted by group
    perm = rng.permutation(n_s)
    genotype = [genotype[i] for i in perm]
    batch = [batch[i] for i in perm]

    n_de = len(DE_GENES)
    gm = rng.choice(np.arange(10000, 100000), size=n_genes - n_de, replace=False)
    names = [name for name, _ in DE_GENES] + [f"Gm{int(x)}" for x in gm]
    lfc = np.zeros(n_genes)
    lfc[:n_de] = [v for _, v in DE_GENES]
    base = np.exp(rng.normal(5.6, 1.3, n_genes))
    base[:n_de] = np.exp(rng.normal(6.5, 0.6, n_de))
    # batch effects: 140 background genes plus the favourite gene Cxcl10
    bfx = np.zeros(n_genes)
    bidx = rng.choice(np.arange(n_de, n_genes), size=N_BATCH, replace=False)
    bfx[bidx] = rng.choice([-1.0, 1.0], size=N_BATCH) * rng.uniform(*BATCH_RANGE, N_BATCH)
    bfx[0] = 2.0
    bfx[[2, 14]] = [1.5, -1.4]
    disp = 0.012 + 0.6 / base
    size = rng.uniform(0.7, 1.4, n_s)
    counts = np.zeros((n_genes, n_s), dtype=np.int64)
    for j in range(n_s):
        log2mu = (
            np.log2(base)
            + (lfc if genotype[j] == "KO" else 0.0)
            + (bfx if batch[j] == "run2" else 0.0)
        )
        mu = size[j] * 2.0**log2mu
        lam = rng.gamma(1.0 / disp, mu * disp)
        counts[:, j] = rng.poisson(lam)
    order = rng.permutation(n_genes)

    folder = root / "tasks" / task_id
    rows = [["gene", *samples]]
    for i in order:
        rows.append([names[i], *[str(int(c)) for c in counts[i]]])
    write_csv_rows(folder / "counts_raw.csv", rows)
    sheet = [["sample", "genotype", "batch", "RIN"]]
    for j, s in enumerate(samples):
        sheet.append([s, genotype[j], batch[j], f"{rng.uniform(7.2, 9.6):.1f}"])
    write_csv_rows(folder / "sample_sheet.csv", sheet)

    n_sig, fav = _lm_de_summary(counts, genotype, batch, names, True)
    n_sig_naive, fav_naive = _lm_de_summary(counts, genotype, batch, names, False)
    n_tol, fav_tol = 6.0, 0.3
    assert abs(n_sig - n_de) <= n_tol and abs(n_sig_naive - n_de) > n_tol, (n_sig, n_sig_naive)
    assert abs(fav - fav_naive) > 2 * fav_tol, (fav, fav_naive)

    checks = [
        exists("de_table", "results/*.csv"),
        near(
            "n_significant",
            "results/summary.md",
            rf"(?i)significant genes[^\n]*?:\s*{NUM}",
            n_de,
            n_tol,
        ),
        near(
            "log2fc_Cxcl10",
            "results/summary.md",
            rf"(?i)log2FC Cxcl10\s*[=:]\s*{NUM}",
            fav,
            fav_tol,
        ),
        contains("mentions_batch", "results/summary.md", r"batch"),
    ]
    prompt = """
hi, count matrix from the KO vs WT livers is counts_raw.csv (featureCounts, gene symbols), sample info in sample_sheet.csv. 8 vs 8. heads up the libraries were sequenced in two runs and the split isn't balanced, core facility messed up the scheduling :(

can you do a DE analysis KO vs WT? mostly i want the list of DE genes and what's going on with Cxcl10, it's the gene we care about. FDR 5% is fine
"""
    constraints = [
        "Write the full DE table to results/ as CSV (gene, log2FC KO vs WT, p-value, adjusted p-value).",
        "In results/summary.md include a line 'significant genes (FDR < 0.05): <n>' and a line 'log2FC Cxcl10: <value>' (KO relative to WT, log2 scale).",
        "Only the Python scientific stack is available (numpy, scipy, pandas, statsmodels); no R/Bioconductor.",
    ]
    meta = meta_for(
        "genomics",
        "analysis",
        "hard",
        "A differential expression table for KO vs WT that accounts for the sequencing-run batch, the number of DE genes at FDR 5%, the Cxcl10 estimate, and a note on the batch design.",
        constraints,
        checks,
    )
    truth = {
        "task_id": task_id,
        "planted": {
            "n_genes": n_genes,
            "de_genes_log2fc": dict(DE_GENES),
            "n_de": n_de,
            "n_batch_affected_background_genes": N_BATCH,
            "batch_effect_log2_range": list(BATCH_RANGE),
            "Cxcl10": {"true_log2fc": 1.2, "batch_log2_effect_run2": 2.0},
            "design": {
                s: {"genotype": g, "batch": b}
                for s, g, b in zip(samples, genotype, batch, strict=False)
            },
        },
        "reference_analysis": {
            "n_significant_with_batch": n_sig,
            "log2fc_Cxcl10_with_batch": r6(fav),
        },
        "naive_analysis_without_batch": {
            "n_significant": n_sig_naive,
            "log2fc_Cxcl10": r6(fav_naive),
        },
        "traps": [
            "WT is mostly in run1 and KO mostly in run2: ignoring batch calls batch genes DE and inflates Cxcl10's log2FC.",
        ],
    }
    write_task(root, task_id, prompt, meta, truth)
