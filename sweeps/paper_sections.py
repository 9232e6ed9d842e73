"""RESULTS.md's sections, one (split, judge) scope at a time: Tables II/III with answer F1 beside IS, the oracle gap,
the other stopping families, Conjecture 1 and the revision dynamics (sweeps.paper_results puts them together).

The paper's column holds only what the paper prints. Table III prints rounds, the token change in %, ΔIS, p and
the verdict, and absolute levels only for the baseline (tokens and IS) and the oracle's IS; a token count or IS
level of another policy is computed here from those (baseline x (1 - saving), baseline IS + ΔIS) and marked
"(derived)" wherever it shows, never stored as if printed (shp_ray/data/paper_tables.yaml).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.report import power as report_power
from analysis.report.cells import cell, steady
from shp_ray.policy import groups as policy_groups
from shp_ray.policy.families.registry import FAMILIES

DERIVED = " (derived)"


@dataclass
class Scope:
    """One (split, judge) replay: the policy rows, their paired tests, the answers, and the distance statistics."""

    split: str
    judge: str
    n: int
    summary: dict[str, dict]
    tests: dict[str, dict]
    conjecture1: dict[str, float]
    distances: dict[str, float]
    dynamics: dict[str, list[dict]]
    f1: dict[str, dict[str, dict]] = field(default_factory=dict)  # policy -> {"lenient": tests, "strict": tests}
    answers: dict[str, float] = field(default_factory=dict)  # analysis.stats.answer_outcomes.answer_dynamics
    judge_tokens_per_call: float = 0.0  # 0: the judge makes no call (the lexical judge)
    is_f1: dict[str, float] = field(default_factory=dict)  # IS against answer F1 within a question (paper_is_f1_rank)


def pct(x: object) -> str:
    """Tokens vs the baseline: a saving of 0.38 is -38%."""
    if x is None:
        return "–"
    p = steady(100 * float(x))
    return "0%" if round(p) == 0 else f"{-p:+.0f}%"


def p_cell(x: object) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "–"
    x = steady(float(x))
    return f"{x:.2g}" if x < 0.01 else f"{x:.2f}"


def paper_levels(ref: dict[str, Any], name: str) -> tuple[str, str]:
    """(op. tokens, final IS) of the paper's row: printed where the paper prints it, else derived from its
    percentages and marked so; "–" where not even that is possible."""
    pub, base = ref["policies"][name], ref["policies"]["fixed_k6"]
    tokens, is_ = pub.get("op_tokens"), pub.get("final_is")
    tok = cell(tokens, 0) if tokens is not None else "–"
    if tokens is None and pub.get("saving") is not None and base.get("op_tokens") is not None:
        tok = cell(base["op_tokens"] * (1 - pub["saving"]), 0) + DERIVED
    level = cell(is_) if is_ is not None else "–"
    if is_ is None and pub.get("delta_is") is not None and base.get("final_is") is not None:
        level = cell(base["final_is"] + pub["delta_is"]) + DERIVED
    return tok, level


def _f1_cells(f1: dict[str, dict]) -> list[str]:
    """F1 lenient | ΔF1 lenient [95% CI] | p | F1 strict (ΔF1, p): paired against the baseline's last draft."""
    le, st = f1.get("lenient", {}), f1.get("strict", {})
    if not le:
        return ["–"] * 4
    ci = f"[{cell(le.get('ci95_low'))}, {cell(le.get('ci95_high'))}]"
    strict = f"{cell(st.get('mean'))} ({cell(st.get('mean_diff'), 3)}, p {p_cell(st.get('p_t'))})"
    return [cell(le.get("mean")), f"{cell(le.get('mean_diff'), 3)} {ci}", p_cell(le.get("p_t")), strict]


F1_HEAD = "F1 lenient | ΔF1 lenient [95% CI] | p ΔF1 | F1 strict (ΔF1, p)"


def policy_table(scope: Scope, paper: dict[str, Any], delta: float) -> list[str]:
    """Table II / III: our value / the paper's in one cell, for every policy the paper reported; answer F1 (ours
    only: the paper printed none) beside IS, with its paired test against the baseline."""
    ref = paper["splits"][scope.split]
    rows = [
        "| policy | rounds | tokens vs base | op. tokens | final IS | ΔIS | p (t, paired) "
        f"| non-inferior (δ={delta:g}) | {F1_HEAD} |",
        "|" + "---|" * 12,
    ]
    for name, pub in ref["policies"].items():
        r, t = scope.summary.get(name), scope.tests.get(name, {})
        if r is None:
            continue
        verdict = report_power.verdict(r["non_inferior"], t) if name != "fixed_k6" else "–"
        pub_ni = {True: "yes", False: "no", None: "–"}[pub.get("non_inferior")]
        tok, level = paper_levels(ref, name)
        rows.append(
            f"| {name}{' (base)' if name == 'fixed_k6' else ''} "
            f"| {cell(r['mean_rounds'], 2)} / {cell(pub.get('rounds'), 2)} "
            f"| {pct(r['token_saving'])} / {pct(pub.get('saving'))} "
            f"| {cell(r['mean_operational_tokens'], 0)} / {tok} "
            f"| {cell(r['mean_is'])} / {level} "
            f"| {cell(r['delta_is'], 3)} / {cell(pub.get('delta_is'), 3)} "
            f"| {p_cell(t.get('p_t'))} / {p_cell(pub.get('p'))} "
            f"| {verdict} / {pub_ni} | " + " | ".join(_f1_cells(scope.f1.get(name, {}))) + " |"
        )
    return rows


