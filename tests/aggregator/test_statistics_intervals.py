"""Intervals of proportions and of the corrected pass share, against statsmodels and a
hand computation of Lang & Reiczigel (2014); no interval of zero width."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from assay_report import statistics as st

SETTINGS = st.AnalysisSettings(seed=3, n_resamples=200)
A = st.ANCHOR
COUNTS = [
    (k, n) for n in (1, 2, 5, 8, 12, 32, 48, 200) for k in sorted({0, 1, n // 3, n // 2, n - 1, n})
]


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_and_clopper_pearson_equal_statsmodels(confidence: float) -> None:
    k = np.array([c[0] for c in COUNTS], dtype=float)
    n = np.array([c[1] for c in COUNTS], dtype=float)
    w, cp = st.wilson(k, n, confidence), st.clopper_pearson(k, n, confidence)
    both = st.binomial_interval(k, n, confidence)
    for i, (ki, ni) in enumerate(COUNTS):
        want_w = proportion_confint(ki, ni, alpha=1 - confidence, method="wilson")
        want_cp = proportion_confint(ki, ni, alpha=1 - confidence, method="beta")
        assert (w.low[i], w.high[i]) == pytest.approx(want_w, abs=1e-12)
        assert (cp.low[i], cp.high[i]) == pytest.approx(want_cp, abs=1e-12)
        edge = ki in (0, ni)
        assert (both.low[i], both.high[i]) == pytest.approx(want_cp if edge else want_w, abs=1e-12)
        assert both.high[i] > both.low[i]  # never zero width


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_clopper_pearson_at_0_and_n_equals_scipys_beta_quantiles(confidence: float) -> None:
    """The closed form at the edges against scipy's incomplete-beta inverse (`beta.ppf`),
    over small, large and fractional n (effective sample sizes are not integers)."""
    from scipy.special import betaincinv  # type: ignore[import-untyped]

    n = np.concatenate([np.arange(1.0, 2001.0), [0.3, 2.5, 17.7, 1e4, 1e6, 1e9]])
    a = (1 - confidence) / 2
    at_0 = st.clopper_pearson(np.zeros_like(n), n, confidence)
    at_n = st.clopper_pearson(n, n, confidence)
    np.testing.assert_allclose(at_0.high, betaincinv(1.0, n, 1 - a), rtol=1e-13, atol=0)
    np.testing.assert_allclose(at_n.low, betaincinv(n, 1.0, a), rtol=1e-13, atol=0)
    assert (at_0.low == 0).all() and (at_n.high == 1).all()
    assert (at_0.high > 0).all() and (at_n.low < 1).all()  # never zero width


def test_a_reports_intervals_of_proportions_leave_scipy_unloaded() -> None:
    """Wilson's quantile comes from the standard library and Clopper–Pearson's at 0 and n
    in closed form: importing scipy cost every report built in a fresh process 0.1–0.25 s
    (scipy.stats 0.6 s), a tenth of `assay report` after 1% new events. An interior
    Clopper–Pearson interval, which no report asks for, still loads scipy.special."""
    import subprocess
    import sys

    code = (
        "import sys; import numpy as np; from assay_report import statistics as st; "
        "from assay_report.statistics._no_spread import no_spread_bounds; "
        "st.binomial_interval(3.0, 10.0, 0.95); st.binomial_interval(0.0, 10.0, 0.95); "
        "st.binomial_interval(np.array([0.0, 4.5, 9.0]), np.array([9.0, 9.0, 9.0]), 0.9); "
        "no_spread_bounds(np.array([7.0]), np.array([12.0]), 0.0, 10.0, 0.95); "
        "print(any(m == 'scipy' or m.startswith('scipy.') for m in sys.modules)); "
        "st.clopper_pearson(3.0, 10.0, 0.95); print('scipy.special' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_no_trials_gives_no_interval() -> None:
    b = st.binomial_interval(np.array([0.0]), np.array([0.0]), 0.95)
    assert math.isnan(b.low[0]) and math.isnan(b.high[0])


def _lang_reiczigel_by_hand(
    kq: int, nq: int, kse: int, nse: int, ksp: int, nsp: int, conf: float
) -> tuple[float, float]:
    """Lang Z, Reiczigel J (2014), Prev Vet Med 113:13-22, section 2: add z²/2 positives
    and negatives to the prevalence sample and 1 and 1 to each validation sample; the
    Rogan–Gladen estimate of the adjusted shares, its delta-method variance, and the
    shift 2z²(P·Se(1−Se)/n_Se − (1−P)·Sp(1−Sp)/n_Sp) of the centre; clipped to [0, 1]."""
    z = NormalDist().inv_cdf((1 + conf) / 2)
    nq_, nse_, nsp_ = nq + z**2, nse + 2, nsp + 2
    ap, se, sp = (kq + z**2 / 2) / nq_, (kse + 1) / nse_, (ksp + 1) / nsp_
    tp = (ap + sp - 1) / (se + sp - 1)
    var = (
        ap * (1 - ap) / nq_ + tp**2 * se * (1 - se) / nse_ + (1 - tp) ** 2 * sp * (1 - sp) / nsp_
    ) / (se + sp - 1) ** 2
    shift = 2 * z**2 * (tp * se * (1 - se) / nse_ - (1 - tp) * sp * (1 - sp) / nsp_)
    lo, hi = tp + shift - z * math.sqrt(var), tp + shift + z * math.sqrt(var)
    return min(1.0, max(0.0, lo)), min(1.0, max(0.0, hi))


@pytest.mark.parametrize(
    ("kq", "nq", "kse", "nse", "ksp", "nsp"),
    [
        (5, 8, 5, 8, 26, 32),
        (23, 150, 96, 100, 178, 200),
        (130, 200, 49, 100, 180, 200),
        (40, 120, 45, 50, 38, 50),
        (3, 60, 28, 30, 29, 30),
    ],
)
def test_lang_reiczigel_equals_the_hand_computation(
    kq: int, nq: int, kse: int, nse: int, ksp: int, nsp: int
) -> None:
    def a(x: float) -> np.ndarray:
        return np.array([float(x)])

    for conf in (0.9, 0.95):
        got = st.lang_reiczigel(a(kq / nq), a(nq), a(kse / nse), a(nse), a(ksp / nsp), a(nsp), conf)
        want = _lang_reiczigel_by_hand(kq, nq, kse, nse, ksp, nsp, conf)
        assert (got.low[0], got.high[0]) == pytest.approx(want, abs=1e-12)
        assert not got.unbounded[0]


def test_the_bundled_careful_example_reads_about_a_tenth_to_one() -> None:
    """5 of 8 runs passed, Se 5/8, Sp 26/32: eight tasks cannot rule out a share near 0.1."""
    got = st.lang_reiczigel(*(np.array([x]) for x in (5 / 8, 8, 5 / 8, 8, 26 / 32, 32)), 0.95)
    assert got.low[0] == pytest.approx(0.109, abs=1e-3) and got.high[0] == 1.0


def test_weak_evidence_on_se_and_sp_is_unbounded_not_a_narrow_interval() -> None:
    """Se 3/5 and Sp 3/5: Se + Sp − 1 = 0.2, but its interval reaches far below 0."""
    got = st.lang_reiczigel(*(np.array([x]) for x in (0.5, 100, 0.6, 5, 0.6, 5)), 0.95)
    assert got.unbounded[0] and (got.low[0], got.high[0]) == (0.0, 1.0)


# --- through the statistics ------------------------------------------------------------


def _controls(se_right: list[bool], sp_right: dict[str, list[bool]]) -> pl.DataFrame:
    """One known-good control per task, and the given known-bad ones (task i: i-th of each)."""
    rows = [
        (f"t{t}", f"g{t}", "j1", "reference", "pass", 9.0 if ok else 3.0)
        for t, ok in enumerate(se_right)
    ]
    rows += [
        (f"t{t}", f"b{t}-{v}", "j1", v, "fail", 3.0 if ok else 9.0)
        for v, rights in sp_right.items()
        for t, ok in enumerate(rights)
    ]
    return pl.DataFrame(rows, schema=list(st.CONTROLS_SCHEMA), orient="row")


def test_all_right_controls_get_clopper_pearson_and_a_boundary_warning() -> None:
    c = _controls(
        [True] * 8, {"prose_only": [True] * 8, "altered_numbers": [True] * 4 + [False] * 4}
    )
    rates = {(r.judge_id, r.variant, r.measure): r for r in st.control_rate_rows(c, SETTINGS)}
    se = rates[("j1", None, "sensitivity")]
    assert (se.n_right, se.n_runs, se.estimate) == (8, 8, 1.0)
    assert (se.ci_low, se.ci_high) == pytest.approx(
        proportion_confint(8, 8, method="beta"), abs=1e-12
    )
    assert all(r.ci_high > r.ci_low for r in rates.values())
    w = [x for x in st.validity_warnings(tuple(rates.values())) if x.kind == "boundary_interval"]
    assert any(
        x.message.startswith("the sensitivity of judge j1 is 8/8: its interval [63%, 100%]")
        for x in w
    )
    assert any("specificity of judge j1 on variant prose_only is 8/8" in x.message for x in w)


def test_clustered_controls_never_get_an_interval_narrower_than_wilson() -> None:
    rng = np.random.default_rng(4)
    rows = [
        (f"t{t}", f"b{t}-{i}", "j1", "prose_only", "fail", float(rng.integers(0, 11)))
        for t in range(12)
        for i in range(4)
    ]
    rows += [(f"t{t}", f"g{t}", "j1", "reference", "pass", 9.0) for t in range(12)]
    c = pl.DataFrame(rows, schema=list(st.CONTROLS_SCHEMA), orient="row")
    for r in st.control_rate_rows(c, SETTINGS):
        lo, hi = proportion_confint(
            r.n_right, r.n_runs, method="wilson" if 0 < r.n_right < r.n_runs else "beta"
        )
        assert r.ci_low <= lo + 1e-12 and r.ci_high >= hi - 1e-12


def _runs(passed: list[list[bool]], agent: str = "a", score: float = 9.0) -> pl.DataFrame:
    rows = [
        (f"t{t}", f"{agent}-{t}-{e}", agent, score if ok else 3.0)
        for t, epochs in enumerate(passed)
        for e, ok in enumerate(epochs)
    ]
    return pl.DataFrame(rows, schema=list(st.SCORED_RUNS_SCHEMA), orient="row")


def test_corrected_share_uses_lang_reiczigel_at_the_counts_of_unclustered_data() -> None:
    """One run per task for the agent and for each control class: no design effect, so
    the interval is Lang–Reiczigel's at the counts themselves (the hand computation)."""
    se_right = [True] * 30 + [False] * 10
    sp_right = {"prose_only": [True] * 36 + [False] * 4}
    c = _controls(se_right, sp_right)
    runs = _runs([[t % 2 == 0] for t in range(40)])
    (row,) = st.corrected_pass_rows(runs, c, SETTINGS, judge_id="j1")
    want = _lang_reiczigel_by_hand(20, 40, 30, 40, 36, 40, 0.95)
    assert (row.ci_low, row.ci_high) == pytest.approx(want, abs=1e-9)
    assert row.estimate == pytest.approx((0.5 + 0.9 - 1) / (0.75 + 0.9 - 1), abs=1e-12)
    assert row.ci_low < row.estimate < row.ci_high


