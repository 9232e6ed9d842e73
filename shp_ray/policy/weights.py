"""Weight strategies for the Information Score: uniform, entropy, ahp, constrained_ls.

Each returns a dict metric -> weight on the probability simplex over METRICS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shp_ray.policy.scoring import METRICS, check_weights

# Saaty's random consistency index by matrix order.
RANDOM_INDEX = {1: 0.0, 2: 0.0, 3: 0.58, 4: 0.90, 5: 1.12, 6: 1.24, 7: 1.32, 8: 1.41, 9: 1.45}
CR_LIMIT = 0.10


class InconsistentJudgements(ValueError):
    """An AHP pairwise matrix whose consistency ratio exceeds the limit."""


def _as_weights(values: np.ndarray) -> dict[str, float]:
    w = np.clip(np.asarray(values, dtype=np.float64), 0.0, None)
    w = w / w.sum()
    return check_weights(dict(zip(METRICS, (float(x) for x in w), strict=True)))


def uniform() -> dict[str, float]:
    return _as_weights(np.ones(len(METRICS)))


def _metric_matrix(matrix: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    x = np.asarray(matrix, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(METRICS):
        raise ValueError(f"metric matrix must be (n, {len(METRICS)}) in order {list(METRICS)}, got {x.shape}")
    x = x[~np.isnan(x).any(axis=1)]  # a row with an unscored metric carries no evidence
    if len(x) < 2:
        raise ValueError("need at least 2 fully scored rows to derive weights")
    if (x < 0).any() or (x > 1).any():
        raise ValueError("metrics must lie in [0, 1]")
    return x


def entropy(matrix: Sequence[Sequence[float]] | np.ndarray) -> dict[str, float]:
    """Shannon entropy weighting (label-free).

    A metric that varies more across rows (lower entropy of its normalised
    column) carries more information and gets more weight. If no metric varies,
    the weights are uniform.
    """
    x = _metric_matrix(matrix)
    n = len(x)
    col = x.sum(axis=0)
    p = np.divide(x, col, out=np.full_like(x, 1.0 / n), where=col > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    e = -plogp.sum(axis=0) / np.log(n)
    divergence = np.clip(1.0 - e, 0.0, None)
    if divergence.sum() <= 1e-12:
        return uniform()
    return _as_weights(divergence)


def ahp(pairwise: Sequence[Sequence[float]] | np.ndarray, force: bool = False) -> dict[str, float]:
    """Analytic Hierarchy Process: principal eigenvector of a pairwise matrix.

    ``pairwise[i][j]`` says how much more important metric i is than j (Saaty
    scale); the matrix must be positive and reciprocal. A consistency ratio
    CR = CI / RI above 0.10 is refused unless ``force``.
    """
    a = np.asarray(pairwise, dtype=np.float64)
    m = len(METRICS)
    if a.shape != (m, m):
        raise ValueError(f"AHP matrix must be {m}x{m} in order {list(METRICS)}, got {a.shape}")
    if not np.isfinite(a).all() or (a <= 0).any():
        raise ValueError("AHP matrix entries must be finite and > 0")
    if not np.allclose(a * a.T, 1.0, rtol=1e-6):
        raise ValueError("AHP matrix must be reciprocal: a[i][j] * a[j][i] == 1")
    w, cr = ahp_weights_and_cr(a)
    if cr > CR_LIMIT and not force:
        raise InconsistentJudgements(
            f"AHP consistency ratio {cr:.3f} > {CR_LIMIT}: revise the pairwise judgements or pass force=True"
        )
    return _as_weights(w)


def ahp_weights_and_cr(a: np.ndarray) -> tuple[np.ndarray, float]:
    """Principal eigenvector (normalised) and the consistency ratio of matrix a."""
    n = a.shape[0]
    values, vectors = np.linalg.eig(a)
    i = int(np.argmax(values.real))
    lam = float(values[i].real)
    w = np.abs(vectors[:, i].real)
    w = w / w.sum()
    ri = RANDOM_INDEX.get(n, 1.49)
    ci = (lam - n) / (n - 1) if n > 1 else 0.0
    cr = max(0.0, ci / ri) if ri > 0 else 0.0
    return w, cr


def constrained_ls(
    matrix: Sequence[Sequence[float]] | np.ndarray, target: Sequence[float] | np.ndarray
) -> dict[str, float]:
    """min ||X w - y||^2 subject to w >= 0, sum w = 1 (y: a labelled quality, e.g. answer F1)."""
    from scipy.optimize import minimize

    x_all = np.asarray(matrix, dtype=np.float64)
    y_all = np.asarray(target, dtype=np.float64)
    if x_all.ndim != 2 or len(x_all) != len(y_all):
        raise ValueError(f"matrix rows ({len(x_all)}) and target length ({len(y_all)}) differ")
    keep = ~(np.isnan(x_all).any(axis=1) | np.isnan(y_all))
    x, y = _metric_matrix(x_all[keep]), y_all[keep]
    m = x.shape[1]
    result = minimize(  # type: ignore[call-overload]  # scipy-stubs: no overload takes a constraint dict
        lambda w: float(np.sum((x @ w - y) ** 2)),
        np.full(m, 1.0 / m),
        jac=lambda w: 2.0 * x.T @ (x @ w - y),
        method="SLSQP",
        bounds=[(0.0, 1.0)] * m,
        constraints=[{"type": "eq", "fun": lambda w: float(np.sum(w) - 1.0), "jac": lambda w: np.ones(m)}],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    if not result.success:
        raise RuntimeError(f"constrained least squares did not converge: {result.message}")
    return _as_weights(result.x)


STRATEGIES = ("uniform", "entropy", "ahp", "constrained_ls")


def derive_weights(
    strategy: str,
    *,
    matrix: Sequence[Sequence[float]] | np.ndarray | None = None,
    target: Sequence[float] | np.ndarray | None = None,
    pairwise: Sequence[Sequence[float]] | np.ndarray | None = None,
    force: bool = False,
) -> dict[str, float]:
    """Dispatch by strategy name, checking that its inputs were given."""
    if strategy == "uniform":
        return uniform()
    if strategy == "entropy":
        if matrix is None:
            raise ValueError("weights strategy 'entropy' needs the observed metric matrix")
        return entropy(matrix)
    if strategy == "ahp":
        if pairwise is None:
            raise ValueError("weights strategy 'ahp' needs a pairwise comparison matrix")
        return ahp(pairwise, force=force)
    if strategy == "constrained_ls":
        if matrix is None or target is None:
            raise ValueError("weights strategy 'constrained_ls' needs a metric matrix and a target")
        return constrained_ls(matrix, target)
    raise ValueError(f"unknown weights strategy {strategy!r}; choose one of {list(STRATEGIES)}")
