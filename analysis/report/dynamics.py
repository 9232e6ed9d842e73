"""The report's "Revision dynamics" section: did the loop revise at all, and how did d_t and IS move?

A generation whose Critic approves at round 1 and whose Writer repeats its draft is no evidence
about any stopping policy; this section says so with the numbers, beside the paper's own
distance figures (8B-model drafts on HotpotQA: mean d_t 0.040, median 0.022, 80% below 0.06).
"""

from __future__ import annotations

import duckdb

from analysis import sql
from analysis.report.cells import cell
from analysis.sql.rows import fetch_dicts

# The SHP paper's distance characterisation (its N = 60 HotpotQA test run).
PAPER = {"mean_distance": 0.040, "median_distance": 0.022, "share_below_eps": 0.80}
FROZEN = 0.5  # below this share of revised trajectories, a generation's dynamics are called frozen


def collect(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict]]:
    return {
        "dynamics": fetch_dicts(con, sql.query("report_dynamics")),
        "by_round": fetch_dicts(con, sql.query("report_dynamics_by_round")),
    }


def section(dyn: dict[str, list[dict]]) -> list[str]:
    lines = ["## Revision dynamics: did the loop revise?", ""]
    if not dyn.get("dynamics"):
        return [*lines, "- No trajectories.", ""]
    lines += [
        "| generation | N | round-1 approval | revised after round 1 | distinct drafts / trajectory |",
        "|---|---|---|---|---|",
    ]
    for d in dyn["dynamics"]:
        lines.append(
            f"| {d['gen_id'][:12]} | {d['trajectories']} | {100 * d['round1_approval_rate']:.0f}% "
            f"| {100 * d['share_revised']:.0f}% | {cell(d['mean_distinct_drafts'], 2)} |"
        )
    frozen = [d["gen_id"][:12] for d in dyn["dynamics"] if d["share_revised"] < FROZEN]
    if frozen:
        lines += [
            "",
            f"**Frozen dynamics in {', '.join(frozen)}**: fewer than {FROZEN:.0%} of its trajectories changed "
            "their draft after round 1, so its stopping policies differ only in what they pay, not in what "
            "they return: no evidence about when to stop.",
        ]
    lines += [
        "",
        "| generation | round | mean d_t | median d_t | mean IS | Critic approved |",
        "|---|---|---|---|---|---|",
    ]
    for r in dyn["by_round"]:
        lines.append(
            f"| {r['gen_id'][:12]} | {r['round']} | {cell(r['mean_distance'], 4)} | {cell(r['median_distance'], 4)} "
            f"| {cell(r['mean_is'])} | {cell(None if r['approval_rate'] is None else 100 * r['approval_rate'], 0)}% |"
        )
    lines += [
        "",
        f"The SHP paper (drafts of an 8B model): mean d_t {PAPER['mean_distance']:.3f}, median "
        f"{PAPER['median_distance']:.3f}, {PAPER['share_below_eps']:.0%} of its distances under its eps of 0.06.",
        "",
    ]
    return lines
