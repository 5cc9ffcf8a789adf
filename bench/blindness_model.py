"""The classifiers: cross-validated models telling controls from agents' runs.

An AUC near 0.5 means nothing read marks a control, near 1 that something does;
:func:`top_tells` names the features that carried it, :func:`group_aucs` what each kind
of readable field gives away alone. Two models look: a logistic regression (standardized
features) finds any field that differs on its own; a random forest finds what differs
only in combination (a step count with a token count, a work kind with a model name),
which a linear model cannot draw: on the larger campaign the regression stood at chance
(0.46-0.58 over seven salts) while the forest told controls at 0.85-0.92 (2026-12-05).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from bench.blindness_features import Features

__all__ = [
    "GROUPS",
    "MIN_PER_CLASS",
    "Blindness",
    "BlindnessWarning",
    "Classifier",
    "blindness_auc",
    "group_aucs",
    "top_tells",
]

Classifier = Literal["logistic", "forest"]
"""Which model looks: a logistic regression, or a random forest (interactions)."""

MIN_PER_CLASS = 4
"""Fewest controls and agents' runs a cross-validated AUC is computed from."""


class BlindnessWarning(UserWarning):
    """The runs cannot carry a cross-validated AUC (too few of one class)."""


@dataclass(frozen=True)
class Blindness:
    """A cross-validated classifier's power to tell controls from agents' runs."""

    auc: float
    """Area under the ROC curve of out-of-fold predictions (0.5: chance); NaN when the
    runs cannot carry it (see ``warnings``)."""
    n_controls: int
    n_agent_runs: int
    folds: int
    scores: tuple[float, ...]
    """Out-of-fold probability of "control", in the order of ``run_ids`` (with several
    repeats, its mean over them)."""
    run_ids: tuple[str, ...]
    labels: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    repeats: int = 1
    """Cross-validations averaged, each with its own split and model seed."""


def _matrix(features: Mapping[str, Features], runs: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    from sklearn.feature_extraction import DictVectorizer

    vec = DictVectorizer(sparse=False)
    x = vec.fit_transform([features[r] for r in runs])
    return np.nan_to_num(np.asarray(x, dtype=float)), list(vec.get_feature_names_out())


def _model(classifier: Classifier = "logistic", seed: int = 0) -> Any:
    if classifier == "forest":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=300, min_samples_leaf=2, random_state=seed)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))


def blindness_auc(
    features: Mapping[str, Features],
    controls: set[str],
    *,
    seed: int = 0,
    folds: int = 5,
    classifier: Classifier = "logistic",
    repeats: int = 1,
) -> Blindness:
    """Cross-validated AUC of `classifier` telling the runs in `controls` from the
    others, from `features` alone; with `repeats`, the mean AUC of that many
    cross-validations (seeds `seed`, `seed` + 1, …): one split of a campaign's runs into
    folds moves a forest's AUC by ±0.04, which repeats average out."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    runs = sorted(features)
    y = np.array([int(r in controls) for r in runs])
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if min(n_pos, n_neg) < MIN_PER_CLASS:
        message = (
            f"{n_pos} controls and {n_neg} agents' runs: a cross-validated AUC needs at "
            f"least {MIN_PER_CLASS} of each"
        )
        warnings.warn(message, BlindnessWarning, stacklevel=2)
        return Blindness(float("nan"), n_pos, n_neg, 0, (), tuple(runs), tuple(y), (message,))
    k = min(folds, n_pos, n_neg)
    x, _ = _matrix(features, runs)
    aucs, probas = [], []
    for r in range(max(1, repeats)):
        split = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed + r)
        model = _model(classifier, seed + r)
        proba = cross_val_predict(model, x, y, cv=split, method="predict_proba")[:, 1]
        aucs.append(float(roc_auc_score(y, proba)))
        probas.append(proba)
    scores = tuple(float(p) for p in np.mean(probas, axis=0))
    return Blindness(
        float(np.mean(aucs)),
        n_pos,
        n_neg,
        k,
        scores,
        tuple(runs),
        tuple(int(v) for v in y),
        repeats=len(aucs),
    )


def top_tells(
    features: Mapping[str, Features],
    controls: set[str],
    n: int = 10,
    *,
    classifier: Classifier = "logistic",
    seed: int = 0,
) -> list[tuple[str, float]]:
    """The `n` features weighing most in telling controls: what gives them away. The
    regression's standardized coefficients, fit on every run (positive: more of it, more
    likely a control), largest first whatever their sign; the forest's held-out
    permutation importances, largest first (no sign: a combination has none; at or below
    zero, the field told nothing), see :func:`_held_out_importances`. The forest's take a
    cross-validation's fits (about 40 s on a campaign of 192 runs)."""
    runs = sorted(features)
    y = np.array([int(r in controls) for r in runs])
    x, names = _matrix(features, runs)
    if classifier == "forest":
        # Below zero, shuffling a field helped the held-out AUC: noise, not a tell.
        weight = _held_out_importances(x, y, seed)
        ranked = sorted(zip(names, weight, strict=True), key=lambda kv: -kv[1])
    else:
        model = _model(classifier).fit(x, y)
        weight = model[-1].coef_[0]
        ranked = sorted(zip(names, weight, strict=True), key=lambda kv: -abs(kv[1]))
    return [(name, float(c)) for name, c in ranked[:n]]


def _held_out_importances(x: np.ndarray, y: np.ndarray, seed: int, folds: int = 5) -> np.ndarray:
    """Each feature's mean drop in a forest's held-out AUC when its values are shuffled
    among a fold's runs (scikit-learn's permutation importance, fit on the other folds,
    averaged over the folds). A forest's impurity importances favour fields with many
    distinct values whether or not they tell: on campaigns whose forest stood at chance
    they named step latencies and durations first (2026-12-07), and on a planted binary
    tell beside continuous noise they rank the noise first (`tests/bench`)."""
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import StratifiedKFold

    k = min(folds, int(y.sum()), int(len(y) - y.sum()))
    if k < 2:  # one class, or one run of it: nothing can be told, nothing weighs
        return np.zeros(x.shape[1])
    total = np.zeros(x.shape[1])
    split = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    for train, test in split.split(x, y):
        model = _model("forest", seed).fit(x[train], y[train])
        found = permutation_importance(
            model, x[test], y[test], scoring="roc_auc", n_repeats=3, random_state=seed
        )
        total += found.importances_mean
    return total / k


GROUPS = (
    "agent",
    "run",
    "arrival",
    "steps",
    "transcript",
    "tool",
    "calls",
    "end",
    "seal",
    "message",
    "roster",
    "declared",
    "repeats",
)
"""Feature groups by name prefix: what each kind of readable field gives away alone."""


def group_aucs(
    features: Mapping[str, Features], controls: set[str], *, seed: int = 0
) -> dict[str, float]:
    """The cross-validated AUC of each feature group (`GROUPS`) on its own."""
    out = {}
    for group in GROUPS:
        part = {
            run: {k: v for k, v in f.items() if k.split(".", 1)[0] == group} or {"none": 0.0}
            for run, f in features.items()
        }
        out[group] = blindness_auc(part, controls, seed=seed).auc
    return out