def test_clustered_runs_shrink_the_effective_counts() -> None:
    """Controls that agree within tasks (all right or all wrong) carry the information of
    their tasks, not of their runs: a design effect of 4 for 4 identical runs per task."""
    se_right = [True] * 30 + [False] * 10
    c = _controls(se_right, {"prose_only": [True] * 36 + [False] * 4})
    c4 = pl.concat([c.with_columns(run_id=pl.col("run_id") + f"-{i}") for i in range(4)])
    runs = _runs([[t % 2 == 0] for t in range(40)])
    (one,) = st.corrected_pass_rows(runs, c, SETTINGS, judge_id="j1")
    (four,) = st.corrected_pass_rows(runs, c4, SETTINGS, judge_id="j1")
    assert (four.ci_low, four.ci_high) == pytest.approx((one.ci_low, one.ci_high), abs=1e-9)


def test_raw_share_at_sensitivity_and_threshold_fragile_warn() -> None:
    c = _controls([True] * 5 + [False] * 3, {"prose_only": [True] * 7 + [False]})
    runs = _runs([[True]] * 5 + [[False]] * 3, score=8.1)  # 5/8 pass, all on a hair
    (row,) = st.corrected_pass_rows(runs, c, SETTINGS, judge_id="j1")
    assert row.raw_share == row.sensitivity == 5 / 8 and row.n_near_anchor == 5
    w = {x.kind: x.message for x in st.validity_warnings(corrected=[row])}
    assert w["raw_share_at_sensitivity"] == (
        "agent a's raw pass share (62%) reaches the known-good sensitivity of judge j1 (62%): "
        "the correction's model says every run is good, more than the controls can tell"
    )
    assert w["threshold_fragile"].startswith(
        "5 of agent a's 8 runs scored by judge j1 (62%) lie within ±0.25"
    )


