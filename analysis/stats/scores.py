"""Paired statistics of the user's scores: every policy's score at its stop against fixed_k{depth}'s.

The same tests :func:`analysis.stats.compare_policies` runs on IS (paired t-test, Wilcoxon signed-rank,
bootstrap 95% CI of the mean difference, Cohen's d_z, the TOST non-inferiority test with margin delta and
its power), on the rows of ``replay_scores``, paired over the trajectories where both values are known;
Holm adjusts the p-values across the policies of one generation and score.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np

from analysis import sql
from analysis.stats import holm, paired_tests, tost_noninferiority, tost_plan


def _pairs(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    out: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for gen, score, policy, final, base in con.execute(sql.query("score_pairs")).fetchall():
        x, b = out.setdefault((gen, score, policy), ([], []))
        x.append(math.nan if final is None else final)
        b.append(math.nan if base is None else base)
    return {k: (np.asarray(x, dtype=float), np.asarray(b, dtype=float)) for k, (x, b) in out.items()}


def compare_scores(
    con: duckdb.DuckDBPyConnection, delta: float = 0.02, seed: int = 0, n_resamples: int = 2000
) -> list[dict[str, Any]]:
    """One row per (gen_id, policy, score): the paired comparison against the baseline's last draft."""
    rows: list[dict[str, Any]] = []
    for (gen, score, policy), (x, base) in _pairs(con).items():
        tests, diff = paired_tests(x, base, seed, n_resamples)
        tost, plan = tost_noninferiority(diff, delta), tost_plan(diff, delta)
        rows.append({"gen_id": gen, "policy": policy, "score": score, **tests, "tost_delta": delta, "tost_p": tost.p,
                     "lower95": tost.lower95, "non_inferior": tost.non_inferior, "tost_power": plan.power,
                     "n_needed": plan.n_needed, "degenerate": plan.degenerate})  # fmt: skip
    for key in {(r["gen_id"], r["score"]) for r in rows}:
        group = [r for r in rows if (r["gen_id"], r["score"]) == key]
        for col in ("p_t", "p_wilcoxon"):
            for r, adj in zip(group, holm([float(r[col]) for r in group]), strict=True):
                r[col + "_holm"] = adj
    return rows
