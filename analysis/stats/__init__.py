"""Paired statistics of the replay (scipy): every policy against fixed_k{depth}.

Per policy and generation, on the trajectories both ran (strictly paired:
identical drafts): paired t-test and Wilcoxon signed-rank on rounds,
operational tokens and IS; Cohen's d_z; a bootstrap 95% CI of the mean
difference; TOST non-inferiority of IS with margin delta (and a sensitivity
table over delta); Holm correction across policies. Conjecture 1 (distances
shrink) and the distance summary come from the ``rounds`` view.

The TOST planner (:func:`tost_power`, :func:`tost_n_needed`, :func:`tost_plan`) says what a
"non-inferior" is worth: the power at the observed N and SD, and the N for power 0.8. At the
demo's N = 4 a "non-inferior" is no evidence, and the report and shp-sweep say so.

Degenerate samples get defined answers rather than NaN warnings: a difference
that is identically zero has p = 1; a constant non-zero difference has p = 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import duckdb
import numpy as np

from analysis import scipy_stats as st
from analysis import sql
from analysis.sql.rows import fetch_row
from analysis.sql.tost_table import ALPHA, TARGET_POWER, detectable_margins  # noqa: F401  (the planner's table)
from analysis.stats.signed_rank import wilcoxon
from shp_ray.policy.cascade import HaltConfig

METRICS_COMPARED = ("rounds", "operational_tokens", "is")
DEFAULT_DELTAS = (0.005, 0.01, 0.02, 0.03, 0.05)

DEFAULT_EPS = HaltConfig().eps  # the distance summary's line: the cascade's own default eps


def cohens_dz(diff: np.ndarray) -> float:
    """Mean paired difference over its standard deviation (NaN if undefined)."""
    diff = np.asarray(diff, dtype=float)
    if len(diff) < 2:
        return math.nan
    sd = float(np.std(diff, ddof=1))
    if sd == 0.0:
        return 0.0 if float(np.mean(diff)) == 0.0 else math.copysign(math.inf, float(np.mean(diff)))
    return float(np.mean(diff)) / sd


def bootstrap_ci(
    values: np.ndarray, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (deterministic in ``seed``)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    if len(x) == 1 or float(np.ptp(x)) == 0.0:
        return float(x[0]), float(x[0])
    res = st.bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples, method="percentile", rng=seed)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_t(diff: np.ndarray) -> tuple[float, float]:
    """(t, two-sided p) of the paired t-test on differences."""
    diff = np.asarray(diff, dtype=float)
    if len(diff) < 2:
        return math.nan, math.nan
    if float(np.ptp(diff)) == 0.0:
        return (0.0, 1.0) if diff[0] == 0.0 else (math.copysign(math.inf, diff[0]), 0.0)
    res = st.ttest_1samp(diff, 0.0)
    return float(res.statistic), float(res.pvalue)


@dataclass(frozen=True)
class Tost:
    """One-sided test of H0: mean(policy - baseline) <= -delta (non-inferiority)."""

    delta: float
    n: int
    mean_diff: float
    lower95: float  # one-sided 95% lower confidence bound of the mean difference
    t: float
    p: float

    @property
    def non_inferior(self) -> bool:
        return self.p < 0.05


def tost_noninferiority(diff: np.ndarray, delta: float) -> Tost:
    """The lower one-sided test of TOST with margin ``delta`` (alpha 0.05)."""
    diff = np.asarray(diff, dtype=float)
    n = len(diff)
    if n < 2:
        return Tost(delta, n, float(np.mean(diff)) if n else math.nan, math.nan, math.nan, math.nan)
    mean, sd = float(np.mean(diff)), float(np.std(diff, ddof=1))
    if sd == 0.0:
        p = 0.0 if mean > -delta else 1.0
        return Tost(delta, n, mean, mean, math.copysign(math.inf, mean + delta) if mean != -delta else 0.0, p)
    se = sd / math.sqrt(n)
    t = (mean + delta) / se
    return Tost(delta, n, mean, mean - float(st.t.ppf(0.95, n - 1)) * se, t, float(st.t.sf(t, n - 1)))


def tost_power(n: int, sd: float, delta: float) -> float:
    """Power of the paired TOST (non-inferiority, alpha 0.05) at ``n`` pairs whose differences have SD ``sd``,
    when the policy is in truth exactly as good as the baseline: P(noncentral t > t_0.95(n - 1)).

    NaN when there is no test: fewer than 2 pairs, zero (or unknown) variance, no positive margin.
    """
    if n < 2 or not (sd > 0 and math.isfinite(sd)) or not delta > 0:
        return math.nan
    df = n - 1
    return float(st.nct.sf(st.t.ppf(1 - ALPHA, df), df, delta / sd * math.sqrt(n)))


def tost_n_needed(sd: float, delta: float, power: float = TARGET_POWER) -> int | None:
    """The fewest pairs for which :func:`tost_power` reaches ``power`` (None when undefined: zero SD)."""
    if not (sd > 0 and math.isfinite(sd)) or not delta > 0:
        return None
    lo, hi = 1, 2  # power(lo) < power <= power(hi), once hi is found; one pair has no test
    while tost_power(hi, sd, delta) < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if tost_power(mid, sd, delta) >= power else (mid, hi)
    return hi


@dataclass(frozen=True)
class TostPlan:
    """What a paired TOST on IS differences can tell at this N and variance (margin ``delta``, alpha 0.05)."""

    delta: float
    n: int
    sd: float  # SD of the paired differences (NaN below 2 pairs)
    power: float  # at n, when the policy is in truth as good as the baseline (NaN: no test)
    n_needed: int | None  # pairs for power 0.8 at this SD (None: degenerate or too few pairs)
    degenerate: bool  # every difference is the same: zero variance, so no p-value means anything

    @property
    def underpowered(self) -> bool:
        return self.n_needed is not None and self.n < self.n_needed

    def sentence(self) -> str:
        """The planner's answer in words (the report prints it for the policy that asks the most)."""
        if self.degenerate:
            return (
                f"every one of the N = {self.n} paired IS differences is the same (zero variance: the returned "
                "drafts score as the baseline's do), so there is no test and no power to speak of"
            )
        if self.n_needed is None:
            return f"N = {self.n} pairs: too few to estimate a variance, no power to speak of"
        return (
            f"to detect a margin δ = {self.delta:g} with power {TARGET_POWER:g} at this variance you need "
            f"N = {self.n_needed} (SD of ΔIS {self.sd:.4f}); at N = {self.n} the power is {self.power:.2f}"
        )


