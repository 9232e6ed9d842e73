"""Feedback against resampling at equal compute: the self-repair literature's control.

Two generations of one store ran the same tasks, epochs and rounds: one whose Writer revises on a Critic's
report (``generation.critic=tests``, say) and one whose every round is a fresh sample of the first prompt
(``generation.critic=none``). Each pays the same Writer calls per trajectory, so a policy's pass_at_stop under
the two says whether the report is worth more than drawing again. A trajectory of one is paired with the
trajectory of the other that has its scenario id (the same task and epoch: with a round-seeded Writer, the same
first draft), and tasks are the clusters (:mod:`analysis.stats.clustered`) whatever the epochs.
"""

from __future__ import annotations

import duckdb

from analysis import sql
from analysis.sql.rows import fetch_dicts
from analysis.stats.clustered import CLUSTERED_CI, CLUSTERED_TEST, clustered_test, mde


def compare(con: duckdb.DuckDBPyConnection, score: str, feedback: str, resampling: str) -> list[dict]:
    """Per (split, policy) present in both generations: ``n`` paired trajectories, ``tasks``, the pass rates under
    ``feedback`` and ``resampling`` (gen_ids), their difference with the paired bootstrap interval over tasks and
    the sign-flip p, ``test``/``ci`` naming them, and ``mde`` at 80% power for that many tasks (for outcomes that
    disagree as often as two independent drafts at round 1's pass rate: ``first``). Trajectories that
    only one generation holds (a run still resuming) are left out of the pairs, never counted as failures."""
    mine: dict[tuple[str, str], dict[str, dict]] = {}
    for p in fetch_dicts(con, sql.query("correctness_pairs"), [score]):
        if p["gen_id"] in (feedback, resampling):
            cell = mine.setdefault((str(p["split"]), str(p["policy"])), {feedback: {}, resampling: {}})
            cell[p["gen_id"]][p["scenario_id"]] = (p["task_id"], bool(p["passed"]), bool(p["first_passed"]))
    out = []
    for (split, policy), by_gen in sorted(mine.items()):
        shared = sorted(set(by_gen[feedback]) & set(by_gen[resampling]))
        if not shared:
            continue
        pairs = [(by_gen[feedback][s][0], by_gen[feedback][s][1], by_gen[resampling][s][1]) for s in shared]
        test = clustered_test(pairs)
        a = sum(p[1] for p in pairs) / len(pairs)
        b = sum(p[2] for p in pairs) / len(pairs)
        # as every table's MDE: drafts that disagree as often as two independent drafts at round 1's pass rate would
        first = sum(by_gen[feedback][s][2] for s in shared) / len(shared)
        discordant = 2 * first * (1 - first)
        out.append({"split": split, "policy": policy, "n": len(pairs), "tasks": int(test["clusters"]),
                    "feedback": a, "resampling": b, "diff": test["diff"], "ci95_low": test["ci95_low"],
                    "ci95_high": test["ci95_high"], "p": test["p"], "test": CLUSTERED_TEST, "ci": CLUSTERED_CI,
                    "first": first, "mde": mde(int(test["clusters"]), discordant)})  # fmt: skip
    return out
