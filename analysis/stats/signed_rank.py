"""The Wilcoxon signed-rank test of the paired statistics (analysis.stats), with scipy's p-values.

scipy's ``wilcoxon`` answers a small sample with tied |differences| (n <= 13, every replay of a short run) by
a permutation test that calls its statistic once per sign flip: 2^n Python calls, ~2/3 of rendering the shipped
store. The same exact null distribution is counted here by dynamic programming over the doubled average ranks
(integers), so the p-values are scipy's to the last bit (counts over 2^n, compared without rounding). Untied
samples and larger ones go to scipy as before.
"""

from __future__ import annotations

import warnings

import numpy as np

from analysis import scipy_stats as st

PERMUTATION_MAX_N = 13  # scipy's own bound: tied samples up to this size get its exact permutation test


def wilcoxon(diff: np.ndarray, alternative: str = "two-sided") -> tuple[float, float]:
    """(W, p) of the Wilcoxon signed-rank test; zero differences are dropped (Wilcoxon's rule)."""
    diff = np.asarray(diff, dtype=float)
    nz = diff[diff != 0.0]
    if len(nz) == 0:
        return 0.0, 1.0
    if len(nz) <= PERMUTATION_MAX_N and np.isfinite(nz).all() and len(np.unique(np.abs(nz))) < len(nz):
        return tied_exact(nz, alternative)
    with warnings.catch_warnings():  # scipy warns on small samples (exact vs normal)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        res = st.wilcoxon(nz, alternative=alternative)
    return float(res.statistic), float(res.pvalue)


def tied_exact(nz: np.ndarray, alternative: str = "two-sided") -> tuple[float, float]:
    """(W, p) of the exact signed-rank test of non-zero differences ``nz``, ties given average ranks: the null
    distribution of the positive rank sum over all 2^n sign flips, as scipy's permutation test enumerates it."""
    ranks = st.rankdata(np.abs(nz))  # average ranks: multiples of 1/2, so twice them are integers
    doubled = np.rint(2 * ranks).astype(np.int64)
    counts = np.zeros(int(doubled.sum()) + 1, dtype=np.int64)
    counts[0] = 1
    for r in doubled:  # each rank is in the positive sum or not: counts of every reachable doubled sum
        counts[r:] = counts[r:] + counts[: len(counts) - r]
    r_plus = float(ranks[nz > 0].sum())
    observed = int(np.rint(2 * r_plus))
    flips = 2 ** len(nz)
    p_less = float(counts[: observed + 1].sum()) / flips
    p_greater = float(counts[observed:].sum()) / flips
    two_sided = min(min(p_less, p_greater) * 2, 1.0)
    p = {"less": p_less, "greater": p_greater, "two-sided": two_sided}[alternative]
    w = min(r_plus, float(ranks[nz < 0].sum())) if alternative == "two-sided" else r_plus
    return w, p
