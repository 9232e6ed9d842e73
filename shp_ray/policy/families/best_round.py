"""Best-round selection: return the best draft so far by a JUDGE-FREE score, not the last one.

The SHP paper leaves open how to pick among drafts without the judge; these
are cheap candidates, reported next to ``oracle_is`` (which does use the judge):

- ``last``     the stopping round's draft (every other policy)
- ``medoid``   the draft closest on average to all drafts so far (self-consistency in embedding space)
- ``grounded`` the draft with the largest share of content words found in the contexts
- ``verified`` the latest draft the verifier accepts, else the last

Ties go to the later round (it has seen more critique).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from shp_ray.policy.families.signals import RoundSignal

SELECTORS = ("last", "medoid", "grounded", "verified")


def check_selector(name: str) -> None:
    if name not in SELECTORS:
        raise ValueError(f"unknown best-round selector {name!r}; known: {', '.join(SELECTORS)}")


def _argmax_latest(values: Sequence[float]) -> int:
    """1-based index of the LAST maximum; NaN never wins (all NaN -> the last round)."""
    best, best_t = -math.inf, len(values)
    for t, v in enumerate(values, start=1):
        if not math.isnan(v) and v >= best:
            best, best_t = v, t
    return best_t


def medoid_stack(m: np.ndarray, norms: np.ndarray | None = None) -> np.ndarray:
    """Medoid scores of k trajectories at once: (k, n, dim) float64 drafts -> (k, n).

    Mean cosine similarity of each draft to the others (zero vectors score NaN). One code path for
    one trajectory (k = 1) and for many: numpy's stacked matmul runs the same product per
    trajectory, so the column-wise executor's scores equal the live Stopper's bit for bit. ``norms``: the
    rows' norms if known (``np.linalg.norm(m, axis=2)`` IS ``sqrt(sum(m * m, axis=2))``, the same sums).
    """
    norms = np.linalg.norm(m, axis=2) if norms is None else norms
    ok = norms > 0
    unit = np.where(ok[..., None], m / np.where(ok, norms, 1.0)[..., None], 0.0)
    n = m.shape[1]
    if n == 1:
        return np.where(ok, 0.0, math.nan)
    sims = unit @ unit.transpose(0, 2, 1)
    diag = np.diagonal(sims, axis1=1, axis2=2)
    return np.where(ok, (sims.sum(axis=2) - diag) / (n - 1), math.nan)


def medoid_scores(history: Sequence[RoundSignal]) -> list[float]:
    """Mean cosine similarity of each draft to the others (float64, zero vectors score NaN)."""
    m = np.stack([s.embedding.astype(np.float64) for s in history])
    return [float(v) for v in medoid_stack(m[None])[0]]


def select(selector: str, history: Sequence[RoundSignal]) -> int:
    """The 1-based round whose draft the policy returns."""
    if selector == "last":
        return len(history)
    if selector == "medoid":
        return _argmax_latest(medoid_scores(history))
    if selector == "grounded":
        return _argmax_latest([s.grounded for s in history])
    if selector == "verified":
        ok = [s.t for s in history if s.verified]
        return ok[-1] if ok else len(history)
    raise ValueError(f"unknown best-round selector {selector!r}")
