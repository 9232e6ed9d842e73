"""The Markdown report of a store: tables shaped like the SHP paper's II/III, CSVs, figures.

    python -m analysis.report --store runs/store --out runs/report [--judge NAME] [--delta 0.02]

Everything is computed from the DuckDB views (analysis.connect) and
analysis.stats; the report names the judge and says when data is synthetic.
Files are built in a temporary folder next to ``out`` and moved in at the end,
so a failed run never leaves half a report.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from analysis import stats
from analysis.errors import said_by
from analysis.replay.db import DEFAULT_DELTA, AnalysisError
from analysis.replay.scope import ReplayScope, scope_of
from analysis.report import correctness as report_correctness
from analysis.report import costs as report_costs
from analysis.report import data as report_data
from analysis.report import dynamics as report_dynamics
from analysis.report import families as report_families
from analysis.report import power as report_power
from analysis.report.cells import cell, short_labels
from analysis.stats import DEFAULT_EPS
from analysis.stats import outcomes as stats_outcomes
from shp_ray.policy.families import FAMILIES
from shp_ray.policy.table import ABLATION_CELLS
from shp_ray.providers.prices import load_prices
from shp_ray.providers.registry import describe_provider
from storage.manifest import redact_text
from storage.parts import Store

BEST_QUERY = report_data.BEST_QUERY  # printed in the report as the question's SQL
EM_F1_NOTE = (
    "- EM / F1 (the strict reading): HotpotQA's exact match and token F1 (the official normalisation) of the "
    "returned draft's last line that starts with `Answer:` against the gold answer; a draft without one scores "
    "0. ΔF1 is paired against the baseline's last draft. They say whether IS tracks being right. The lenient "
    "reading (an inline `Answer:`, else the last sentence) is the `answers_lenient` view."
)


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with path.open("w", newline="") as fh:
        names = list(dict.fromkeys(k for r in rows for k in r))  # rows may carry extra columns (IS: TOST)
        w = csv.DictWriter(fh, fieldnames=names)
        w.writeheader()
        w.writerows(rows)


def _p(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return "<0.001" if float(x) < 0.001 else f"{float(x):.3f}"


def _policy_table(rows: list[dict], part: report_data.SplitData, delta: float, scores: Sequence[str]) -> list[str]:
    # Each outcome the split has: IS with its CI and tests where a judge scored the drafts, EM / F1 where the tasks
    # have reference answers, and every score at the stop with its paired difference against the baseline (the
    # primary outcome first, in ``scores``); the operational tokens in dollars per question if every call were
    # live / batch.
    tests, by_key = part.tests, part.outcomes_by_key()
    head = ["policy", "rounds", "op. tokens", "$ live", "$ batch", "saving"]
    for score in scores:
        head += [f"{score}_at_stop", f"Δ{score} [95% CI]", f"p {score}"]
    if part.has_is:
        head += ["IS", "ΔIS [95% CI]"]
    if part.has_answers:
        head += ["EM", "F1", "ΔF1"]
    head += ["p tokens (Holm)"]
    if part.has_is:
        head += ["p IS (Holm)", f"TOST δ={delta:g} p", "power (N for 0.8)", "non-inferior (IS)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        key = (r["gen_id"], r["policy"])
        tok, is_ = tests.get((*key, "operational_tokens"), {}), tests.get((*key, "is"), {})
        cells = [
            str(r["policy"]), cell(r["mean_rounds"], 2), cell(r["mean_operational_tokens"], 0),
            report_costs.usd(r.get("mean_operational_cost_live_usd")),
            report_costs.usd(r.get("mean_operational_cost_batch_usd")),
            f"{cell(100 * r['token_saving'] if r['token_saving'] is not None else None, 1)}%",
        ]  # fmt: skip
        for score in scores:
            o = by_key.get((str(r["gen_id"]), str(r["policy"]), score), {})
            cells += [cell(o.get("at_stop")), f"{cell(o.get('diff'), 4)} [{cell(o.get('ci95_low'), 4)}, "
                      f"{cell(o.get('ci95_high'), 4)}]", _p(o.get("p"))]  # fmt: skip
        if part.has_is:
            ci = f"[{cell(is_.get('ci95_low'))}, {cell(is_.get('ci95_high'))}]"
            cells += [cell(r["mean_is"]), f"{cell(r['delta_is'], 4)} {ci}"]
        if part.has_answers:
            cells += [cell(r.get("mean_em")), cell(r.get("mean_f1")), cell(r.get("delta_f1"), 4)]
        cells.append(_p(tok.get("p_t_holm")))
        if part.has_is:
            cells += [_p(is_.get("p_t_holm")), report_power.tost_p_cell(is_, _p(is_.get("tost_p"))),
                      report_power.power_cell(is_), report_power.verdict(r["non_inferior"], is_)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _outcome_lines(data: report_data.ReportData) -> list[str]:
    """What the report leads with, and one line per outcome the store lacks saying why it is left out."""
    tests = {s: ("exact McNemar test, Newcombe's interval" if s in data.pass_fail else
                 "paired t-test (Holm), bootstrap interval") for s in data.scores}  # fmt: skip
    lead = "IS (the judge's)" if data.primary == stats_outcomes.IS else f"`{data.primary}`"
    lines = [f"- Primary outcome: **{lead}** (`report.primary` chooses)."]
    if data.scores:
        lines.append(
            "- Scores at each policy's stop, paired against the baseline's last draft: "
            + "; ".join(f"`{s}` ({'pass/fail: the share that passes' if s in data.pass_fail else 'mean'}; "
                        f"{tests[s]})" for s in data.scores) + "."
        )  # fmt: skip
    lines += [f"- `{s}`: left out (its scorer failed on every draft: {error})." for s, error in data.failed.items()]
    if not data.has_is:
        lines.append("- IS: left out (no judge scored these drafts: no IS column, chart, test or oracle_is row).")
    if not data.has_answers:
        lines.append(
            "- EM / F1: left out (these tasks carry no reference answers, or no returned draft states an "
            "`Answer:` line to score: code, a loop of its own format)."
        )
    return lines


def _sensitivity_cell(r: dict) -> str:
    """yes/no (p; power at this δ), or no test when every paired difference is the same."""
    if r.get("degenerate"):
        return "no test (zero variance)"
    power = r.get("power")
    said = "" if power is None or math.isnan(power) else f"; power {power:.2f}"
    return ("yes" if r["non_inferior"] else "no") + f" ({_p(r['p'])}{said})"


def _answer_line_note(rows: list[dict]) -> str:
    """How many returned drafts state an answer line at all: without one, EM and F1 are 0 by rule."""
    shares = [r["share_answer_line"] for r in rows if r.get("share_answer_line") is not None]
    if not shares or all(r.get("mean_f1") is None for r in rows):
        return "EM / F1: unknown here (no gold answers for these scenarios)."
    lo, hi = 100 * min(shares), 100 * max(shares)
    said = f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}%"
    return f"Answer lines: {said} of the returned drafts state an `Answer:` line; the others score EM = F1 = 0."


def write_report(
    store: str | Path | Store | ReplayScope,
    out_dir: str | Path,
    *,
    deltas: Sequence[float] = stats.DEFAULT_DELTAS,
    eps: float = DEFAULT_EPS,
    seed: int = 0,
    n_resamples: int = 2000,
    primary: str | None = None,
) -> Path:
    """Write report.md, CSVs, PNG figures and the HTML report (index.html) for the store into ``out_dir``;
    returns report.md. A store holding several splits is reported split by split.

    ``store``: a path or Store (every trajectory, the defaults), or a :class:`ReplayScope` (one generation and
    scenario set of a sweep job, a judge, the weights, policies, the margin ``delta``, the price table).
    ``primary``: the outcome the report leads with (a score of the store, or ``is``; None: the task's correctness
    score where there is one, else IS: analysis.stats.outcomes.primary).
    """
    # matplotlib and plotly (~1 s together): imported by what draws, not by every import of the report's helpers
    from analysis.report import figures, html_report

    out = Path(out_dir)
    scope = scope_of(store)
    opts = report_data.Options(scope.delta, deltas, eps, seed, n_resamples, primary=primary)
    data = report_data.collect(scope, opts)
    setup, prov = data.setup, data.provenance
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=out.parent))
    try:
        tag = "SYNTHETIC data" if prov["synthetic"] else "data: " + ", ".join(map(str, prov["datasets"]))
        judge_name = setup.judge or "(no judgments: IS unknown)"
        title = f"{tag} · judge: {judge_name}"
        figures.pareto(data.parts, tmp / "pareto.png", title, data.primary)
        figures.tokens_saved(data.parts, tmp / "tokens_saved.png", title)
        if any(p.by_round for p in data.parts):
            figures.distance_by_round(data.parts, tmp / "distance_by_round.png", title, eps)
        csvs = []
        for name, rows in (
            ("policy_summary", data.summary),
            ("outcomes", [{"split": p.split, **r} for p in data.parts for r in p.outcomes]),
            ("paired_tests", [r for p in data.parts for r in p.tests_rows]),
            ("tost_sensitivity", [r for p in data.parts for r in p.sensitivity]),
            ("distance_by_round", [{"split": p.split, **r} for p in data.parts for r in p.by_round]),
            ("dynamics", [{"split": p.split, **r} for p in data.parts for r in p.dyn["dynamics"]]),
            ("correctness", [r for p in data.parts for r in p.correctness.get("rows", [])]),
            (
                "conjecture1",
                [{"split": p.split, **p.c1, **{f"distance_{k}": v for k, v in p.dsum.items()}} for p in data.parts],
            ),  # fmt: skip
        ):
            if rows:  # a CSV of no rows is left out (the report lists the CSVs it wrote), never 0 bytes
                _write_csv(tmp / f"{name}.csv", rows)
                csvs.append(f"{name}.csv")
        (tmp / "report.md").write_text(_markdown(data, deltas, csvs))
        html_report.write(data, tmp / html_report.INDEX, title)
        out.mkdir(parents=True, exist_ok=True)
        for f in tmp.iterdir():
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "report.md"


def _header(data: report_data.ReportData) -> list[str]:
    setup, prov = data.setup, data.provenance
    w = ", ".join(f"{m} {v:g}" for m, v in setup.weights.items())
    lines = ["# shp-ray replay report", ""]
    if prov["synthetic"]:
        lines += [
            "> **SYNTHETIC DATA.** These trajectories, embeddings and judge scores were generated by",
            "> `storage.synthetic` (random walks, random metrics) to exercise the pipeline. The numbers",
            "> say nothing about any model or stopping policy in the real world.",
            "",
        ]
    splits = ", ".join(f"{p.name} (N = {max(int(r['n']) for r in p.summary)})" for p in data.parts)
    return lines + [
        f"- Store: `{redact_text(setup.store)}`",
        f"- Judge: **{setup.judge or 'none (IS unknown)'}**"
        + (f" (prompt {setup.judge_prompt_version})" if setup.judge_prompt_version else ""),
        f"- Datasets: {', '.join(map(str, prov['datasets'])) or '–'}",
        f"- Splits: **{splits}**: every table, test and figure is of one split, never pooled.",
        "- Generations: "
        + "; ".join(
            f"`{g['gen_id']}` model {g['model']} via "
            f"**{describe_provider(str(g['provider_kind']), str(g['model']))}**, "
            f"embedder {g['embedder']}, T={g['max_rounds']}"
            for g in prov["generations"]
        ),
        f"- IS weights: {w}. Baseline: fixed_k{{depth}} (every generated round).",
        f"- Non-inferiority margin δ = {setup.delta:g} (one-sided TOST, α = 0.05). p-values Holm-adjusted "
        "across the policies of one generation and split. A “non-inferior” is a TOST that rejected: it holds at its N. "
        "A “no” carries its power (see each generation's power section): at small N it is not evidence of "
        "inferiority.",
        *_outcome_lines(data),
        *([EM_F1_NOTE] if data.has_answers else []),
        *report_costs.price_lines(setup.prices, data.parts[0].cost),
        "- The HTML report (index.html beside this file): the sortable policy table, the plots with their 95% "
        "intervals and a trajectory browser (every round's draft, critique, d_t, IS, scores, and where each "
        "policy stops).",
        "",
    ]


def _markdown(data: report_data.ReportData, deltas: Sequence[float], csvs: Sequence[str]) -> str:
    lines = _header(data)
    for part in data.parts:
        lines += _split_body(data, part, deltas)
    lines += ["## Figures", "", "![efficiency-quality Pareto](pareto.png)", "", "![tokens saved](tokens_saved.png)", ""]
    if any(p.by_round for p in data.parts):
        lines += ["![mean d_t per round](distance_by_round.png)", ""]
    lines += [f"CSVs (a split column in each): {', '.join(csvs)}.", ""]
    return "\n".join(lines)


def _stop_reasons(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table of which cascade stage stopped each cascade policy's trajectories, in shares."""
    reasons = ["| policy | critic | entropy | no_gain | failsafe |", "|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "cascade":
            shares = [cell(100 * r[f"share_{x}"], 0) + "%" for x in ("critic", "entropy", "no_gain", "failsafe")]
            reasons.append(f"| {r['policy']} | " + " | ".join(shares) + " |")
    return reasons


def _split_body(data: report_data.ReportData, part: report_data.SplitData, deltas: Sequence[float]) -> list[str]:
    setup, summary, tests, on = data.setup, part.summary, part.tests, f" · split {part.name}"
    scores = [s for s in data.scores if s in part.scores]
    short = short_labels(r["gen_id"] for r in summary)
    lines: list[str] = []
    for gen in sorted({r["gen_id"] for r in summary}):
        rows = [r for r in summary if r["gen_id"] == gen]
        n = rows[0]["n"]
        main = [
            r
            for r in rows
            if r["policy"] not in ABLATION_CELLS and "@" not in str(r["policy"]) and r["kind"] not in FAMILIES
        ]
        abl = [r for r in rows if r["policy"] in ABLATION_CELLS]
        grid = [r for r in rows if "@" in str(r["policy"]) and r["kind"] not in FAMILIES]
        lines += [f"## Generation `{short[gen]}`{on} (N = {n} trajectories)", ""]
        lines += [_answer_line_note(rows), ""] if part.has_answers else []
        lines += ["### Policies (cf. SHP Table II)", ""] + _policy_table(main, part, setup.delta, scores) + [""]
        if abl:
            lines += ["### Ablation: seven cells of {critic, entropy, gain} (cf. SHP Table III)", ""]
            lines += _policy_table(abl, part, setup.delta, scores) + [""]
        if grid:
            lines += ["### Grid cells", ""] + _policy_table(grid, part, setup.delta, scores) + [""]
        lines += ["### Why cascades stopped", ""] + _stop_reasons(main + abl) + [""]
        lines += report_costs.section(gen, main + abl + grid)
        if part.has_is:
            lines += report_power.section(gen, main + abl + grid, tests, setup.delta)
    lines += report_correctness.section(part.correctness, on)
    fam = report_families.section(part.fam, summary, tests, setup.delta)
    if fam:
        fam[0] += on
    lines += fam
    if part.has_is:
        lines += _best_and_sensitivity(part, deltas, short, on)
    return lines + _convergence(part, on)


def _best_and_sensitivity(part: report_data.SplitData, deltas: Sequence[float], short: dict, on: str) -> list[str]:
    """Which policy saves most at non-inferior IS, and how the verdicts move with δ (a split with IS only)."""
    tests = part.tests
    lines = [f"## Which policy saves most tokens at non-inferior IS?{on}", ""]
    if part.best:
        b = part.best[0]
        lines.append(
            f"**{b['policy']}** (split {part.name}): saves {100 * b['token_saving']:.1f}% of operational tokens with "
            f"mean IS {b['mean_is']:.3f} (ΔIS {b['delta_is']:+.4f}, one-sided 95% lower bound "
            f"{b['delta_is_lower95']:+.4f} > −δ); non-inferior: "
            f"{report_power.verdict(True, tests.get((b['gen_id'], b['policy'], 'is'), {}))}."
        )
    else:
        lines.append("No policy other than the fixed caps and the oracle is non-inferior at this δ.")
    lines += ["", "```sql", report_data.BEST_QUERY, "```", ""]
    lines += [
        f"## Sensitivity of non-inferiority to δ{on}",
        "",
        "Each cell: the verdict (TOST p; power at this N).",
        "",
    ]
    pols = list(dict.fromkeys((r["gen_id"], r["policy"]) for r in part.sensitivity))
    lines.append("| generation | policy | " + " | ".join(f"δ={d:g}" for d in deltas) + " |")
    lines.append("|---|---|" + "---|" * len(deltas))
    for gen, pol in pols:
        cells = [r for r in part.sensitivity if r["gen_id"] == gen and r["policy"] == pol]
        lines.append(f"| {short[gen]} | {pol} | " + " | ".join(_sensitivity_cell(r) for r in cells) + " |")
    return [*lines, ""]


def _convergence(part: report_data.SplitData, on: str) -> list[str]:
    """Conjecture 1, the distances and the revision dynamics of one split."""
    c1, dsum = part.c1, part.dsum
    lines = [f"## Conjecture 1: do successive drafts converge?{on}", ""]
    if c1.get("n"):
        lines += [
            f"- Trajectories with ≥ 2 distances: {c1['n']}",
            f"- Strictly decreasing d_t: {100 * c1['frac_strictly_decreasing']:.1f}%",
            f"- Mean OLS slope of d_t on t: {c1['mean_slope']:+.4f} "
            f"(bootstrap 95% CI [{c1['slope_ci95_low']:+.4f}, {c1['slope_ci95_high']:+.4f}])",
            f"- One-sided Wilcoxon per step (every d_t − d_(t−1) < 0, {c1['n_steps']} steps, not independent "
            f"within a trajectory): p = {_p(c1['wilcoxon_step_p'])}; per trajectory (each trajectory's mean "
            f"d_t − d_(t−1)): p = {_p(c1['wilcoxon_p'])}",
        ]
    else:
        lines.append("- Not enough rounds (needs trajectories with T ≥ 3).")
    dyn = report_dynamics.section(part.dyn)
    dyn[0] += on
    return lines + [
        f"- Distances (all d_t): mean {cell(dsum['mean'], 4)}, median {cell(dsum['median'], 4)}, "
        f"max {cell(dsum['max'], 4)}, below eps = {dsum['eps']:g}: "
        f"{cell(100 * dsum['share_below_eps'] if dsum['share_below_eps'] is not None else None, 1)}%",
        "",
        *dyn,
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.report", description="Write the replay report of a store.")
    ap.add_argument("--store", required=True, help="store root (<root>/<table>/part-*.parquet)")
    ap.add_argument("--out", required=True, help="folder for report.md, CSVs and figures")
    ap.add_argument("--judge", default=None, help="judge name when the store holds several")
    ap.add_argument("--weights", default=None, help='IS weights as JSON, e.g. {"faithfulness": 0.5, ...}')
    ap.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="non-inferiority margin of IS")
    ap.add_argument("--eps", type=float, default=DEFAULT_EPS, help="eps for the distance summary")
    ap.add_argument("--prices", default=None, help="price table YAML (default: the shipped shp_ray/data/prices.yaml)")
    ap.add_argument("--primary", default=None, help="the outcome to lead with: a score of the store, or is")
    args = ap.parse_args(argv)
    try:
        weights = json.loads(args.weights) if args.weights else None
        prices = load_prices(args.prices) if args.prices else None
        scope = ReplayScope(args.store, judge=args.judge, weights=weights, delta=args.delta, prices=prices)
        path = write_report(scope, args.out, eps=args.eps, primary=args.primary)
    except (AnalysisError, ValueError, OSError, duckdb.Error) as exc:
        print(f"report: {said_by(exc, {'judge': '--judge'})}", file=sys.stderr)
        return 2
    print(path)
    return 0