def _heterogeneity_p(c: pl.DataFrame) -> float:
    rates = st.control_rate_rows(c, SETTINGS)
    (w,) = [
        x
        for x in st.validity_warnings(rates)
        if x.kind == "specificity_heterogeneous" and x.subject == "j1"
    ]
    return float(w.message.split("(p = ")[1].split(")")[0])


def test_sparse_variants_get_fisher_not_chi_square() -> None:
    """The CI run's table (2026-12-07): 39 of 40 known-bad controls right, the wrong one
    its variant's only control. Fisher's test, by hand: with the margins fixed, the one
    wrong control lands in that variant's single place with probability 1/40, and every
    other table is likelier, so p = 1/40. χ² said 1e-8."""
    from scipy.stats import chi2_contingency  # type: ignore[import-untyped]

    sp = {"altered_numbers": [False], "files_removed": [True] * 2}
    sp |= {"not_executed": [True] * 16, "prose_only": [True] * 21}
    c = _controls([True] * 8, sp)
    assert chi2_contingency([[0, 1], [2, 0], [16, 0], [21, 0]]).pvalue < 1e-7
    p = _heterogeneity_p(c)
    assert p == pytest.approx(1 / 40, abs=0.006)  # 9,999 tables drawn: sd 0.0016
    assert p == _heterogeneity_p(c)  # seeded: a report is its replay


