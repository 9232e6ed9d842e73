"""The TOST planner's table for ``tost_plan.sql``: the margin (delta/SD) the test detects with power 0.8 at n pairs.

Every connection builds it (the ``policy_summary`` view's power columns), so it sits with the SQL it fills, below the
engine that opens connections and the statistics that read them (:mod:`analysis.stats` re-exports it).
"""

from __future__ import annotations

import functools

import numpy as np

from analysis import scipy_stats as st

ALPHA = 0.05  # the one-sided TOST level, as in tost_noninferiority and policy_summary
TARGET_POWER = 0.8  # the planner's "enough": the conventional 80%
# The SQL planner's exact table; beyond it, Guenther's formula (analysis/sql/replay/statistics/tost_plan.sql).
DETECTABLE_MAX_N = 1000


@functools.cache
@st.kept("margins")  # every open builds the planner's table: once per machine
def detectable_margins(max_n: int = DETECTABLE_MAX_N) -> tuple[tuple[int, float], ...]:
    """(n, delta/SD that the TOST detects with power 0.8 at n pairs) for n = 2..max_n: the SQL planner's table.

    Secant steps on all n at once from the normal approximation, to float precision (7 steps: every
    connection builds this table, and the 64-step bisection it replaces cost 0.1 s); bisection for any n
    where the secant did not settle.
    """
    n = np.arange(2, max_n + 1)
    df = n - 1
    t_crit = st.t_ppf(1 - ALPHA, df)

    def gap(es: np.ndarray) -> np.ndarray:  # power - target, rising with es = delta/SD
        return st.nct_sf(t_crit, df, es * np.sqrt(n)) - TARGET_POWER

    x0 = (st.norm_ppf(1 - ALPHA) + st.norm_ppf(TARGET_POWER)) / np.sqrt(n)
    x1 = x0 * 1.05
    f0, f1 = gap(x0), gap(x1)
    for _ in range(30):
        slope = f1 - f0
        step = np.divide(f1 * (x1 - x0), slope, out=np.zeros_like(x1), where=slope != 0)
        x0, f0, x1 = x1, f1, x1 - step
        f1 = gap(x1)
        if np.all(np.abs(step) <= 4e-16 * np.abs(x1)):
            break
    stuck = ~(np.abs(f1) <= 1e-12)
    if stuck.any():
        x1[stuck] = _bisect_margins(t_crit[stuck], df[stuck], n[stuck])
    return tuple(zip(n.tolist(), x1.tolist(), strict=True))


def _bisect_margins(t_crit: np.ndarray, df: np.ndarray, n: np.ndarray) -> np.ndarray:
    lo, hi = np.zeros(len(n)), np.full(len(n), 100.0)  # power 0.05 at 0; ~1 at 100 even for n = 2
    for _ in range(64):
        mid = (lo + hi) / 2
        enough = st.nct_sf(t_crit, df, mid * np.sqrt(n)) >= TARGET_POWER
        lo, hi = np.where(enough, lo, mid), np.where(enough, mid, hi)
    return hi
