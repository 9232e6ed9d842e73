"""Honest statistics at small N: every "non-inferior" with its N and power, and the planner's sentence.

A TOST at N = 4 says "non-inferior" whenever the returned drafts happen to score alike; the
power tells how often it would say so for a policy that is in truth as good as the baseline.
The numbers come from :func:`analysis.stats.tost_plan` (the IS rows of ``compare_policies``: n,
sd_diff, tost_power, n_needed, degenerate) and, for shp-sweep's console, from ``policy_summary``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.stats import TARGET_POWER, TostPlan


def _num(x: float | None) -> float:
    """A float, NaN for None (the rows mix Python and SQL values)."""
    return math.nan if x is None else float(x)


def _short(n: int, needed: int | None) -> bool:
    """N below what the planner asks (False when it asks nothing: no test)."""
    return needed is not None and int(n) < int(needed)


def power_cell(is_: Mapping[str, Any]) -> str:
    """``0.16 (N 41)``: the power at this N and the N for power 0.8; ``–`` when there is no test."""
    power = _num(is_.get("tost_power"))
    return "–" if math.isnan(power) else f"{power:.2f} (N {is_.get('n_needed')})"


def tost_p_cell(is_: Mapping[str, Any], p_text: str) -> str:
    """The TOST p-value, or why there is none: zero variance (every paired difference the same)."""
    return "zero variance" if is_.get("degenerate") else p_text


def _p_text(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def verdict(non_inferior: object, is_: Mapping[str, Any]) -> str:
    """The non-inferior cell: yes/no, never without its N, and a "no" never without its power.

    A "yes" is a TOST that rejected (the one-sided bound above -δ at α = 0.05): that holds at any N, so it is
    never called underpowered; it carries its TOST p where the tests give one. Power speaks to a "no": at low
    power a test that did not reject says little about inferiority, and the cell says so.
    """
    n = is_.get("n", "?")
    if is_.get("degenerate"):
        why = "identical to the baseline" if is_.get("mean_diff") == 0.0 else "constant ΔIS"
        return f"no test (N {n}, {why})"
    if non_inferior:
        p = _num(is_.get("tost_p"))
        return f"yes (N {n})" if math.isnan(p) else f"yes (N {n}, TOST p {_p_text(p)})"
    power = _num(is_.get("tost_power"))
    if math.isnan(power):
        return f"no (N {n}, power unknown)"
    if _short(n, is_.get("n_needed")):
        return f"no, underpowered (N {n} < {is_['n_needed']}, power {power:.2f})"
    return f"no (N {n}, power {power:.2f})"


def section(gen: str, rows: Sequence[Mapping[str, Any]], tests: Mapping[tuple, Mapping], delta: float) -> list[str]:
    """Per generation: what the planner asks for at this variance, and a warning when N is below it."""
    planned = [(str(r["policy"]), tests.get((gen, r["policy"], "is"), {})) for r in rows]
    asks = [(p, t) for p, t in planned if t.get("n_needed") is not None]
    lines = [
        "### Power of the non-inferiority test",
        "",
        f"Paired TOST on ΔIS at δ = {delta:g}, α = 0.05. Power: the chance to say “non-inferior” at this N when "
        "the policy is in truth exactly as good as the baseline (noncentral t at the observed SD of ΔIS; that SD is "
        "itself estimated from the N pairs, so at small N the plan is rough too).",
        "",
    ]
    if asks:
        policy, worst = max(asks, key=lambda pt: int(pt[1]["n_needed"]))  # the policy that asks the most
        plan = TostPlan(delta, int(worst["n"]), _num(worst.get("sd_diff")), _num(worst.get("tost_power")),
                        int(worst["n_needed"]), False)  # fmt: skip
        said = plan.sentence()
        lines.append(f"- {said[0].upper()}{said[1:]} (`{policy}`).")
        short = [p for p, t in asks if _short(t.get("n", 0), t["n_needed"]) and not t.get("non_inferior")]
        if short:
            lines.append(
                f"- **N is below what the planner asks for {len(short)} of {len(planned)} policies whose TOST did "
                "not reject: their “not non-inferior” is not evidence of inferiority.** A TOST that rejected "
                "holds at its N (α = 0.05), whatever the planned power."
            )
    degenerate = [p for p, t in planned if t.get("degenerate")]
    if degenerate:
        lines.append(
            "- Zero variance, no test (every paired ΔIS the same, e.g. the returned drafts score as the "
            "baseline's): " + ", ".join(f"`{p}`" for p in degenerate) + "."
        )
    return lines + [""]


def warning(summary: Sequence[Mapping[str, Any]]) -> str | None:
    """The line shp-sweep prints under its table when N is below what the planner asks; None otherwise.

    ``summary``: policy_summary rows with policy, n_is, n_needed and margin (the sweep_summary query).
    """
    # A policy shown non-inferior is not short of anything: its TOST rejected at this N.
    short = [r for r in summary if _short(r.get("n_is", 0), r.get("n_needed")) and not r.get("non_inferior")]
    if not short:
        return None
    worst = max(short, key=lambda r: int(r["n_needed"]))
    return (
        f"WARNING: N = {worst['n_is']} is below what the TOST planner asks: to detect a margin "
        f"delta = {_num(worst.get('margin')):g} with power {TARGET_POWER:g} at this variance you need "
        f"N = {worst['n_needed']} ({worst['policy']}{', split ' + str(worst['split']) if worst.get('split') else ''}); "
        f"{len(short)} of {len(summary)} policies did not reject at this N, "
        "so their 'not non-inferior' here is not evidence of inferiority (a 'non-inferior' is: the TOST rejected)."
    )


# The verdict's kinds as the figures and the HTML report colour them: green for a TOST that rejected (non-inferior at
# its N, whatever the planned power); amber for one that did not reject at an N below what the planner asks (its
# "no" is no evidence of inferiority); grey for a "no" the test had the power to give.
VERDICT_KINDS = {
    "powered": ("non-inferior (the TOST rejected)", "#2ca02c"),
    "underpowered": ("not shown non-inferior, underpowered (N below what the planner asks)", "#ff9f1c"),
    "no_test": ("no test (zero variance)", "#9ecae1"),
    "inferior": ("not shown non-inferior", "#8c8c8c"),
}


def verdict_kind(row: Mapping[str, Any]) -> str:
    """A policy_summary row's verdict kind (a key of VERDICT_KINDS): a "no" of unknown power counts as
    underpowered; a "yes" is a rejection, never underpowered."""
    if row.get("degenerate"):
        return "no_test"
    if row.get("non_inferior"):
        return "powered"
    power = _num(row.get("tost_power"))
    return "underpowered" if row.get("underpowered") or math.isnan(power) else "inferior"