def tost_plan(diff: np.ndarray, delta: float) -> TostPlan:
    """The planner on observed paired differences ``diff`` (policy - baseline IS)."""
    diff = np.asarray(diff, dtype=float)
    n = len(diff)
    if n < 2:
        return TostPlan(delta, n, math.nan, math.nan, None, False)
    sd = float(np.std(diff, ddof=1))
    if float(np.ptp(diff)) == 0.0:
        return TostPlan(delta, n, 0.0, math.nan, None, True)
    return TostPlan(delta, n, sd, tost_power(n, sd, delta), tost_n_needed(sd, delta), False)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (NaN stays NaN and is not counted)."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    m = len(idx)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def _pairs(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str | None, str], dict[str, np.ndarray]]:
    """Per (gen_id, split, policy): the paired columns of its replay rows (a split apart from the others)."""
    tb = con.sql(sql.query("stats_pairs")).to_arrow_table()
    cols = {c: tb.column(c).to_numpy(zero_copy_only=False) for c in tb.column_names}
    out: dict[tuple[str, str | None, str], dict[str, np.ndarray]] = {}
    keys = list(zip(cols["gen_id"], cols["split"], cols["policy"], strict=True))
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            sl = slice(start, i)
            out[keys[start]] = {
                c: np.asarray(cols[c][sl], dtype=float)
                for c in ("stop_round", "depth", "operational_tokens", "baseline_tokens", "final_is", "baseline_is")
            }
            start = i
    return out


