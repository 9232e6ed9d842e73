"""Distances and the Information Score: totality, bounds, NaN semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shp_ray.policy.scoring import METRICS, cosine_distance, information_score, l2_normalise
from shp_ray.policy.weights import uniform


def test_cosine_distance_known_values():
    assert cosine_distance([1, 0], [1, 0]) == pytest.approx(0.0)
    assert cosine_distance([1, 0], [0, 1]) == pytest.approx(1.0)
    assert cosine_distance([1, 0], [-1, 0]) == pytest.approx(2.0)
    assert cosine_distance([3, 4], [6, 8]) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("bad", [[0.0, 0.0], [math.nan, 1.0], [math.inf, 0.0]])
def test_degenerate_vectors_map_to_one(bad):
    assert cosine_distance(bad, [1.0, 2.0]) == 1.0
    assert cosine_distance([1.0, 2.0], bad) == 1.0


def test_cosine_distance_is_clipped_to_0_2():
    rng = np.random.default_rng(0)
    for _ in range(1000):
        a, b = rng.normal(size=8) * 1e6, rng.normal(size=8) * 1e-6
        assert 0.0 <= cosine_distance(a, b) <= 2.0
    assert cosine_distance([1.0, 1e-9], [1.0, 1e-9]) >= 0.0  # rounding below zero is clipped


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shapes differ"):
        cosine_distance([1, 2, 3], [1, 2])


def test_l2_normalise():
    assert np.linalg.norm(l2_normalise([3.0, 4.0])) == pytest.approx(1.0)
    assert not l2_normalise([0.0, 0.0]).any()


def test_information_score_uniform_is_the_mean():
    m = dict(zip(METRICS, [0.2, 0.4, 0.6, 0.8], strict=True))
    assert information_score(m, uniform()) == pytest.approx(0.5)


def test_information_score_nan_means_unknown_not_zero():
    m = dict(zip(METRICS, [0.2, math.nan, 0.6, 0.8], strict=True))
    assert math.isnan(information_score(m, uniform()))
    # ... unless that metric carries no weight.
    w = {"faithfulness": 0.5, "answer_relevancy": 0.0, "context_precision": 0.5, "context_recall": 0.0}
    assert information_score(m, w) == pytest.approx(0.4)


@pytest.mark.parametrize(
    "weights, match",
    [
        ({"faithfulness": 0.5, "answer_relevancy": 0.4}, "sum to 1"),
        ({"faithfulness": 1.5, "answer_relevancy": -0.5}, ">= 0"),
        ({"fluency": 1.0}, "unknown metric"),
    ],
)
def test_weights_off_the_simplex_are_refused(weights, match):
    with pytest.raises(ValueError, match=match):
        information_score(dict.fromkeys(METRICS, 0.5), weights)


def test_metric_out_of_range_is_refused():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        information_score({**dict.fromkeys(METRICS, 0.5), "faithfulness": 1.2}, uniform())
