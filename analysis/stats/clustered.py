"""Paired statistics over tasks as clusters: when a store holds several trajectories per task
(``generation.epochs`` > 1), the trajectories of one task are not independent, and McNemar's test and
Newcombe's interval, which take every trajectory as its own pair, would claim more evidence than there is.

- :func:`cluster_bootstrap_ci`: the paired bootstrap over tasks -- resample whole tasks (with every trajectory of
  each) with replacement, the difference of pass rates of each resample, its 2.5 and 97.5 percentiles;
- :func:`sign_flip_p`: the paired cluster-level sign-flip (permutation) test -- under the null that the two
  policies are exchangeable within a task, each task's summed difference is as likely negated; the p-value is the
  share of sign assignments whose |sum| reaches the observed one (exact up to :data:`EXACT_CLUSTERS` tasks with a
  nonzero difference, else :data:`DRAWS` random assignments, counted with the observed one);
- :func:`mde`: the minimum detectable difference at 80% power (:data:`POWER`), two-sided 5%, of a paired
  difference of pass rates over ``n`` units.

Every random draw comes from a generator seeded with :data:`SEED`: the same store renders the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from analysis import scipy_stats as st

SEED = 20261207
RESAMPLES = 4000  # bootstrap resamples of the tasks
DRAWS = 20000  # random sign assignments past EXACT_CLUSTERS
EXACT_CLUSTERS = 16  # 2^16 assignments enumerated exactly
POWER = 0.8
CLUSTERED_TEST = "cluster sign-flip"  # the test's name in the reports
CLUSTERED_CI = "paired bootstrap over tasks"


def by_cluster(pairs: Sequence[tuple[str, bool, bool]]) -> tuple[np.ndarray, np.ndarray]:
    """(per-task sum of differences, per-task trajectory count) of (task, passes, other passes) pairs."""
    sums: dict[str, list[int]] = {}
    for task, a, b in pairs:
        cell = sums.setdefault(task, [0, 0])
        cell[0] += int(bool(a)) - int(bool(b))
        cell[1] += 1
    values = list(sums.values())
    return np.array([v[0] for v in values], dtype=float), np.array([v[1] for v in values], dtype=float)


def cluster_bootstrap_ci(diffs: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    """95% percentile interval of sum(diffs) / sum(sizes) over tasks resampled with replacement (NaN without any)."""
    k = len(diffs)
    if k == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, k, size=(RESAMPLES, k))
    stats = diffs[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return max(-1.0, float(lo)), min(1.0, float(hi))


def sign_flip_p(diffs: np.ndarray) -> float:
    """Two-sided p of the cluster sign-flip test of the per-task summed differences (1.0 when all are 0)."""
    nonzero = diffs[diffs != 0]
    k = len(nonzero)
    if k == 0:
        return 1.0
    observed = abs(nonzero.sum()) - 1e-9
    if k <= EXACT_CLUSTERS:
        signs = 1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)) & 1)
        return float(np.mean(np.abs(signs @ nonzero) >= observed))
    rng = np.random.default_rng(SEED)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(DRAWS, k))
    return float((np.sum(np.abs(signs @ nonzero) >= observed) + 1) / (DRAWS + 1))


def clustered_test(pairs: Sequence[tuple[str, bool, bool]]) -> Mapping[str, float]:
    """The difference of pass rates, its paired-bootstrap 95% interval and the sign-flip p, over task clusters."""
    diffs, sizes = by_cluster(pairs)
    n = float(sizes.sum())
    lo, hi = cluster_bootstrap_ci(diffs, sizes)
    return {"diff": float(diffs.sum()) / n if n else math.nan, "ci95_low": lo, "ci95_high": hi,
            "p": sign_flip_p(diffs), "clusters": len(diffs)}  # fmt: skip


def mde(n: int, discordant: float, alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest difference of paired pass rates a two-sided ``alpha`` test detects with ``power`` over ``n``
    units whose two outcomes differ in a share ``discordant`` of them (normal approximation to McNemar's test:
    (z_{1-alpha/2} + z_power) * sqrt(discordant / n)). NaN when n = 0."""
    if n <= 0:
        return math.nan
    return (st.norm_ppf(1 - alpha / 2) + st.norm_ppf(power)) * math.sqrt(max(discordant, 0.0) / n)
