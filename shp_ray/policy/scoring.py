"""The two signals of a round: the semantic distance d_t and the Information Score IS_t."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

METRICS: tuple[str, ...] = (
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
)


def cosine_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """d = 1 - cos(a, b), total and bounded (Lemma 1).

    A zero-norm (or non-finite) vector maps to 1.0: "no evidence of
    convergence", which can never trigger an entropy halt at eps <= 1.
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"cosine_distance: shapes differ ({x.shape} vs {y.shape})")
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if not (nx > 0.0 and ny > 0.0 and math.isfinite(nx) and math.isfinite(ny)):
        return 1.0
    d = 1.0 - float(np.dot(x, y)) / (nx * ny)
    return min(2.0, max(0.0, d))


def l2_normalise(v: Sequence[float] | np.ndarray) -> np.ndarray:
    """Unit vector of v as float32; a zero or non-finite vector stays all zeros."""
    x = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(x))
    if not (n > 0.0 and math.isfinite(n)):
        return np.zeros_like(x)
    return x / n


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Validate weights on the probability simplex over METRICS."""
    unknown = set(weights) - set(METRICS)
    if unknown:
        raise ValueError(f"unknown metric(s) in weights: {sorted(unknown)}; known: {list(METRICS)}")
    w = {m: float(weights.get(m, 0.0)) for m in METRICS}
    if any(not math.isfinite(v) or v < 0.0 for v in w.values()):
        raise ValueError(f"weights must be finite and >= 0, got {w}")
    total = sum(w.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"weights must sum to 1 (on the simplex), they sum to {total:.6g}")
    return w


def information_score(metrics: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """IS = sum_m w_m * metric_m, in [0, 1] for weights on the simplex (Lemma 1).

    A missing or NaN metric with positive weight gives NaN: an unparsed judge
    reply is "unknown", never 0 (which would fake a loss of quality).
    """
    w = check_weights(weights)
    score = 0.0
    for m, wm in w.items():
        if wm == 0.0:
            continue
        value = metrics.get(m, math.nan)
        value = math.nan if value is None else float(value)
        if math.isnan(value):
            return math.nan
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"metric {m} must be in [0, 1], got {value}")
        score += wm * value
    return min(1.0, max(0.0, score))
