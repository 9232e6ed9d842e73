"""The report's correctness section: where the store has a pass/fail score per round (a code loop's hidden_pass),
each policy's pass_at_stop beside its IS and tokens, with its exact paired tests, the oracle's gap and what
revisions break and fix (analysis.stats.correctness), per split. sweeps.code_results renders RESULTS.md's code section
with the same tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from analysis.errors import AnalysisError
from analysis.report.cells import cell, steady
from analysis.stats import correctness
from shp_ray.policy import groups as policy_groups
from shp_ray.policy import resample


def collect(con: duckdb.DuckDBPyConnection, primary: str | None = None) -> dict:
    """What the section shows, or {} when the store has no pass/fail score to judge correctness by: ``primary``
    (report.primary) when it is one of the store's pass/fail scores, else ``hidden_pass``, else the only pass/fail
    score (correctness.pick_score; several, none of them hidden_pass or named: none)."""
    named = primary if primary is not None and primary in correctness.pass_fail_scores(con) else None
    try:
        score = correctness.pick_score(con, named)
    except AnalysisError:  # several pass/fail scores, none of them hidden_pass: each is still an outcome column
        return {}
    if score is None:
        return {}
    return {
        "score": score,
        "rows": correctness.compare_pass(con, score),
        "rounds": correctness.by_round(con, score),
        "breaks": correctness.break_rates(con, score),
        "changes": correctness.revision_changes(con, score),
    }


def section(data: dict, on: str = "") -> list[str]:
    """The Markdown of one split's correctness (``on``: the heading's split suffix); [] without hidden_pass."""
    if not data or not data["rows"]:
        return []
    what = "on the hidden tests" if data["score"] == correctness.DEFAULT_SCORE else f"of `{data['score']}`"
    lines = [f"## Correctness: pass at stop {what}{on}", ""]
    lines += ["Pass rate by round (fixed_k{t} returns round t's draft):", ""]
    lines += round_lines(data["rounds"], data["breaks"], data.get("changes", ()))
    for gen in sorted({str(r["gen_id"]) for r in data["rows"]}):
        rows = [r for r in data["rows"] if str(r["gen_id"]) == gen]
        lines += ["", f"Pass at stop per policy (generation `{gen[:8]}`):", ""]
        lines += policy_lines(rows, data["score"])
    return [*lines, ""]


def _pct(x: object, nd: int = 1) -> str:
    return "–" if x is None or x != x else f"{steady(100 * float(x)):.{nd}f}%"  # noqa: PLR0124 - NaN


def _pts(x: object) -> str:
    """A difference of two rates, in percentage points."""
    return "–" if x is None or x != x else f"{steady(100 * float(x)):+.1f}"  # noqa: PLR0124 - NaN


def _size(x: object) -> str:
    """A magnitude in percentage points (no sign)."""
    return "–" if x is None or x != x else f"{steady(100 * float(x)):.1f}"  # noqa: PLR0124 - NaN


def _p(x: object) -> str:
    if x is None or x != x:  # noqa: PLR0124 - NaN
        return "–"
    x = steady(float(x))
    return f"{x:.2g}" if x < 0.01 else f"{x:.2f}"


def _saving(x: object) -> str:
    """Tokens against the baseline: a saving of 0.38 is -38%."""
    if x is None:
        return "–"
    pct = steady(100 * float(x))
    return "0%" if round(pct) == 0 else f"{-pct:+.0f}%"


def _vs(r: dict, suffix: str) -> str:
    return (f"{_pts(r[f'diff{suffix}'])} [{_pts(r[f'ci95_low{suffix}'])}, {_pts(r[f'ci95_high{suffix}'])}] "
            f"(+{r[f'gained{suffix}']}/−{r[f'lost{suffix}']}), p = {_p(r[f'p{suffix}'])}")  # fmt: skip


def change_lines(changes: Sequence[dict]) -> list[str]:
    """What the revisions did to the drafts themselves: a verbatim copy is not a revision, so fixes and breaks are
    counted again among the drafts that changed."""
    out = []
    for c in changes:
        revisions, changed = int(c["revisions"]), int(c["changed"])
        share = f" ({_pct(c['repeats'] / revisions)})" if revisions else ""
        out.append(
            f"- Drafts that changed: {changed} of {revisions} revisions; {c['repeats']} later rounds{share} repeat an "
            f"earlier draft of their trajectory word for word; {cell(c['distinct_per_trajectory'], 2)} distinct drafts "
            f"per trajectory ({c['trajectories']} trajectories). Among the changed drafts: fixed {c['fixed']} of "
            f"{c['changed_from_failing']} that revised a failing draft, broke {c['broke']} of "
            f"{c['changed_from_passing']} that revised a passing one."
        )
    return out


def round_lines(rounds: Sequence[dict], breaks: Sequence[dict], changes: Sequence[dict] = ()) -> list[str]:
    """The pass rate at every round (fixed_k{t} returns round t's draft), what revising did, and (``changes``) what
    it did among the drafts that changed."""
    lines = ["| round | trajectories | drafts that pass | pass rate | broke (passed at t−1) | fixed (failed at t−1) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rounds:
        broke = "–" if r["broke"] is None else f"{r['broke']} of {r['from_passing']}"
        fixed = "–" if r["fixed"] is None else f"{r['fixed']} of {r['from_failing']}"
        lines.append(f"| {r['round']} | {r['n']} | {r['passed']} | {_pct(r['pass_rate'])} | {broke} | {fixed} |")
    for b in breaks:
        lo, hi = b["break_ci95"]
        flo, fhi = b["fix_ci95"]
        lines += ["", (
            f"- Revisions: {b['revisions']}. A revision of a passing draft broke it {b['broke']} times in "
            f"{b['from_passing']} (break rate {_pct(b['break_rate'])}, 95% CI {_pct(lo)}–{_pct(hi)}); a revision of "
            f"a failing draft fixed it {b['fixed']} times in {b['from_failing']} (fix rate {_pct(b['fix_rate'])}, "
            f"95% CI {_pct(flo)}–{_pct(fhi)}); net {int(b['net']):+d} passing drafts."
        )]  # fmt: skip
    return lines + change_lines(changes)


def is_known(rows: Sequence[dict]) -> bool:
    """Whether a judge scored any draft of these policy rows (else no IS column, no IS oracle: values that do not
    exist)."""
    return any(r.get("mean_is") is not None for r in rows)


def policy_lines(rows: Sequence[dict], score: str) -> list[str]:
    """pass_at_stop per policy with its paired tests, grouped by family (analysis.report.policy_groups: the bounds
    and the resampling control last, together), and the oracle's gap with the share each policy closes."""
    base = f"fixed_k{max(int(r['depth']) for r in rows)}"  # the baseline: every round of the deepest trajectory
    test = str(rows[0].get("test", "McNemar"))
    has_is = is_known(rows)  # no judge scored a draft: no column of dashes
    lines = [
        f"| policy | kind | rounds | tokens vs {base} |{' IS |' if has_is else ''} pass_at_stop | Δ vs {base}, "
        f"pts [95% CI] (+won/−lost), {test} p | Δ vs fixed_k1, pts [95% CI] (+won/−lost), {test} p "
        "| gap to the oracle, pts |",
        "|" + "---|" * (9 if has_is else 8),
    ]
    for r in sorted(rows, key=lambda r: (policy_groups.group(str(r["policy"])).order, str(r["policy"]))):
        lines.append(
            f"| {r['policy']} | {r['kind']} | {cell(r['mean_rounds'], 2)} | {_saving(r['token_saving'])} "
            + (f"| {cell(r['mean_is'])} " if has_is else "")
            + f"| {_pct(r['pass_at_stop'])} ({round(r['pass_at_stop'] * r['n'])}/{r['n']}) "
            f"| {_vs(r, '')} | {_vs(r, '_k1')} | {_pts(r['gap'])} |"
        )
    oracle = next((r for r in rows if r["policy"] == f"oracle_{score}"), None)
    if oracle is None:
        return [*lines, "", control_line(rows, base), mde_line(rows)]
    first, best = oracle["first_pass"], oracle["oracle_pass"]
    lines += ["", (
        f"- The oracle (`oracle_{score}`: stop at the earliest round whose draft passes; it runs the hidden tests, so "
        f"it is a bound, not a policy) passes {_pct(best)}, against {_pct(first)} at round 1 and "
        f"{_pct(oracle['baseline_pass'])} after every round ({base}): the correctness the loop's rounds hold is "
        f"{_pts(best - first)} pts above the first draft."
    ), control_line(rows, base)]  # fmt: skip
    closing = correctness.judge_free_closing(rows)
    if closing:
        lines.append(
            "- Share of the fixed_k1 → oracle gap closed, per judge-free policy (stops without the judge's IS): "
            + ", ".join(f"{name} {steady(100 * share):+.0f}%" for name, share in closing)
            + "."
        )
    else:
        lines.append(
            "- No round after the first passes where round 1 fails: there is no fixed_k1 → oracle gap to close."
        )
    return [*lines, mde_line(rows)]


def control_line(rows: Sequence[dict], base: str) -> str:
    """Resampling instead of revising at equal compute (shp_ray.policy.resample), said beside never revising
    (fixed_k1) and the oracle's bound; one line saying it is left out where the replay holds no control."""
    control = next((r for r in rows if r["policy"] == resample.NAME), None)
    if control is None:
        return (
            f"- No resampling control beside these drafts: `{resample.NAME}` needs a generation that revises and "
            "a `critic=none` one of the same model and rounds, tasks and epochs in one replay; left out."
        )
    spent = control["token_saving"]
    cheaper = (
        f"; it spent {_saving(spent).lstrip('-')} fewer tokens, as the store holds no more than "
        f"{int(control['depth'])} fresh drafts per task and epoch"
        if spent is not None and spent > 0.005
        else ""
    )
    return (
        f"- Resampling instead of revising at equal compute (`{resample.NAME}`, the self-repair literature's control: "
        f"fresh first drafts of the same task and epoch, as many as {base}'s tokens buy, the first the visible tests "
        f"pass returned) passes {_pct(control['pass_at_stop'])}, against {_pct(control['first_pass'])} never revising "
        f"(fixed_k1), {_pct(control['baseline_pass'])} revising every round ({base}) and "
        f"{_pct(control['oracle_pass'])} for the revising loop's oracle, a bound{cheaper}."
    )  # fmt: skip


def mde_line(rows: Sequence[dict]) -> str:
    """The table's minimum detectable difference, with what it assumes."""
    units = int(min(r.get("clusters", r["n"]) for r in rows))
    what = "tasks" if rows[0].get("test", "McNemar") != "McNemar" else "trajectories"
    first = float(rows[0]["first_pass"] or 0.0)
    return (
        f"- Minimum detectable difference at 80% power (two-sided 5%, {units} {what}): "
        f"{_size(correctness.table_mde(rows))} pts, for policies whose drafts disagree as often as two independent "
        f"drafts at the first draft's pass rate ({_pct(first)}) would. Smaller differences are not ruled out."
    )


def feedback_lines(rows: Sequence[dict]) -> list[str]:
    """Feedback against resampling (analysis.stats.feedback.compare) for one split: per policy, the pass rate at its
    stop with the Critic's report and with fresh samples instead, over the same tasks and epochs."""
    if not rows:
        return []
    test, ci = rows[0]["test"], rows[0]["ci"]
    lines = [
        f"| policy | trajectories (tasks) | with feedback | resampling | Δ feedback − resampling, pts [95% CI: {ci}] "
        f"| {test} p |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | {r['n']} ({r['tasks']}) | {_pct(r['feedback'])} | {_pct(r['resampling'])} "
            f"| {_pts(r['diff'])} [{_pts(r['ci95_low'])}, {_pts(r['ci95_high'])}] | {_p(r['p'])} |"
        )
    return [*lines, "", (
        f"- Minimum detectable difference at 80% power (two-sided 5%, {rows[0]['tasks']} tasks): "
        f"{_size(rows[0]['mde'])} pts, for outcomes that disagree as often as two independent drafts at round 1's "
        f"pass rate ({_pct(rows[0]['first'])}) would. Smaller differences are not ruled out."
    )]  # fmt: skip