def families_table(scope: Scope, delta: float) -> list[str]:
    rows = [
        f"| policy | kind | rounds | tokens vs base | final IS | ΔIS [95% CI] | p | non-inferior | {F1_HEAD} |",
        "|" + "---|" * 12,
    ]
    shown = [n for n in policy_groups.ordered(scope.summary)
             if scope.summary[n]["kind"] in FAMILIES or n in ("shp", "entropy_only", "oracle_is")]  # fmt: skip
    for name in shown:
        r = scope.summary[name]
        kind = r["kind"]
        t = scope.tests.get(name, {})
        ci = f"[{cell(t.get('ci95_low'))}, {cell(t.get('ci95_high'))}]"
        rows.append(
            f"| {name} | {kind} | {cell(r['mean_rounds'], 2)} | {pct(r['token_saving'])} | {cell(r['mean_is'])} "
            f"| {cell(r['delta_is'], 3)} {ci} | {p_cell(t.get('p_t'))} | {report_power.verdict(r['non_inferior'], t)} "
            "| " + " | ".join(_f1_cells(scope.f1.get(name, {}))) + " |"
        )
    return [*rows, "", "Grouped by family; what each reads:", "", *policy_groups.legend(shown)]


def oracle_gap(scope: Scope) -> list[str]:
    """The oracle's ΔIS, and the share of it each judge-free policy (or best-round selector) recovers; and whether
    the oracle's round (the judge's best) is the rightest answer."""
    oracle = scope.summary.get("oracle_is")
    if oracle is None or oracle["delta_is"] is None:
        return ["- No oracle_is row (no judged drafts): no gap to measure."]
    gap = steady(float(oracle["delta_is"]))
    lines = [
        f"- Oracle gap (oracle_is ΔIS vs fixed_k6): **{gap:+.3f}** (the paper: +0.115), "
        f"p = {p_cell(scope.tests.get('oracle_is', {}).get('p_t'))}; tokens vs fixed_k6: {pct(oracle['token_saving'])} "
        "(it runs and judges every round" + ("" if scope.judge_tokens_per_call > 0 else "; this judge is free") + ").",
    ]
    le = scope.f1.get("oracle_is", {}).get("lenient")
    if le:
        lines.append(
            f"- The oracle's drafts against the gold answer: lenient ΔF1 {cell(le['mean_diff'], 3)} vs fixed_k6 "
            f"(p = {p_cell(le['p_t'])}): the round this judge scores best is "
            + ("not a more correct answer." if not (le["mean_diff"] > 0 and le["p_t"] < 0.05) else "more correct.")
        )
    # Judge-free: every policy that never consults IS to stop (all but the oracle and SHP with its gain signal).
    free = [(name, r) for name, r in scope.summary.items() if r["delta_is"] is not None and not r["consults_is"]]
    if gap > 0 and free:
        ranked = sorted(free, key=lambda nr: -float(nr[1]["delta_is"]))
        name, best = ranked[0]
        share = steady(float(best["delta_is"]) / gap)
        lines.append(
            f"- The best judge-free policy, **{name}**, has ΔIS {steady(float(best['delta_is'])):+.3f}: it closes "
            f"{steady(100 * share):.0f}% of the gap (paired t p = {p_cell(scope.tests.get(name, {}).get('p_t'))})"
            + ("; no judge-free signal here locates the best round." if share < 0.5 else ".")
        )
        lines.append(
            "- Share of the gap closed, per judge-free policy: "
            + ", ".join(f"{n} {steady(100 * float(r['delta_is']) / gap):+.0f}%" for n, r in ranked)
            + "."
        )
    return lines


