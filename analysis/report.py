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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import duckdb

from analysis import figures, report_costs, report_dynamics, report_families, report_power, sql, stats
from analysis.db import DEFAULT_DELTA, AnalysisError, connect, setup_of
from analysis.errors import said_by
from analysis.report_cells import cell, fetch_dicts
from analysis.stats import DEFAULT_EPS
from shp_ray.policy.families import FAMILIES
from shp_ray.policy.table import ABLATION_CELLS, Policy
from shp_ray.providers.prices import PriceTable, load_prices
from shp_ray.providers.registry import describe_provider
from storage.manifest import redact_text

BEST_QUERY = sql.query("report_best_policy")  # printed in the report as the question's SQL


def _write_csv(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    with path.open("w", newline="") as fh:
        if not rows:
            return
        names = list(dict.fromkeys(k for r in rows for k in r))  # rows may carry extra columns (IS: TOST)
        w = csv.DictWriter(fh, fieldnames=names)
        w.writeheader()
        w.writerows(rows)


def _p(x: object) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return "<0.001" if float(x) < 0.001 else f"{float(x):.3f}"  # type: ignore[arg-type]


def _provenance(con: duckdb.DuckDBPyConnection) -> dict[str, object]:
    datasets = [r[0] for r in con.execute(sql.query("report_datasets")).fetchall()]
    gens = fetch_dicts(con, sql.query("report_generations"))
    judges = [r[0] for r in con.execute(sql.query("report_judges")).fetchall()]
    text = json.dumps([datasets, gens, judges], default=str).lower()
    return {"datasets": datasets, "generations": gens, "judges": judges, "synthetic": "synthetic" in text}


def _policy_table(summary: list[dict], tests: dict[tuple[str, str, str], dict], delta: float) -> list[str]:
    # EM / F1 (is the returned draft right?) beside IS; "non-inferior" always with its N and power; the
    # operational tokens in dollars per question if every call were live / batch.
    head = (
        "| policy | rounds | op. tokens | $ live | $ batch | saving | IS | ΔIS [95% CI] | EM | F1 | ΔF1 "
        f"| p tokens (Holm) | p IS (Holm) | TOST δ={delta:g} p | power (N for 0.8) | non-inferior |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in summary:
        key = (r["gen_id"], r["policy"])
        tok, is_ = tests.get((*key, "operational_tokens"), {}), tests.get((*key, "is"), {})
        ci = f"[{cell(is_.get('ci95_low'))}, {cell(is_.get('ci95_high'))}]"
        lines.append(
            f"| {r['policy']} | {cell(r['mean_rounds'], 2)} | {cell(r['mean_operational_tokens'], 0)} "
            f"| {report_costs.usd(r.get('mean_operational_cost_live_usd'))} "
            f"| {report_costs.usd(r.get('mean_operational_cost_batch_usd'))} "
            f"| {cell(100 * r['token_saving'] if r['token_saving'] is not None else None, 1)}% "
            f"| {cell(r['mean_is'])} | {cell(r['delta_is'], 4)} {ci} "
            f"| {cell(r.get('mean_em'))} | {cell(r.get('mean_f1'))} "
            f"| {cell(r.get('delta_f1'), 4)} | {_p(tok.get('p_t_holm'))} | {_p(is_.get('p_t_holm'))} "
            f"| {report_power.tost_p_cell(is_, _p(is_.get('tost_p')))} | {report_power.power_cell(is_)} "
            f"| {report_power.verdict(r['non_inferior'], is_)} |"
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
    store_root: str | Path,
    out_dir: str | Path,
    *,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
    delta: float = DEFAULT_DELTA,
    deltas: Sequence[float] = stats.DEFAULT_DELTAS,
    eps: float = DEFAULT_EPS,
    seed: int = 0,
    n_resamples: int = 2000,
    gen_id: str | None = None,
    scenario_ids: Sequence[str] | None = None,
    prices: PriceTable | None = None,
) -> Path:
    """Write report.md, CSVs and PNG figures for the store into ``out_dir``; returns report.md.

    ``gen_id`` / ``scenario_ids`` restrict it to one generation and scenario set (a sweep job);
    ``prices``: the price table of the cost columns (default: the shipped one).
    """
    out = Path(out_dir)
    con = connect(
        store_root, judge=judge, weights=weights, policies=policies, delta=delta, gen_id=gen_id,
        scenario_ids=scenario_ids, prices=prices,
    )  # fmt: skip
    try:
        setup = setup_of(con)
        prov = _provenance(con)
        summary = fetch_dicts(con, sql.query("report_summary"))
        if not summary:
            raise AnalysisError(f"store {setup.store} has no complete trajectories to report on")
        tests_rows = stats.compare_policies(con, delta=delta, seed=seed, n_resamples=n_resamples)
        tests = {(r["gen_id"], r["policy"], r["metric"]): r for r in tests_rows}
        sensitivity = stats.tost_sensitivity(con, deltas)
        c1 = stats.conjecture1(con, seed=seed)
        dsum = stats.distance_summary(con, eps=eps)
        by_round = stats.distance_by_round(con)
        best = fetch_dicts(con, BEST_QUERY)
        fam = report_families.collect(con)
        dyn = report_dynamics.collect(con)
        cost = report_costs.collect(con, setup.judge)
    finally:
        con.close()

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=out.parent))
    try:
        tag = "SYNTHETIC data" if prov["synthetic"] else "data: " + ", ".join(map(str, prov["datasets"]))
        judge_name = setup.judge or "(no judgments: IS unknown)"
        title = f"{tag} · judge: {judge_name}"
        figures.pareto(summary, tmp / "pareto.png", title)
        figures.tokens_saved(summary, tmp / "tokens_saved.png", title)
        if by_round:
            figures.distance_by_round(by_round, tmp / "distance_by_round.png", title, eps)
        _write_csv(tmp / "policy_summary.csv", summary)
        _write_csv(tmp / "paired_tests.csv", tests_rows)
        _write_csv(tmp / "tost_sensitivity.csv", sensitivity)
        _write_csv(tmp / "distance_by_round.csv", by_round)
        _write_csv(tmp / "dynamics.csv", dyn["dynamics"])
        _write_csv(tmp / "conjecture1.csv", [{**c1, **{f"distance_{k}": v for k, v in dsum.items()}}])
        md = _markdown(setup, prov, summary, tests, sensitivity, c1, dsum, best, bool(by_round), deltas, fam, dyn, cost)
        (tmp / "report.md").write_text(md)
        out.mkdir(parents=True, exist_ok=True)
        for f in tmp.iterdir():
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / "report.md"