def paired_tests(
    x: np.ndarray, base: np.ndarray, seed: int = 0, n_resamples: int = 2000
) -> tuple[dict[str, Any], np.ndarray]:
    """The paired tests of ``x`` against ``base`` over the pairs where both are known, and those differences:
    n, means, mean difference with its bootstrap 95% CI, t-test, Wilcoxon, d_z."""
    keep = ~(np.isnan(x) | np.isnan(base))
    x, base = x[keep], base[keep]
    diff = x - base
    t, p_t = paired_t(diff)
    w, p_w = wilcoxon(diff)
    lo, hi = bootstrap_ci(diff, seed=seed, n_resamples=n_resamples)
    tests: dict[str, Any] = {
        "n": int(len(diff)),
        "mean": float(np.mean(x)) if len(x) else math.nan,
        "mean_baseline": float(np.mean(base)) if len(base) else math.nan,
        "mean_diff": float(np.mean(diff)) if len(diff) else math.nan,
        "ci95_low": lo,
        "ci95_high": hi,
        "t": t,
        "p_t": p_t,
        "wilcoxon_w": w,
        "p_wilcoxon": p_w,
        "d_z": cohens_dz(diff),
    }
    return tests, diff


def compare_policies(
    con: duckdb.DuckDBPyConnection, delta: float = 0.02, seed: int = 0, n_resamples: int = 2000
) -> list[dict[str, Any]]:
    """One row per (gen_id, split, policy, metric) against the baseline fixed_k{depth}.

    Holm adjusts the t-test and Wilcoxon p-values across the policies of one
    generation, split and metric; ``tost_p`` (IS only) is the non-inferiority p.
    """
    rows: list[dict[str, Any]] = []
    for (gen, split, policy), a in _pairs(con).items():
        series = {
            "rounds": (a["stop_round"], a["depth"]),
            "operational_tokens": (a["operational_tokens"], a["baseline_tokens"]),
            "is": (a["final_is"], a["baseline_is"]),
        }
        for metric, (x, base) in series.items():
            tests, diff = paired_tests(x, base, seed, n_resamples)
            row: dict[str, Any] = {"gen_id": gen, "split": split, "policy": policy, "metric": metric, **tests}
            if metric == "is":
                tost = tost_noninferiority(diff, delta)
                row.update({"tost_delta": delta, "tost_p": tost.p, "is_lower95": tost.lower95})
                row["non_inferior"] = tost.non_inferior
                plan = tost_plan(diff, delta)
                row.update({"sd_diff": plan.sd, "tost_power": plan.power, "n_needed": plan.n_needed})
                row["degenerate"] = plan.degenerate
            rows.append(row)
    for gen, split in {(r["gen_id"], r["split"]) for r in rows}:
        for metric in METRICS_COMPARED:
            group = [r for r in rows if r["gen_id"] == gen and r["split"] == split and r["metric"] == metric]
            for col in ("p_t", "p_wilcoxon"):
                for r, adj in zip(group, holm([float(r[col]) for r in group]), strict=True):
                    r[col + "_holm"] = adj
    return rows


def tost_sensitivity(con: duckdb.DuckDBPyConnection, deltas: Iterable[float] = DEFAULT_DELTAS) -> list[dict[str, Any]]:
    """Non-inferiority of IS per policy over a range of margins delta, with the TOST's power at each."""
    out: list[dict[str, Any]] = []
    for (gen, split, policy), a in _pairs(con).items():
        keep = ~(np.isnan(a["final_is"]) | np.isnan(a["baseline_is"]))
        diff = a["final_is"][keep] - a["baseline_is"][keep]
        degenerate = len(diff) >= 2 and float(np.ptp(diff)) == 0.0
        sd = float(np.std(diff, ddof=1)) if len(diff) >= 2 and not degenerate else math.nan
        for d in deltas:
            res = asdict(tost_noninferiority(diff, d))
            out.append({"gen_id": gen, "split": split, "policy": policy, **res, "non_inferior": res["p"] < 0.05,
                        "power": tost_power(len(diff), sd, d), "degenerate": degenerate})  # fmt: skip
    return out


