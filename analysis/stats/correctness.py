"""Stopping judged on correctness: pass_at_stop per policy, its exact paired test, the oracle's gap, break rates.

A pass/fail score (every known value 0 or 1: a code loop's ``hidden_pass``, or a user's own 0/1 score) says per
round whether the draft is right. The views (analysis/sql: ``pass_rounds``, ``oracle_pass``, ``correctness``,
``correctness_summary``, ``pass_by_round``, ``break_rate``; docs/correctness.md) count, per split, how often each
policy's returned draft passes and how its trajectories pair with the baselines'. Here the same counts get their
tests:

- the exact McNemar test of a policy against ``fixed_k{depth}`` (every round run) and against ``fixed_k1`` (the
  first draft): the two-sided binomial test (:func:`scipy.stats.binomtest`) of the discordant pairs, the
  trajectories one passes and the other fails, at 1/2;
- the difference of the pass rates, (gained - lost) / n, with Newcombe's hybrid score interval for paired
  proportions (his method 10: Wilson intervals of both rates, combined with the pairs' phi correlation), which
  keeps to [-1, 1] and behaves at the small N and rates near 0 or 1 of a run on a few problems.

With several trajectories per task (``generation.epochs`` > 1) both give way to their clustered forms (the paired
bootstrap over tasks, the cluster sign-flip test: :mod:`analysis.stats.clustered`), and every table states its
minimum detectable difference (:func:`table_mde`).

An unknown value (the scorer raised) counts as not passing, as in the views: pass_at_stop never counts a draft
that was not shown to pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import duckdb

from analysis import scipy_stats as st
from analysis import sql
from analysis.errors import AnalysisError
from analysis.sql.rows import fetch_dicts
from analysis.stats.clustered import CLUSTERED_CI, CLUSTERED_TEST, clustered_test, mde
from shp_ray.policy import resample
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.table import ABLATION_CELLS, Policy, family_policies, standard_policies

DEFAULT_SCORE = "hidden_pass"  # a code store's: the hidden tests pass
Z95 = st.norm_ppf(0.975)


def code_policies(max_rounds: int) -> list[Policy]:
    """Every standard policy and stopping family at its defaults, capped at ``max_rounds``, without the seven
    ablation cells (cascades already present under other names), the fixed depths past ``max_rounds`` (the same
    drafts as fixed_k{max_rounds}) and ``gain_model`` (its fit writes an artefact into the store and needs a
    judge's IS): what RESULTS.md's code section compares."""
    base = HaltConfig(max_rounds=max_rounds)
    pols = standard_policies(base) + family_policies(base)
    # a fixed depth past max_rounds returns the same drafts as fixed_k{max_rounds}: one row, not two
    deeper = {p.name for p in pols if p.name.startswith("fixed_k") and p.halt.max_rounds > max_rounds}
    return [p for p in pols if p.name not in {*ABLATION_CELLS, *deeper} and p.kind != "gain_model"]


def mcnemar_p(gained: int, lost: int) -> float:
    """The exact two-sided McNemar p: ``gained`` of ``gained + lost`` discordant pairs at 1/2 (1.0 with none)."""
    n = int(gained) + int(lost)
    return 1.0 if n == 0 else float(st.binomtest(int(gained), n, 0.5).pvalue)


def wilson(x: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of x successes in n (NaN, NaN when n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = x / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)
    # At x = 0 or x = n the bound is 0 or 1 exactly; rounding would print "-0.0%" or 99.99...%.
    return (0.0 if x == 0 else lo), (1.0 if x == n else hi)


def paired_difference_ci(both: int, gained: int, lost: int, neither: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's (1998) method-10 95% interval of p1 - p2 for paired binary outcomes: ``both`` pass, ``gained``
    (1 passes, 2 fails), ``lost`` (1 fails, 2 passes), ``neither``. NaN, NaN when there are no pairs."""
    a, b, c, d = int(both), int(gained), int(lost), int(neither)
    n = a + b + c + d
    if n == 0:
        return math.nan, math.nan
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(denom) if denom > 0 else 0.0
    diff = p1 - p2
    lower = math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    upper = math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return max(-1.0, diff - lower), min(1.0, diff + upper)


def pass_fail_scores(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The pass/fail scores the store holds (every known value 0 or 1), sorted."""
    return [s for (s,) in con.execute(sql.query("pass_fail_scores")).fetchall()]


def pick_score(con: duckdb.DuckDBPyConnection, score: str | None = None) -> str | None:
    """The score to judge correctness by: ``score`` if given (it must be pass/fail), else ``hidden_pass`` where
    the store has it, else its only pass/fail score; None when it has none (say which when there are several)."""
    have = pass_fail_scores(con)
    if score is not None:
        if score not in have:
            raise AnalysisError(
                f"score {score!r} is not a pass/fail score of this store (every known value 0 or 1); "
                f"pass/fail scores here: {', '.join(have) or 'none'}"
            )
        return score
    if DEFAULT_SCORE in have or not have:
        return DEFAULT_SCORE if have else None
    if len(have) > 1:
        raise AnalysisError(f"several pass/fail scores ({', '.join(have)}) and no {DEFAULT_SCORE}: name one")
    return have[0]


def _test(row: dict, suffix: str) -> dict[str, float]:
    """The paired comparison of one correctness_summary row with a baseline (suffix '' fixed_k{depth}, '_k1')."""
    n, gained, lost = int(row["n"]), int(row[f"gained{suffix}"]), int(row[f"lost{suffix}"])
    both = int(row[f"both_passed{suffix}"])
    lo, hi = paired_difference_ci(both, gained, lost, n - both - gained - lost)
    return {f"diff{suffix}": (gained - lost) / n if n else math.nan, f"ci95_low{suffix}": lo,
            f"ci95_high{suffix}": hi, f"p{suffix}": mcnemar_p(gained, lost)}  # fmt: skip


def _clustered(r: dict, pairs: Sequence[dict]) -> dict:
    """The row's comparisons over task clusters (several trajectories per task: generation.epochs > 1)."""
    base = clustered_test([(p["task_id"], p["passed"], p["baseline_passed"]) for p in pairs])
    k1 = clustered_test([(p["task_id"], p["passed"], p["first_passed"]) for p in pairs])
    return {**r, **{k: v for k, v in base.items()}, **{f"{k}_k1": v for k, v in k1.items() if k != "clusters"},
            "test": CLUSTERED_TEST, "ci": CLUSTERED_CI}  # fmt: skip


def compare_pass(con: duckdb.DuckDBPyConnection, score: str | None = None) -> list[dict]:
    """One row per (gen_id, split, policy) of ``correctness_summary`` for the score (:func:`pick_score`), with the
    paired test and the 95% interval of the difference against fixed_k{depth} (``p``, ``diff``, ``ci95_low``,
    ``ci95_high``) and against fixed_k1 (the same with ``_k1``); ``test`` and ``ci`` name them. One trajectory per
    task: the exact McNemar test and Newcombe's interval; several (epochs), in every row of that (gen_id, split):
    the cluster sign-flip test and the paired bootstrap over tasks (:mod:`analysis.stats.clustered`), ``clusters``
    the number of tasks. Empty when the store has no pass/fail score."""
    score = pick_score(con, score)
    if score is None:
        return []
    rows = fetch_dicts(con, sql.query("correctness_rows", relation="correctness_summary"), [score])
    pairs: dict[tuple, list[dict]] = {}
    for p in fetch_dicts(con, sql.query("correctness_pairs"), [score]):
        pairs.setdefault((p["gen_id"], p["split"], p["policy"]), []).append(p)
    clustered = {(g, s) for (g, s, _), ps in pairs.items() if len({p["task_id"] for p in ps}) < len(ps)}
    out = []
    for r in rows:
        if (r["gen_id"], r["split"]) in clustered:
            out.append(_clustered(r, pairs.get((r["gen_id"], r["split"], r["policy"]), [])))
        else:
            out.append({**r, **_test(r, ""), **_test(r, "_k1"), "test": "McNemar", "ci": "Newcombe",
                        "clusters": int(r["n"])})  # fmt: skip
    return out


def table_mde(rows: Sequence[dict]) -> float:
    """The minimum detectable difference at 80% power of one (gen_id, split)'s table: over its units (tasks when
    clustered, else trajectories), when two policies' drafts differ as often as two independent drafts at the first
    draft's pass rate p would (a discordant share of 2p(1 - p)); NaN for an empty table."""
    if not rows:
        return math.nan
    first = float(rows[0]["first_pass"] or 0.0)
    return mde(int(min(r["clusters"] for r in rows)), 2 * first * (1 - first))


def by_round(con: duckdb.DuckDBPyConnection, score: str) -> list[dict]:
    """``pass_by_round`` of one score: per (gen_id, split, round) the pass rate and the breaks and fixes into it."""
    return fetch_dicts(con, sql.query("correctness_rows", relation="pass_by_round"), [score])


def break_rates(con: duckdb.DuckDBPyConnection, score: str) -> list[dict]:
    """``break_rate`` of one score: per (gen_id, split) how often a revision breaks a passing draft and fixes a
    failing one, with Wilson 95% intervals of both rates."""
    out = []
    for r in fetch_dicts(con, sql.query("correctness_rows", relation="break_rate"), [score]):
        r["break_ci95"] = wilson(int(r["broke"] or 0), int(r["from_passing"] or 0))
        r["fix_ci95"] = wilson(int(r["fixed"] or 0), int(r["from_failing"] or 0))
        out.append(r)
    return out


def revision_changes(con: duckdb.DuckDBPyConnection, score: str) -> list[dict]:
    """``revision_changes.sql`` of one score: per (gen_id, split) the revisions that changed the draft, the verbatim
    repeats, distinct drafts per trajectory, and the fixes and breaks among the changed drafts only."""
    return fetch_dicts(con, sql.query("revision_changes"), [score])


def judge_free_closing(rows: Sequence[dict]) -> list[tuple[str, float]]:
    """(policy, share of the fixed_k1 -> oracle gap it closes) of the judge-free policies of one (gen_id, split),
    best first; empty when the oracle gains nothing over the first draft. The resampling control is no policy of the
    loop (its drafts are another generation's): said on its own line, not here."""
    closing = [(str(r["policy"]), float(r["share_closed"])) for r in rows
               if r["judge_free"] and r["share_closed"] is not None and r["kind"] != resample.KIND]  # fmt: skip
    return sorted(closing, key=lambda pr: (-pr[1], pr[0]))