def conjecture_lines(scope: Scope, paper: dict[str, Any]) -> list[str]:
    c, d, ref = scope.conjecture1, scope.distances, paper["distances"]
    if not c.get("n"):
        return ["- Too few rounds for Conjecture 1 (it needs trajectories with >= 3 rounds)."]
    return [
        "| statistic | ours | the paper |",
        "|---|---|---|",
        f"| per-round distances d_t (t >= 2) | {d['n']} | 300 |",
        f"| mean / median / max d_t | {cell(d['mean'])} / {cell(d['median'])} / {cell(d['max'])} "
        f"| {ref['mean']} / {ref['median']} / {ref['max']} |",
        f"| share below eps = {d['eps']:g} | {100 * float(d['share_below_eps']):.0f}% "
        f"| {100 * ref['share_below_eps']:.0f}% |",
        f"| mean OLS slope of d_t on t [95% CI] | {cell(c['mean_slope'], 4)} [{cell(c['slope_ci95_low'], 4)}, "
        f"{cell(c['slope_ci95_high'], 4)}] | {ref['mean_slope']} |",
        f"| one-sided Wilcoxon p, per step (every d_t − d_(t−1) < 0, t >= 3: {c['n_steps']} steps, not "
        f"independent within a trajectory) | {p_cell(c['wilcoxon_step_p'])} | {ref['wilcoxon_p']:.2g} |",
        f"| one-sided Wilcoxon p, per trajectory (each one's mean d_t − d_(t−1) < 0: {c['n']} values) "
        f"| {p_cell(c['wilcoxon_p'])} | – |",
        f"| strictly decreasing trajectories | {100 * float(c['frac_strictly_decreasing']):.0f}% "
        f"| {100 * ref['frac_strictly_decreasing']:.0f}% |",
    ]


def dynamics_lines(scope: Scope) -> list[str]:
    lines, a = [], scope.answers
    for d in scope.dynamics["dynamics"]:
        lines.append(
            f"- {d['trajectories']} trajectories: round-1 approval {100 * d['round1_approval_rate']:.0f}%; "
            f"the draft changes after round 1 in {100 * d['share_revised']:.0f}% (any byte), **the answer in "
            f"{100 * a['share_answer_changed']:.0f}%** (lenient reading, normalised; the last draft's answer differs "
            f"from round 1's in {100 * a['share_final_answer_changed']:.0f}%); {100 * a['share_repeat_rounds']:.0f}% "
            f"of rounds 2+ repeat an earlier draft word for word; {cell(d['mean_distinct_drafts'], 2)} distinct "
            "drafts per trajectory."
        )
    lines += ["", f"| round | mean d_t | mean IS (judge `{scope.judge}`) | Critic approved |", "|---|---|---|---|"]
    for r in scope.dynamics["by_round"]:
        approved = None if r["approval_rate"] is None else 100 * r["approval_rate"]
        lines.append(f"| {r['round']} | {cell(r['mean_distance'], 4)} | {cell(r['mean_is'])} | {cell(approved, 0)}% |")
    return lines


WEAK_RHO = 0.2  # below it, a rank correlation is called weak (Cohen's "small" is 0.1, "medium" 0.3)


def is_versus_f1_lines(test_scopes: Sequence[Scope]) -> list[str]:
    """Whether IS may be read as correctness here: how often the Critic approved, how often drafts repeat, and
    how each judge's IS ranks a question's rounds against answer F1 (one scope per judge, the same drafts)."""
    first = test_scopes[0]
    last = max(int(r["round"]) for r in first.dynamics["by_round"])
    critiqued = [r for r in first.dynamics["by_round"] if int(r["round"]) < last]  # no critique after the last round
    critiques = sum(int(r["trajectories"]) for r in critiqued)
    approved = sum(round(float(r["approval_rate"] or 0.0) * int(r["trajectories"])) for r in critiqued)
    lines = [
        f"**Read IS as what a judge rewards, not as correctness.** The Critic approved {approved} of {critiques} "
        f"critiques and {100 * first.answers['share_repeat_rounds']:.0f}% of rounds 2+ repeat an earlier draft word "
        "for word. Within a question, does a judge's IS rank the rounds as answer F1 does? Spearman's ρ between "
        "IS_t and F1_t over a question's rounds, the mean over the questions where both vary:",
        "",
    ]
    rhos = []
    for sc in test_scopes:
        r = sc.is_f1
        rhos.append(abs(float(r["mean_rho"] if r["mean_rho"] is not None else 0.0)))
        lines.append(
            f"- judge `{sc.judge}`: mean ρ {cell(r['mean_rho'], 3)} over {r['defined']} of {r['questions']} "
            "questions (in the others F1 or IS is the same every round)."
        )
    if max(rhos) < WEAK_RHO:
        lines += [
            "",
            f"Every |ρ| is under {WEAK_RHO}: IS hardly tells a question's better rounds from its worse ones, so a "
            "policy that stops on IS (the IS oracle included) is not choosing right answers. Read answer F1.",
        ]
    return lines


def judge_note(scope: Scope) -> str:
    """What the judge costs the policies that consult IS: priced in (an LLM), or nothing (the lexical judge)."""
    consult = sorted(n for n, r in scope.summary.items() if r["consults_is"])
    names = ", ".join(f"`{n}`" for n in consult) or "none"
    if scope.judge_tokens_per_call > 0:
        return (
            f"An LLM judge: its evaluation tokens ({scope.judge_tokens_per_call:.0f} a call on average) are priced "
            f"into the tokens of every policy that consults IS to stop ({names}), each round it judged: the "
            "paper's setting."
        )
    return (
        "The lexical judge makes no call: its IS is free, so the policies that consult IS to stop "
        f"({names}) pay nothing for it here. **Not the paper's setting** (its judge was the 8B LLM, paid every "
        "round): read their tokens in the LLM judge's tables."
    )
