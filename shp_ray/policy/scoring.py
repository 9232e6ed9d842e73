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
# The non-inferiority margin of IS a policy is held to against fixed_k{depth} unless told (analysis's policy_summary,
# a job's report.delta): here, below both the analysis and conf, which name it.
DEFAULT_DELTA = 0.02


_ROW_CHUNK = 4096


def _quiet() -> np.errstate:
    """NaN/inf arithmetic of non-finite inputs is expected here (it maps to 1.0): no RuntimeWarning."""
    return np.errstate(invalid="ignore", divide="ignore", over="ignore")


def row_cosine_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d = 1 - cos(a_i, b_i) for each row i of two (n, dim) arrays, total and bounded (Lemma 1).

    A zero-norm (or non-finite) vector maps to 1.0: "no evidence of convergence", which can never
    trigger an entropy halt at eps <= 1. Computed in float64, each row reduced on its own, so a row's
    value does not depend on how many rows are computed with it (stored signals, a rebuild and the
    live Stopper agree bit for bit).
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"row_cosine_distances: expected two (n, dim) arrays of one shape, got {a.shape}, {b.shape}")
    out = np.empty(len(a), dtype=np.float64)
    for i in range(0, len(a), _ROW_CHUNK):  # bounded float64 temporaries; each row's sums are its own
        x = a[i : i + _ROW_CHUNK].astype(np.float64)
        y = b[i : i + _ROW_CHUNK].astype(np.float64)
        with _quiet():  # a non-finite vector (inf * 0 = NaN on the way) is no evidence: 1.0, no warning
            nx = np.sqrt(np.sum(x * x, axis=1))
            ny = np.sqrt(np.sum(y * y, axis=1))
            dot = np.sum(x * y, axis=1)
        out[i : i + _ROW_CHUNK] = cosine_from_parts(dot, nx, ny)
    return out


def cosine_from_parts(dot: np.ndarray, nx: np.ndarray, ny: np.ndarray) -> np.ndarray:
    """d = 1 - dot / (|x| |y|), total and bounded as :func:`row_cosine_distances` (zero or non-finite norm -> 1.0),
    from float64 row dot products and norms (each a sum over one row): the one formula every caller shares."""
    ok = (nx > 0.0) & (ny > 0.0) & np.isfinite(nx) & np.isfinite(ny)
    with _quiet():
        d = 1.0 - dot / (nx * ny)
    return np.clip(np.where(ok & np.isfinite(d), d, 1.0), 0.0, 2.0)


def indexed_cosine_distances(m: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """:func:`row_cosine_distances` of (m[i], m[j]) for index arrays into ONE (n, dim) array, bit for bit:
    the same float64 row reductions, but each row's norm computed once however many pairs it is in."""
    m64 = np.asarray(m).astype(np.float64)
    with _quiet():
        norms = np.sqrt(np.sum(m64 * m64, axis=1))
    i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    out = np.empty(len(i), dtype=np.float64)
    for lo in range(0, len(i), _ROW_CHUNK):  # bounded float64 temporaries
        a, b = i[lo : lo + _ROW_CHUNK], j[lo : lo + _ROW_CHUNK]
        with _quiet():
            dot = np.sum(m64[a] * m64[b], axis=1)
        out[lo : lo + _ROW_CHUNK] = cosine_from_parts(dot, norms[a], norms[b])
    return out


def cosine_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """d = 1 - cos(a, b) of two vectors: :func:`row_cosine_distances` of one row."""
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"cosine_distance: shapes differ ({x.shape} vs {y.shape})")
    return float(row_cosine_distances(x[None, :], y[None, :])[0])


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
