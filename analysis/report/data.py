"""What a report shows, read from the store split by split: the Markdown, the figures and the HTML report share it.

A store holding several splits (dev and test) is read through one connection per split (the scope narrowed to that
split's scenarios), so every table, test, figure and headline is of one split, and says which.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb

from analysis import scipy_stats as st
from analysis import sql, stats
from analysis.replay.db import AnalysisError, Setup, connect, setup_of
from analysis.replay.scope import ReplayScope
from analysis.report import correctness as report_correctness
from analysis.report import costs as report_costs
from analysis.report import dynamics as report_dynamics
from analysis.report import families as report_families
from analysis.sql.rows import fetch_dicts, fetch_row
from analysis.stats import correctness, outcomes

BEST_QUERY = sql.query("report_best_policy")  # printed in the report as the question's SQL
ORACLE_IS = "oracle_is"


@dataclass(frozen=True)
class Options:
    """How the statistics are computed (the report's keyword arguments)."""

    delta: float
    deltas: Sequence[float]
    eps: float
    seed: int = 0
    n_resamples: int = 2000
    trajectories: int = 20_000  # per split, the most the HTML report's browser holds (every round's draft ...)
    primary: str | None = None  # the outcome the report leads with (report.primary; None: outcomes.primary's pick)


def answers_known(summary: Iterable[Mapping[str, Any]]) -> bool:
    """Whether EM / F1 say anything in these policy_summary rows (the report's, the console table's): the tasks carry
    reference answers and some returned draft states an ``Answer:`` line (else every draft scores 0 by rule, as code
    does: no EM / F1 columns)."""
    known = [r for r in summary if r.get("mean_f1") is not None]
    return any(r.get("share_answer_line") is None or r["share_answer_line"] > 0 for r in known)


@dataclass
class SplitData:
    """Everything the report shows of one split."""

    split: str | None
    summary: list[dict]
    tests_rows: list[dict]
    sensitivity: list[dict]
    c1: dict
    dsum: dict
    by_round: list[dict]
    best: list[dict]
    fam: dict
    dyn: dict
    cost: dict
    intervals: dict[tuple[str, str], dict] = field(default_factory=dict)
    rounds: list[dict] = field(default_factory=list)  # the trajectory browser's rows (Options.trajectories)
    stops: list[dict] = field(default_factory=list)
    trajectories: int = 0  # how many the split has (the browser may hold fewer)
    correctness: dict = field(default_factory=dict)  # hidden_pass at each stop (report_correctness; {} without it)
    outcomes: list[dict] = field(default_factory=list)  # every score at each stop with its test (stats.outcomes)
    scores: list[str] = field(default_factory=list)  # the split's scores (each an outcome)
    pass_fail: list[str] = field(default_factory=list)  # those of them that are pass/fail (✓/✗ in the browser)
    failed: dict[str, str] = field(default_factory=dict)  # scores with no value (every call failed): one error each

    @property
    def tests(self) -> dict[tuple[str, str, str], dict]:
        return {(r["gen_id"], r["policy"], r["metric"]): r for r in self.tests_rows}

    @property
    def has_is(self) -> bool:
        """Whether a judge scored the split's drafts (else IS is unknown: no IS column, chart or oracle_is row)."""
        return any(r.get("n_is") for r in self.summary)

    @property
    def has_answers(self) -> bool:
        return answers_known(self.summary)

    def outcomes_by_key(self) -> dict[tuple[str, str, str], dict]:
        """The outcome rows by (gen_id, policy, score)."""
        return {(str(r["gen_id"]), str(r["policy"]), str(r["score"])): r for r in self.outcomes}

    @property
    def name(self) -> str:
        """The split as the report names it ("no split recorded" when the scenarios do not say)."""
        return self.split or "no split recorded"


@dataclass
class ReportData:
    setup: Setup
    provenance: dict[str, Any]
    parts: list[SplitData]
    primary: str = outcomes.IS  # the outcome the report leads with (a score's name, or "is")

    @property
    def scores(self) -> list[str]:
        """Every score of the report's splits, the primary first."""
        names = sorted({s for p in self.parts for s in p.scores})
        return sorted(names, key=lambda s: s != self.primary)

    @property
    def pass_fail(self) -> set[str]:
        return {s for p in self.parts for s in p.pass_fail}

    @property
    def failed(self) -> dict[str, str]:
        """The scores left out because they hold no value in any split (every scorer call failed), one error each."""
        known = {s for p in self.parts for s in p.scores}
        return {s: e for p in self.parts for s, e in p.failed.items() if s not in known}

    @property
    def has_is(self) -> bool:
        return any(p.has_is for p in self.parts)

    @property
    def has_answers(self) -> bool:
        return any(p.has_answers for p in self.parts)

    @property
    def summary(self) -> list[dict]:
        return [r for p in self.parts for r in p.summary]


def outcome_label(primary: str, pass_fail: bool) -> str:
    """The primary outcome as an axis names it."""
    if primary == outcomes.IS:
        return "mean IS of the returned draft"
    return f"{primary} at stop (share that passes)" if pass_fail else f"mean {primary} at stop"


def outcome_points(part: SplitData, primary: str) -> list[tuple[dict, float, tuple[float, float]]]:
    """(policy_summary row, value, its 95% interval) of each policy of one split on the primary outcome: IS with
    its t interval, a pass/fail score's share with its Wilson interval, another score's mean (no interval: the
    report gives its paired difference's). Rows without a value are left out."""
    out = []
    by_key = part.outcomes_by_key()
    for r in part.summary:
        if primary == outcomes.IS:
            if r["mean_is"] is not None:
                ci = part.intervals.get((str(r["gen_id"]), str(r["policy"])), {}).get("is_ci", (math.nan, math.nan))
                out.append((r, float(r["mean_is"]), ci))
            continue
        o = by_key.get((str(r["gen_id"]), str(r["policy"]), primary), {})
        if o.get("at_stop") is None:
            continue
        y, n = float(o["at_stop"]), int(o["n"])
        ci = correctness.wilson(round(y * n), n) if o["pass_fail"] else (math.nan, math.nan)
        out.append((r, y, ci))
    return out


def t_interval(n: int, mean: float | None, sd: float | None) -> tuple[float, float]:
    """The 95% t interval of a mean (NaN, NaN when undefined: fewer than 2 values)."""
    if mean is None or n < 2 or sd is None or math.isnan(sd):
        return math.nan, math.nan
    half = float(st.t_ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def intervals(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict]:
    """Per (gen_id, policy): the 95% intervals of the mean tokens, the mean IS and the token saving."""
    out = {}
    for r in fetch_dicts(con, sql.query("report_intervals")):
        tok = t_interval(int(r["n"]), r["mean_tokens"], r["sd_tokens"])
        is_ = t_interval(int(r["n_is"]), r["mean_is"], r["sd_is"])
        saved = t_interval(int(r["n"]), r["mean_saved"], r["sd_saved"])
        base = r["mean_baseline"] or math.nan
        out[(str(r["gen_id"]), str(r["policy"]))] = {
            "n": int(r["n"]),
            "n_is": int(r["n_is"]),
            "tokens_ci": tok,
            "is_ci": is_,
            # the saving is sum(saved) / sum(baseline) = mean(saved) / mean(baseline): its interval, the paired
            # mean's t interval over the baseline's mean (taken as known)
            "saving_ci": (saved[0] / base, saved[1] / base) if base else (math.nan, math.nan),
        }
    return out


def _collect(con: duckdb.DuckDBPyConnection, split: str | None, judge: str | None, opts: Options) -> SplitData:
    summary = fetch_dicts(con, sql.query("report_summary"))
    if not summary:
        raise AnalysisError(f"store {setup_of(con).store} has no complete trajectories to report on")
    data = SplitData(
        split=split,
        summary=summary,
        tests_rows=stats.compare_policies(con, delta=opts.delta, seed=opts.seed, n_resamples=opts.n_resamples),
        sensitivity=stats.tost_sensitivity(con, opts.deltas),
        c1=stats.conjecture1(con, seed=opts.seed),
        dsum=stats.distance_summary(con, eps=opts.eps),
        by_round=stats.distance_by_round(con),
        best=fetch_dicts(con, BEST_QUERY),
        fam=report_families.collect(con),
        dyn=report_dynamics.collect(con),
        cost=report_costs.collect(con, judge),
        intervals=intervals(con),
        outcomes=outcomes.compare_outcomes(con, delta=opts.delta, seed=opts.seed, n_resamples=opts.n_resamples),
        scores=outcomes.score_names(con),
        failed=outcomes.failed_scores(con),
        pass_fail=correctness.pass_fail_scores(con),
    )
    if not data.has_is:  # no judge: oracle_is stops at round 1 on unknown IS (policy_summary has no row of it either)
        data.outcomes = [r for r in data.outcomes if r["policy"] != ORACLE_IS]
    _correctness(con, data, opts.primary)
    data.trajectories = fetch_row(con, sql.query("replay_inputs_count"))[0]
    if opts.trajectories:
        data.rounds = fetch_dicts(con, sql.query("report_trajectory_rounds"), [opts.trajectories])
        data.stops = fetch_dicts(con, sql.query("report_trajectory_stops"), [opts.trajectories])
        data.stops = [r for r in data.stops if data.has_is or r["policy"] != ORACLE_IS]
    return data


def _correctness(con: duckdb.DuckDBPyConnection, data: SplitData, primary: str | None) -> None:
    """The split's correctness section: of ``primary`` where it is one of the split's pass/fail scores, else of
    the default pick (report_correctness.collect); no oracle_is row where no judge scored a draft."""
    data.correctness = report_correctness.collect(con, primary)
    if data.correctness and not data.has_is:
        data.correctness["rows"] = [r for r in data.correctness["rows"] if r["policy"] != ORACLE_IS]


def provenance(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    datasets = [r[0] for r in con.execute(sql.query("report_datasets")).fetchall()]
    gens = fetch_dicts(con, sql.query("report_generations"))
    judges = [r[0] for r in con.execute(sql.query("report_judges")).fetchall()]
    text = json.dumps([datasets, gens, judges], default=str).lower()
    return {"datasets": datasets, "generations": gens, "judges": judges, "synthetic": "synthetic" in text}


def collect(scope: ReplayScope, opts: Options) -> ReportData:
    """Read the report's data: one connection over ``scope``, and when it holds several splits, one more per
    split (narrowed to that split's scenarios)."""
    con = connect(scope)
    try:
        setup = setup_of(con)
        prov = provenance(con)
        splits = con.execute(sql.query("report_splits")).fetchall()
        parts = [_collect(con, splits[0][0] if splits else None, setup.judge, opts)] if len(splits) <= 1 else []
    finally:
        con.close()
    for split, ids in splits if not parts else ():
        con = connect(replace(scope, scenario_ids=list(ids)))
        try:
            parts.append(_collect(con, split, setup.judge, opts))
        finally:
            con.close()
    data = ReportData(setup, prov, parts)
    scores = sorted({s for p in parts for s in p.scores})
    data.primary = outcomes.primary(opts.primary, scores, sorted(data.pass_fail), data.has_is)
    # A pass/fail score that leads by the default rule without being the default pick (several, none hidden_pass:
    # the first) is the report's correctness too: its section and correctness.csv, as when it is named.
    for part, ids in zip(parts, [None] if len(splits) <= 1 else [ids for _, ids in splits], strict=True):
        if data.primary in part.pass_fail and part.correctness.get("score") != data.primary:
            con = connect(scope if ids is None else replace(scope, scenario_ids=list(ids)))
            try:
                _correctness(con, part, data.primary)
            finally:
                con.close()
    return data