def _markdown(
    setup, prov, summary, tests, sensitivity, c1, dsum, best, has_d, deltas, fam=None, dyn=None, cost=None
) -> str:  # noqa: ANN001, PLR0913, E501
    w = ", ".join(f"{m} {v:g}" for m, v in setup.weights.items())
    lines = ["# shp-ray replay report", ""]
    if prov["synthetic"]:
        lines += [
            "> **SYNTHETIC DATA.** These trajectories, embeddings and judge scores were generated by",
            "> `storage.synthetic` (random walks, random metrics) to exercise the pipeline. The numbers",
            "> say nothing about any model or stopping policy in the real world.",
            "",
        ]
    lines += [
        f"- Store: `{redact_text(setup.store)}`",
        f"- Judge: **{setup.judge or 'none (IS unknown)'}**"
        + (f" (prompt {setup.judge_prompt_version})" if setup.judge_prompt_version else ""),
        f"- Datasets: {', '.join(map(str, prov['datasets'])) or '–'}",
        "- Generations: "
        + "; ".join(
            f"`{g['gen_id']}` model {g['model']} via "
            f"**{describe_provider(str(g['provider_kind']), str(g['model']))}**, "
            f"embedder {g['embedder']}, T={g['max_rounds']}"
            for g in prov["generations"]
        ),
        f"- IS weights: {w}. Baseline: fixed_k{{depth}} (every generated round).",
        f"- Non-inferiority margin δ = {setup.delta:g} (one-sided TOST, α = 0.05). p-values Holm-adjusted "
        "across the policies of one generation. Every “non-inferior” carries its N and power (see each "
        "generation's power section): at small N it is not evidence.",
        "- EM / F1: HotpotQA's exact match and token F1 (the official normalisation) of the returned draft's "
        "last `Answer:` line against the gold answer; a draft without one scores 0. ΔF1 is paired against "
        "the baseline's last draft. They say whether IS tracks being right.",
        *report_costs.price_lines(setup.prices, cost or {}),
        "",
    ]
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
        lines += [f"## Generation `{gen}` (N = {n} trajectories)", ""]
        lines += [_answer_line_note(rows), "", "### Policies (cf. SHP Table II)", ""]
        lines += _policy_table(main, tests, setup.delta) + [""]
        if abl:
            lines += ["### Ablation: seven cells of {critic, entropy, gain} (cf. SHP Table III)", ""]
            lines += _policy_table(abl, tests, setup.delta) + [""]
        if grid:
            lines += ["### Grid cells", ""] + _policy_table(grid, tests, setup.delta) + [""]
        reasons = ["| policy | critic | entropy | no_gain | failsafe |", "|---|---|---|---|---|"]
        for r in main + abl:
            if r["kind"] == "cascade":
                shares = [cell(100 * r[f"share_{x}"], 0) + "%" for x in ("critic", "entropy", "no_gain", "failsafe")]
                reasons.append(f"| {r['policy']} | " + " | ".join(shares) + " |")
        lines += ["### Why cascades stopped", ""] + reasons + [""]
        lines += report_costs.section(gen, main + abl + grid)
        lines += report_power.section(gen, main + abl + grid, tests, setup.delta)
    lines += report_families.section(fam or {}, summary, tests, setup.delta)
    lines += ["## Which policy saves most tokens at non-inferior IS?", ""]
    if best:
        b = best[0]
        lines.append(
            f"**{b['policy']}**: saves {100 * b['token_saving']:.1f}% of operational tokens with mean IS "
            f"{b['mean_is']:.3f} (ΔIS {b['delta_is']:+.4f}, one-sided 95% lower bound {b['delta_is_lower95']:+.4f} "
            f"> −δ); non-inferior: {report_power.verdict(True, tests.get((b['gen_id'], b['policy'], 'is'), {}))}."
        )
    else:
        lines.append("No policy other than the fixed caps and the oracle is non-inferior at this δ.")
    lines += ["", "```sql", BEST_QUERY, "```", ""]
    lines += ["## Sensitivity of non-inferiority to δ", "", "Each cell: the verdict (TOST p; power at this N).", ""]
    pols = list(dict.fromkeys((r["gen_id"], r["policy"]) for r in sensitivity))
    lines.append("| generation | policy | " + " | ".join(f"δ={d:g}" for d in deltas) + " |")
    lines.append("|---|---|" + "---|" * len(deltas))
    for gen, pol in pols:
        cells = [r for r in sensitivity if r["gen_id"] == gen and r["policy"] == pol]
        lines.append(f"| {gen} | {pol} | " + " | ".join(_sensitivity_cell(r) for r in cells) + " |")
    lines += ["", "## Conjecture 1: do successive drafts converge?", ""]
    if c1.get("n"):
        lines += [
            f"- Trajectories with ≥ 2 distances: {c1['n']}",
            f"- Strictly decreasing d_t: {100 * c1['frac_strictly_decreasing']:.1f}%",
            f"- Mean OLS slope of d_t on t: {c1['mean_slope']:+.4f} "
            f"(bootstrap 95% CI [{c1['slope_ci95_low']:+.4f}, {c1['slope_ci95_high']:+.4f}])",
            f"- One-sided Wilcoxon (mean d_t − d_(t−1) < 0): p = {_p(c1['wilcoxon_p'])}",
        ]
    else:
        lines.append("- Not enough rounds (needs trajectories with T ≥ 3).")
    lines += [
        f"- Distances (all d_t): mean {cell(dsum['mean'], 4)}, median {cell(dsum['median'], 4)}, "
        f"max {cell(dsum['max'], 4)}, below eps = {dsum['eps']:g}: "
        f"{cell(100 * dsum['share_below_eps'] if dsum['share_below_eps'] is not None else None, 1)}%",
        "",
        *report_dynamics.section(dyn or {}),
        "## Figures",
        "",
        "![efficiency-quality Pareto](pareto.png)",
        "",
        "![tokens saved per policy](tokens_saved.png)",
        "",
    ]
    if has_d:
        lines += ["![mean d_t per round](distance_by_round.png)", ""]
    lines += [
        "CSVs: policy_summary.csv, paired_tests.csv, tost_sensitivity.csv, distance_by_round.csv, conjecture1.csv,"
        " dynamics.csv.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.report", description="Write the replay report of a store.")
    ap.add_argument("--store", required=True, help="store root (<root>/<table>/part-*.parquet)")
    ap.add_argument("--out", required=True, help="folder for report.md, CSVs and figures")
    ap.add_argument("--judge", default=None, help="judge name when the store holds several")
    ap.add_argument("--weights", default=None, help='IS weights as JSON, e.g. {"faithfulness": 0.5, ...}')
    ap.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="non-inferiority margin of IS")
    ap.add_argument("--eps", type=float, default=DEFAULT_EPS, help="eps for the distance summary")
    ap.add_argument("--prices", default=None, help="price table YAML (default: the shipped shp_ray/data/prices.yaml)")
    args = ap.parse_args(argv)
    try:
        weights = json.loads(args.weights) if args.weights else None
        prices = load_prices(args.prices) if args.prices else None
        path = write_report(
            args.store, args.out, judge=args.judge, weights=weights, delta=args.delta, eps=args.eps, prices=prices
        )
    except (AnalysisError, ValueError, OSError, duckdb.Error) as exc:
        print(f"report: {said_by(exc, {'judge': '--judge'})}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