def test_well_filled_variants_keep_chi_square() -> None:
    """Every expected count at least 5: the χ² test's p (scipy), to the printed digits."""
    from scipy.stats import chi2_contingency  # type: ignore[import-untyped]

    sp = {
        "altered_numbers": [True] * 20 + [False] * 20,
        "not_executed": [True] * 36 + [False] * 4,
        "prose_only": [True] * 38 + [False] * 2,
    }
    p = chi2_contingency([[20, 20], [36, 4], [38, 2]]).pvalue
    assert _heterogeneity_p(_controls([True] * 40, sp)) == float(f"{p:.3g}")


def test_heterogeneous_specificity_warns_with_the_corrected_range() -> None:
    """Sp 2/8 on altered numbers, 8/8 on prose: Fisher's exact p = 0.007 (scipy), and the
    corrected share under each variant's Sp printed as a range."""
    from scipy.stats import fisher_exact  # type: ignore[import-untyped]

    c = _controls(
        [True] * 8, {"altered_numbers": [True] * 2 + [False] * 6, "prose_only": [True] * 8}
    )
    rates = st.control_rate_rows(c, SETTINGS)
    runs = _runs([[True]] * 6 + [[False]] * 2)
    (row,) = st.corrected_pass_rows(runs, c, SETTINGS, judge_id="j1")
    assert (row.lowest_variant_specificity, row.highest_variant_specificity) == (0.25, 1.0)
    # (q + Sp − 1)/(Se + Sp − 1) with q = 0.75, Se = 1: 0/0.25 under Sp 0.25, 0.75/1 under Sp 1.
    assert (row.at_lowest_specificity, row.at_highest_specificity) == (0.0, 0.75)
    w = [x for x in st.validity_warnings(rates, [row]) if x.kind == "specificity_heterogeneous"]
    p = fisher_exact([[2, 6], [8, 0]]).pvalue
    assert [x.subject for x in w] == ["j1", ""]  # the judge, and the jury of that one judge
    assert w[0].message.startswith(
        f"the specificity of judge j1 differs between variants (p = {p:.3g}): 2/8 on altered_numbers, 8/8 on prose_only"
    )
    assert w[0].message.endswith(
        "the corrected pass shares under the lowest and highest: agent a 0% to 75%"
    )