def _distances(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], np.ndarray]:
    tb = con.sql(sql.query("stats_distances")).to_arrow_table()
    return {
        (g, s): np.asarray([math.nan if v is None else v for v in d], dtype=float)
        for g, s, d in zip(*(tb.column(c).to_pylist() for c in ("gen_id", "scenario_id", "d")), strict=True)
    }


def conjecture1(con: duckdb.DuckDBPyConnection, seed: int = 0) -> dict[str, float]:
    """Do distances shrink on average? Over trajectories with >= 2 distances (T >= 3).

    - ``frac_strictly_decreasing``: share with d_2 > d_3 > ... > d_T;
    - ``mean_slope`` (+ bootstrap CI): mean per-trajectory OLS slope of d_t on t;
    - ``wilcoxon_step_p`` (``n_steps``): one-sided Wilcoxon (alternative: less than 0) over every
      successive difference d_t - d_{t-1} (t >= 3), per step as the paper states it; the steps of one
      trajectory are not independent, so read it beside the per-trajectory test;
    - ``wilcoxon_p``: the same test on each trajectory's MEAN successive difference (one value per
      trajectory, so the observations are independent): a per-trajectory test, labelled so.
    """
    slopes, steps, mono, every_step = [], [], [], []
    for d in _distances(con).values():
        d = d[~np.isnan(d)]
        if len(d) < 2:
            continue
        t = np.arange(len(d), dtype=float)
        slopes.append(float(np.polyfit(t, d, 1)[0]))
        steps.append(float(np.mean(np.diff(d))))
        every_step.extend(np.diff(d).tolist())
        mono.append(bool(np.all(np.diff(d) < 0)))
    if not slopes:
        return {"n": 0}
    lo, hi = bootstrap_ci(np.asarray(slopes), seed=seed)
    w, p = wilcoxon(np.asarray(steps), alternative="less")
    w_step, p_step = wilcoxon(np.asarray(every_step), alternative="less")
    return {
        "n": len(slopes),
        "frac_strictly_decreasing": float(np.mean(mono)),
        "mean_slope": float(np.mean(slopes)),
        "slope_ci95_low": lo,
        "slope_ci95_high": hi,
        "mean_step": float(np.mean(steps)),
        "wilcoxon_w": w,
        "wilcoxon_p": p,
        "n_steps": len(every_step),
        "wilcoxon_step_w": w_step,
        "wilcoxon_step_p": p_step,
    }


def distance_summary(con: duckdb.DuckDBPyConnection, eps: float = DEFAULT_EPS) -> dict[str, float]:
    """Mean, median, max and share below eps of every d_t (t >= 2)."""
    (n, mean, median, mx, below) = fetch_row(con, sql.query("stats_distance_summary"), [eps])
    return {"n": n, "mean": mean, "median": median, "max": mx, "eps": eps, "share_below_eps": below}


def distance_by_round(con: duckdb.DuckDBPyConnection) -> list[dict[str, float]]:
    """Mean d_t per round with a t-based 95% CI (the figure's band)."""
    rows = con.execute(sql.query("stats_distance_by_round")).fetchall()
    out = []
    for gen, t, n, mean, sd in rows:
        half = float(st.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) if n > 1 and sd is not None else math.nan
        out.append({"gen_id": gen, "round": t, "n": n, "mean": mean, "ci95_low": mean - half, "ci95_high": mean + half})
    return out
