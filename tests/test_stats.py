"""analysis.stats against independent implementations (statsmodels, scipy) and on a synthetic store."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_paired

import analysis
from analysis import stats
from analysis.sql import tost_table
from analysis.stats import signed_rank
from storage.synthetic import SyntheticSpec, write_synthetic_store


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("delta", [0.005, 0.02, 0.05])
def test_tost_equals_statsmodels_ttost_paired(seed: int, delta: float) -> None:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.4, 0.9, 40)
    policy = base + rng.normal(-0.01, 0.03, 40)
    ours = stats.tost_noninferiority(policy - base, delta)
    _, (t_low, p_low, df_low), _ = ttost_paired(policy, base, -delta, 10.0)
    assert ours.t == pytest.approx(t_low, rel=1e-10)
    assert ours.p == pytest.approx(p_low, rel=1e-9, abs=1e-15)
    assert ours.n - 1 == df_low
    assert ours.non_inferior == (p_low < 0.05)


def test_holm_equals_statsmodels() -> None:
    p = [0.01, 0.04, 0.03, 0.2, 0.001, 0.049]
    assert stats.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert math.isnan(stats.holm([0.01, math.nan])[1])


def test_paired_tests_and_effect_size() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.normal(10, 2, 30), rng.normal(9, 2, 30)
    t, p = stats.paired_t(a - b)
    ref = st.ttest_rel(a, b)
    assert (t, p) == pytest.approx((ref.statistic, ref.pvalue))
    assert stats.cohens_dz(a - b) == pytest.approx(np.mean(a - b) / np.std(a - b, ddof=1))
    w, pw = stats.wilcoxon(a - b)
    assert pw == pytest.approx(st.wilcoxon(a, b).pvalue)
    lo, hi = stats.bootstrap_ci(a - b)
    assert lo < np.mean(a - b) < hi


TIED = [
    [0.5, -0.5, 1.0, 1.0, 2.0, -2.0, 2.0],  # ties within each sign and across signs
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0],  # n = 13, one rank for all
    [-0.25, -0.25, -0.5, 0.75, -1.0, -1.0, -0.5, 2.0, -3.0],
]


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
@pytest.mark.parametrize("diff", TIED, ids=["mixed", "n13", "negative"])
def test_tied_wilcoxon_equals_scipys_exact_permutation_test(diff: list[float], alternative: str) -> None:
    # scipy permutes the 2^n sign flips itself here (tied |differences|, n <= 13); ours counts them
    ref = st.wilcoxon(diff, alternative=alternative)
    assert stats.wilcoxon(np.array(diff + [0.0]), alternative) == (float(ref.statistic), float(ref.pvalue))


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_the_counted_null_equals_scipys_exact_distribution_without_ties(alternative: str) -> None:
    diff = np.array([0.3, -1.2, 2.5, 0.7, -0.1, 1.9, 3.3, -2.2, 0.05, 1.4])
    ref = st.wilcoxon(diff, alternative=alternative, method="exact")
    assert signed_rank.tied_exact(diff, alternative) == (float(ref.statistic), float(ref.pvalue))


def test_degenerate_samples_are_defined() -> None:
    zeros = np.zeros(10)
    assert stats.paired_t(zeros) == (0.0, 1.0)
    assert stats.wilcoxon(zeros) == (0.0, 1.0)
    assert stats.bootstrap_ci(zeros) == (0.0, 0.0)
    assert stats.paired_t(np.full(5, -2.0))[1] == 0.0
    assert stats.tost_noninferiority(zeros, 0.02).non_inferior
    assert not stats.tost_noninferiority(np.full(5, -0.5), 0.02).non_inferior


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    root = tmp_path_factory.mktemp("stats-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=120, rounds=6, seed=11))
    c = analysis.connect(root)
    yield c
    c.close()


def test_compare_policies_matches_sql_summary(con) -> None:
    rows = stats.compare_policies(con, delta=0.02, n_resamples=300)
    is_rows = {(r["split"], r["policy"]): r for r in rows if r["metric"] == "is"}
    summary = con.execute(
        "SELECT split, policy, delta_is, delta_is_lower95, non_inferior FROM policy_summary"
    ).fetchall()
    assert set(is_rows) == {(s, p) for s, p, *_ in summary} and {s for s, *_ in summary} == {"dev", "test"}
    for split, policy, delta_is, lower, non_inf in summary:  # per split, as the SQL summary is
        r = is_rows[(split, policy)]
        assert r["mean_diff"] == pytest.approx(delta_is, abs=1e-12)
        assert r["is_lower95"] == pytest.approx(lower, abs=1e-9)
        assert r["non_inferior"] == non_inf, policy
    base = [r for r in rows if r["policy"] == "fixed_k6"]
    assert all(r["mean_diff"] == 0.0 and r["p_t"] == 1.0 for r in base)
    rounds = {r["policy"]: r for r in rows if r["metric"] == "rounds" and r["split"] == "test"}
    assert rounds["fixed_k1"]["mean_diff"] == -5.0 and rounds["fixed_k1"]["p_t_holm"] == 0.0
    assert all(0.0 <= r["p_t_holm"] <= 1.0 for r in rows if not math.isnan(r["p_t_holm"]))


def test_tost_sensitivity_is_monotone_in_delta(con) -> None:
    rows = stats.tost_sensitivity(con, deltas=(0.001, 0.02, 0.1))
    by_policy: dict[tuple[str, str], list[bool]] = {}
    for r in rows:
        by_policy.setdefault((r["split"], r["policy"]), []).append(r["non_inferior"])
    for flags in by_policy.values():
        assert flags == sorted(flags)  # a wider margin never turns non-inferior into inferior


def test_conjecture1_and_distance_summary(con) -> None:
    c1 = stats.conjecture1(con)
    assert c1["n"] == 120
    assert c1["mean_slope"] < 0 and c1["slope_ci95_high"] < 0  # the synthetic walk settles
    assert c1["wilcoxon_p"] < 0.01
    # per step, as the paper states it: every successive difference d_t - d_(t-1), t >= 3 (4 per trajectory)
    steps = np.concatenate([np.diff(np.asarray(d)) for (d,) in con.execute(
        "SELECT list(distance ORDER BY round) FILTER (WHERE round > 1) FROM rounds GROUP BY gen_id, scenario_id"
    ).fetchall()])  # fmt: skip
    assert c1["n_steps"] == len(steps) == 120 * 4
    assert c1["wilcoxon_step_p"] == stats.wilcoxon(steps, alternative="less")[1] < 0.01
    assert 0.0 <= c1["frac_strictly_decreasing"] <= 1.0
    summary = stats.distance_summary(con, eps=0.06)
    (n, below) = con.execute("SELECT count(distance), avg((distance < 0.06)::INTEGER) FROM rounds").fetchone()
    assert summary["n"] == n == 600 and summary["share_below_eps"] == pytest.approx(below)
    by_round = stats.distance_by_round(con)
    assert [r["round"] for r in by_round] == [2, 3, 4, 5, 6]
    assert all(r["ci95_low"] <= r["mean"] <= r["ci95_high"] for r in by_round)


def test_sql_t_quantile_matches_scipy() -> None:
    from analysis import sql

    c = duckdb.connect()
    c.execute(sql.t95_table_sql())
    for df in (1, 2, 29, 300, 301, 450, 1000, 10**5):
        (got,) = c.execute(f"SELECT {sql.t95_sql(str(df))}").fetchone()
        assert got == pytest.approx(st.t.ppf(0.95, df), rel=1e-9), df


def test_the_distributions_an_open_needs_equal_scipy_stats_exactly() -> None:
    from analysis import scipy_stats

    n = np.arange(2, 3001)
    df, q = n - 1, st.t.ppf(0.95, n - 1)
    nc = np.linspace(0.0, 4.0, len(n)) * np.sqrt(n)
    assert np.array_equal(scipy_stats.t_ppf(0.95, df), q)
    assert np.array_equal(scipy_stats.nct_sf(q, df, nc), st.nct.sf(q, df, nc))
    assert [scipy_stats.norm_ppf(p) for p in (0.8, 0.95, 0.975)] == [st.norm.ppf(p) for p in (0.8, 0.95, 0.975)]


def test_opening_a_store_does_not_import_scipy_stats(tmp_path) -> None:
    """scipy.stats costs ~1.8 CPU-s to import on a loaded machine: an open needs scipy.special only."""
    import subprocess
    import sys

    write_synthetic_store(tmp_path / "s", SyntheticSpec(n_trajectories=5, rounds=3, seed=3))
    code = (
        "import sys, analysis; analysis.connect(sys.argv[1]).sql('SELECT * FROM policy_summary').fetchall(); "
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]


def test_kept_values_are_computed_once_per_machine_and_again_when_damaged(tmp_path, monkeypatch) -> None:
    from analysis import scipy_stats

    monkeypatch.setenv("SHP_RAY_CACHE", str(tmp_path))
    calls = []

    @scipy_stats.kept("probe")
    def compute(n: int) -> tuple:
        calls.append(n)
        return (0.1, 2.5e-17, (n, 0.3))

    assert compute(3) == (0.1, 2.5e-17, (3, 0.3))
    assert compute(3) == (0.1, 2.5e-17, (3, 0.3)) and calls == [3]  # read back, as the tuples it returned
    (kept,) = (tmp_path / scipy_stats.CONSTANTS).glob("probe-3-*.json")
    kept.write_text(kept.read_text().replace("0.1", "0.2"))  # its checksum no longer matches: not believed
    assert compute(3) == (0.1, 2.5e-17, (3, 0.3)) and calls == [3, 3]


# --- the TOST planner: power at N, N for power 0.8 ------------------------------------------------------


@pytest.mark.parametrize(("effect", "n_needed"), [(1.0, 8), (0.8, 12), (0.5, 27), (0.2, 156)])
def test_planner_known_sample_sizes(effect: float, n_needed: int) -> None:
    # one-sided one-sample t at alpha 0.05, power 0.8 (G*Power: d = 0.5 -> 27, d = 0.8 -> 12, d = 0.2 -> 156)
    assert stats.tost_n_needed(sd=1.0, delta=effect) == n_needed
    assert stats.tost_power(n_needed, 1.0, effect) >= 0.8 > stats.tost_power(n_needed - 1, 1.0, effect)


@pytest.mark.parametrize(("n", "sd", "delta"), [(4, 0.05, 0.02), (19, 0.0725, 0.02), (60, 0.03, 0.01), (2, 0.01, 0.02)])
def test_planner_equals_statsmodels_ttest_power(n: int, sd: float, delta: float) -> None:
    from statsmodels.stats.power import TTestPower

    ref = TTestPower()
    assert stats.tost_power(n, sd, delta) == pytest.approx(
        ref.power(delta / sd, n, 0.05, alternative="larger"), rel=1e-9
    )
    nobs = ref.solve_power(delta / sd, power=0.8, alpha=0.05, alternative="larger")
    assert stats.tost_n_needed(sd, delta) == math.ceil(nobs)
    assert stats.tost_power(4, 0.05, 0.02) == pytest.approx(0.156064, abs=1e-6)  # the demo's N: no evidence


def test_planner_flags_degenerate_and_tiny_samples() -> None:
    zero = stats.tost_plan(np.zeros(4), 0.02)
    assert zero.degenerate and zero.n_needed is None and math.isnan(zero.power) and not zero.underpowered
    assert "zero variance" in zero.sentence()
    assert stats.tost_plan(np.full(5, -0.01), 0.02).degenerate  # constant, not zero: still no variance
    one = stats.tost_plan(np.array([0.1]), 0.02)
    assert not one.degenerate and one.n_needed is None and "too few" in one.sentence()
    small = stats.tost_plan(np.array([0.05, -0.03, 0.02, -0.06]), 0.02)
    assert small.underpowered and small.n == 4 and small.n_needed > 4
    assert f"you need N = {small.n_needed}" in small.sentence() and "δ = 0.02" in small.sentence()
    assert math.isnan(stats.tost_power(1, 0.1, 0.02)) and stats.tost_n_needed(0.0, 0.02) is None


def test_detectable_margins_are_where_the_power_reaches_the_target() -> None:
    table = stats.detectable_margins(400)
    n = np.array([m for m, _ in table])
    es = np.array([e for _, e in table])
    df = n - 1
    by_bisection = tost_table._bisect_margins(st.t.ppf(1 - tost_table.ALPHA, df), df, n)
    assert np.max(np.abs(es - by_bisection) / by_bisection) < 1e-13  # the secant lands where bisection does
    assert all(stats.tost_power(int(m), 1.0, e) == pytest.approx(stats.TARGET_POWER, abs=1e-12) for m, e in table)
    assert np.all(np.diff(es) < 0)  # more pairs detect a smaller margin


def test_sql_planner_equals_scipy() -> None:
    from analysis import sql

    c = duckdb.connect()
    c.execute(sql.t95_table_sql())
    c.execute(sql.tost_plan_sql(stats.detectable_margins()))
    for n in (2, 3, 4, 5, 30, 73, 300, 301, 5000):
        for es in (0.01, 0.1, 0.4, 1.0, 3.0):
            (got,) = c.execute("SELECT tost_power(?, ?)", [n, es]).fetchone()
            assert got == pytest.approx(stats.tost_power(n, 1.0, es), abs=1e-6), (n, es)
    for es in (5.8, 2.0, 1.0, 0.5, 0.25, 0.1, 0.079):  # inside the table: exact
        assert c.execute("SELECT tost_n_needed(?)", [es]).fetchone()[0] == stats.tost_n_needed(1.0, es), es
    for es in (0.05, 0.02):  # beyond it: Guenther's formula, at most one pair short
        got = c.execute("SELECT tost_n_needed(?)", [es]).fetchone()[0]
        assert 0 <= stats.tost_n_needed(1.0, es) - got <= 1
    assert c.execute("SELECT tost_power(1, 0.5), tost_power(4, 0), tost_n_needed(0)").fetchone() == (None,) * 3


def test_policy_summary_says_n_and_power(con) -> None:
    tests = {(r["split"], r["policy"]): r for r in stats.compare_policies(con, n_resamples=100) if r["metric"] == "is"}
    rows = con.execute(
        "SELECT policy, n_is, tost_power, n_needed, degenerate, underpowered, non_inferior, split FROM policy_summary"
    ).fetchall()
    for policy, n_is, power, needed, degenerate, underpowered, _, split in rows:
        r = tests[(split, policy)]
        assert (n_is, needed, degenerate) == (r["n"], r["n_needed"], r["degenerate"]), policy
        assert (power is None and math.isnan(r["tost_power"])) or power == pytest.approx(r["tost_power"], abs=1e-6)
        assert underpowered == (None if needed is None else n_is < needed)
    baseline = next(r for r in rows if r[0] == "fixed_k6")
    assert baseline[4] and baseline[2] is None  # the baseline against itself: zero variance, no power
