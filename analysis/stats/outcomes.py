"""Every score of the store as an outcome of a stopping policy: ``<score>_at_stop`` with its paired test.

An outcome is what the returned draft is judged by: the judge's IS, or any score in the store's ``scores`` table (a
scorer's, an import's, a code loop's ``hidden_pass``). Per (gen_id, policy, score) of one split's connection: the
score at the stop, the baseline fixed_k{depth}'s, the paired difference with its 95% interval and a p-value:

- a pass/fail score (every known value 0 or 1): the share of returned drafts that pass, the exact McNemar test and
  Newcombe's interval of the paired difference (analysis.stats.correctness; an unknown value counts as a fail);
- any other score: the mean at the stop over the trajectories where it is known, the paired t-test (Holm across the
  policies of one generation and score) and the bootstrap interval of the mean difference (analysis.stats.scores).

:func:`primary` picks the outcome a report leads with: the one named (``report.primary``), else the task's
correctness score (``hidden_pass``, or the store's only pass/fail score), else IS where a judge scored the drafts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import duckdb

from analysis import sql
from analysis.errors import AnalysisError
from analysis.stats import correctness
from analysis.stats.scores import compare_scores
from shp_ray.policy.checks import nearest

IS = "is"  # the judge's IS as an outcome's name (report.primary=is)


def score_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The scores the connection's trajectories carry, sorted."""
    return [s for (s,) in con.execute(sql.query("outcome_scores")).fetchall()]


def failed_scores(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The scores of the connection's trajectories whose scorer failed on every draft (no value to be an outcome),
    each with one error it raised."""
    return {str(s): str(e or "no value") for s, e in con.execute(sql.query("failed_scores")).fetchall()}


def compare_outcomes(
    con: duckdb.DuckDBPyConnection, delta: float = 0.02, seed: int = 0, n_resamples: int = 2000
) -> list[dict[str, object]]:
    """One row per (gen_id, policy, score): ``at_stop``, ``baseline``, ``diff`` with ``ci95_low`` / ``ci95_high``,
    ``p`` and the ``test`` that gave it, ``n`` (the trajectories it is over) and ``pass_fail``."""
    pass_fail = set(correctness.pass_fail_scores(con))
    rows: list[dict[str, object]] = []
    for score in sorted(pass_fail):
        for r in correctness.compare_pass(con, score):
            rows.append({"gen_id": str(r["gen_id"]), "policy": str(r["policy"]), "score": score, "pass_fail": True,
                         "n": int(r["n"]), "at_stop": r["pass_at_stop"], "baseline": r["baseline_pass"],
                         "diff": r["diff"], "ci95_low": r["ci95_low"], "ci95_high": r["ci95_high"], "p": r["p"],
                         "test": "exact McNemar"})  # fmt: skip
    for r in compare_scores(con, delta=delta, seed=seed, n_resamples=n_resamples):
        if r["score"] in pass_fail:
            continue
        rows.append({"gen_id": str(r["gen_id"]), "policy": str(r["policy"]), "score": r["score"], "pass_fail": False,
                     "n": r["n"], "at_stop": r["mean"], "baseline": r["mean_baseline"], "diff": r["mean_diff"],
                     "ci95_low": r["ci95_low"], "ci95_high": r["ci95_high"], "p": r.get("p_t_holm"),
                     "test": "paired t (Holm)"})  # fmt: skip
    return rows


ANSWER_SCORES = ("em", "f1")  # what the hotpot scorer stores


def check_requested(requested: str, scores: Iterable[str], has_is: bool, holder: str = "this store") -> None:
    """Refuse a ``report.primary`` that names no outcome of ``holder`` (its ``scores``, and ``is`` where a judge
    scores the drafts): AnalysisError, one line naming the outcomes there are and the nearest of them."""
    have = [*([IS] if has_is else []), *sorted(scores)]
    if requested in have:
        return
    near = nearest(requested, have)
    # The report's F1 / EM columns are not scores: they lead only when a scorer stores them.
    hint = (
        "; answer EM / F1 are outcomes when the run scores them (`score=hotpot`)" if requested in ANSWER_SCORES else ""
    )
    raise AnalysisError(
        f"report.primary={requested}: {holder} has no such outcome; it has: {', '.join(have) or 'none'}"
        + (f"; did you mean `{near}`?" if near else "")
        + hint
    )


def primary(requested: str | None, scores: Sequence[str], pass_fail: Sequence[str], has_is: bool) -> str:
    """The outcome to lead with: ``requested`` (a score of the store, or ``is`` where there is IS), else
    ``hidden_pass``, else the only pass/fail score, else IS where there is IS, else the first score; ``is`` when the
    store has neither (the report then says IS is unknown)."""
    if requested:
        check_requested(requested, scores, has_is)
        return requested
    if correctness.DEFAULT_SCORE in pass_fail:
        return correctness.DEFAULT_SCORE
    if len(pass_fail) == 1:
        return pass_fail[0]
    if has_is or not scores:
        return IS
    return sorted(scores)[0]
