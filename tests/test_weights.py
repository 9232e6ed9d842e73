"""IS weight strategies: each lands on the simplex and behaves as its definition says."""

from __future__ import annotations

import numpy as np
import pytest

from shp_ray.policy import weights
from shp_ray.policy.scoring import METRICS


def _vec(w: dict[str, float]) -> np.ndarray:
    return np.array([w[m] for m in METRICS])


def test_uniform():
    assert _vec(weights.uniform()) == pytest.approx([0.25] * 4)


def test_entropy_favours_the_metric_that_varies():
    rng = np.random.default_rng(1)
    x = np.full((50, 4), 0.5)
    x[:, 2] = rng.uniform(0.0, 1.0, 50)  # only context_precision carries information
    w = _vec(weights.entropy(x))
    assert w.sum() == pytest.approx(1.0)
    assert w[2] > 0.99


def test_entropy_is_uniform_when_nothing_varies():
    assert _vec(weights.entropy(np.full((10, 4), 0.7))) == pytest.approx([0.25] * 4)


def test_entropy_ignores_rows_with_unscored_metrics():
    x = np.array([[0.1, 0.5, 0.5, 0.5], [0.9, 0.5, 0.5, 0.5], [np.nan, 0.0, 1.0, 0.0]])
    assert _vec(weights.entropy(x))[0] == pytest.approx(1.0)


def test_ahp_consistent_matrix_recovers_its_weights():
    target = np.array([0.4, 0.3, 0.2, 0.1])
    pairwise = target[:, None] / target[None, :]  # perfectly consistent: CR = 0
    w, cr = weights.ahp_weights_and_cr(pairwise)
    assert w == pytest.approx(target)
    assert cr == pytest.approx(0.0, abs=1e-9)
    assert _vec(weights.ahp(pairwise)) == pytest.approx(target)


def test_ahp_refuses_inconsistent_judgements_unless_forced():
    # a > b, b > c, c > a: circular preferences.
    a = np.array(
        [
            [1, 9, 1 / 9, 1],
            [1 / 9, 1, 9, 1],
            [9, 1 / 9, 1, 1],
            [1, 1, 1, 1],
        ],
        dtype=float,
    )
    _, cr = weights.ahp_weights_and_cr(a)
    assert cr > weights.CR_LIMIT
    with pytest.raises(weights.InconsistentJudgements, match="consistency ratio"):
        weights.ahp(a)
    assert sum(weights.ahp(a, force=True).values()) == pytest.approx(1.0)


def test_ahp_rejects_a_non_reciprocal_matrix():
    with pytest.raises(ValueError, match="reciprocal"):
        weights.ahp(np.full((4, 4), 2.0))


def test_constrained_ls_recovers_weights_on_the_simplex():
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, size=(200, 4))
    true_w = np.array([0.5, 0.1, 0.0, 0.4])
    w = _vec(weights.constrained_ls(x, x @ true_w))
    assert w == pytest.approx(true_w, abs=1e-4)


def test_constrained_ls_stays_feasible_when_the_target_is_off_the_simplex():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, size=(100, 4))
    w = _vec(weights.constrained_ls(x, -3.0 * x[:, 0] + 5.0 * x[:, 1]))
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0)


def test_derive_weights_dispatch_and_errors():
    assert weights.derive_weights("uniform") == weights.uniform()
    with pytest.raises(ValueError, match="needs the observed metric matrix"):
        weights.derive_weights("entropy")
    with pytest.raises(ValueError, match="unknown weights strategy"):
        weights.derive_weights("magic")
