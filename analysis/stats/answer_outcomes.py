"""Is the returned draft right? Answer F1 per policy beside IS, in both readings, each paired with the baseline.

IS is what a judge rewards; answer F1 against the gold answer is whether the draft is right, so RESULTS.md
reads them side by side as co-primary outcomes. Two readings of a draft's answer (shp_ray.policy.answer):
**strict** (the last line that starts with ``Answer:``; without one, 0: the stored ``answer_f1`` and
``replay.final_f1``) and **lenient** (an ``Answer:`` anywhere in a line, else the last sentence: the
``answers_lenient`` view). A small model that states its answer inline scores 0 under the strict reading
whatever it says, so the strict reading partly measures the format; the lenient one is the co-primary outcome.

Each policy's F1 is paired with the baseline fixed_k{depth} on the same trajectories (its last draft), per split,
with the paired t-test, the Wilcoxon signed-rank test and a bootstrap 95% CI (analysis.stats.paired_tests).
The revision dynamics read the same answers: does a trajectory change its ANSWER, or only its wording?
"""

from __future__ import annotations

from collections import defaultdict

import duckdb
import numpy as np

from analysis import sql, stats
from shp_ray.policy.answer import normalize_answer


def _has_families(con: duckdb.DuckDBPyConnection) -> bool:
    names = {r[0] for r in con.execute(sql.query("query_tables")).fetchall()}
    return "family_replay" in names


def returned_rounds_sql(con: duckdb.DuckDBPyConnection) -> str:
    """Each replay row with the round of the draft it returns (and its split)."""
    if _has_families(con):
        return sql.query(
            "answer_returned",
            returned="coalesce(f.selected_round, r.stop_round)",
            families="LEFT JOIN family_replay f ON f.policy = r.policy AND f.gen_id = r.gen_id "
            "AND f.scenario_id = r.scenario_id",
        )
    return sql.query("answer_returned", returned="r.stop_round", families="")


def _paired(x: np.ndarray, base: np.ndarray) -> dict[str, object]:
    tests, _ = stats.paired_tests(x, base)
    return tests


def f1_outcomes(con: duckdb.DuckDBPyConnection) -> dict[tuple[str | None, str], dict[str, dict[str, object]]]:
    """Per (split, policy): ``{"lenient": tests, "strict": tests}``, each the paired tests of the returned draft's
    answer F1 against the baseline's (n, mean, mean_baseline, mean_diff, ci95_low/high, p_t, p_wilcoxon, d_z).
    Trajectories without a gold answer (F1 NULL) are left out of the pairs."""
    rows = con.execute(sql.query("answer_outcomes", returned=returned_rounds_sql(con))).fetchall()
    cols: dict[tuple[str | None, str], list[tuple]] = defaultdict(list)
    for policy, split, _sid, s, sb, lf, lb in rows:
        cols[(split, policy)].append((s, sb, lf, lb))
    out = {}
    for key, vals in cols.items():
        a = np.asarray([[np.nan if v is None else float(v) for v in row] for row in vals], dtype=float)
        out[key] = {"strict": _paired(a[:, 0], a[:, 1]), "lenient": _paired(a[:, 2], a[:, 3])}
    return out


def answer_dynamics(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Does a trajectory change its answer, or only its wording? Over the connection's trajectories:

    - ``share_draft_changed``: some later draft differs from draft 1 byte for byte (what "revise" used to count);
    - ``share_answer_changed``: some later draft's answer (lenient reading, normalised) differs from round 1's;
    - ``share_final_answer_changed``: the last draft's answer differs from round 1's;
    - ``share_repeat_rounds``: rounds >= 2 whose draft repeats an earlier draft of the trajectory word for word.
    """
    by_traj: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for sid, _t, answer, draft_hash in con.execute(sql.query("answer_rounds")).fetchall():
        by_traj[sid].append((normalize_answer(answer or ""), draft_hash))
    if not by_traj:
        return {"trajectories": 0}
    drafts, answers, finals, repeats, later = [], [], [], 0, 0
    for seq in by_traj.values():
        first_answer, first_draft = seq[0]
        drafts.append(any(h != first_draft for _, h in seq[1:]))
        answers.append(any(a != first_answer for a, _ in seq[1:]))
        finals.append(seq[-1][0] != first_answer)
        seen = {first_draft}
        for _, h in seq[1:]:
            later += 1
            repeats += h in seen
            seen.add(h)
    return {
        "trajectories": len(by_traj),
        "share_draft_changed": float(np.mean(drafts)),
        "share_answer_changed": float(np.mean(answers)),
        "share_final_answer_changed": float(np.mean(finals)),
        "share_repeat_rounds": repeats / later if later else float("nan"),
    }
