"""shp-sweep's console table at small N: every "non-inferior" beside its power, and a warning line when N is
below what the TOST planner asks (the demo's N = 4 must not pass for evidence)."""

from __future__ import annotations

import pytest

import analysis
from analysis import sql
from analysis.report.power import warning
from storage.synthetic import SyntheticSpec, write_synthetic_store
from sweeps import app
from sweeps.job import JobResult


def _result(summary: list[dict]) -> JobResult:
    return JobResult(run_id="r", gen_id="g", judge="j", store="s", scenarios=4, trajectories=4, summary=summary)


@pytest.fixture(scope="module")
def demo_summary(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("n4-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=4, rounds=4, seed=1))
    con = analysis.connect(root)
    try:
        return con.sql(sql.query("sweep_summary")).to_arrow_table().to_pylist()
    finally:
        con.close()


def test_n4_prints_the_warning_with_the_n_the_planner_asks(demo_summary, capsys) -> None:
    app._print_table(_result(demo_summary))
    out = capsys.readouterr().out
    needed = max(r["n_needed"] for r in demo_summary if r["n_needed"] is not None)
    assert "WARNING: N = 4 is below what the TOST planner asks" in out
    assert f"you need N = {needed}" in out and "not evidence" in out and "delta = 0.02" in out
    assert out.splitlines()[1] == "split test, N = 4 trajectories"  # the table says which split it shows
    assert "power/N_needed" in out.splitlines()[2]
    shp = next(line for line in out.splitlines() if line.startswith("shp "))
    row = next(r for r in demo_summary if r["policy"] == "shp")
    assert shp.endswith(f"{row['tost_power']:.2f}/N{row['n_needed']}")
    baseline = next(line for line in out.splitlines() if line.startswith("fixed_k6 "))
    assert baseline.endswith("  -")  # zero variance: no power to print


def test_no_warning_when_n_is_enough() -> None:
    rows = [
        {"policy": "shp", "n_is": 60, "n_needed": 41, "margin": 0.02},
        {"policy": "fixed_k6", "n_is": 60, "n_needed": None, "margin": 0.02},  # degenerate: nothing asked
    ]
    assert warning(rows) is None
    rows[0]["n_is"] = 40
    said = warning(rows)
    assert said is not None and "N = 40" in said and "N = 41 (shp)" in said and "1 of 2 policies" in said
    rows[0]["split"] = "dev"
    assert "N = 41 (shp, split dev)" in str(warning(rows))


def test_a_job_over_two_splits_prints_a_table_per_split(capsys) -> None:
    row = {"policy": "shp", "n": 20, "mean_rounds": 2.0, "mean_operational_tokens": 900.0, "token_saving": 0.4,
           "mean_is": 0.8, "delta_is": -0.01, "non_inferior": True, "n_is": 20, "n_needed": 41, "margin": 0.02,
           "tost_power": 0.4, "degenerate": False}  # fmt: skip
    app._print_table(_result([{**row, "split": "dev"}, {**row, "split": "test", "n": 60, "n_is": 60}]))
    lines = capsys.readouterr().out.splitlines()
    assert "split dev, N = 20 trajectories" in lines and "split test, N = 60 trajectories" in lines
    assert sum(line.startswith("shp ") for line in lines) == 2  # never one pooled row


def test_a_score_whose_scorer_failed_on_every_draft_is_left_out_with_a_line(capsys) -> None:
    """A scorer that raised on every draft (the docs' example on the simulator's drafts) has no value to show: no
    column of dashes under its name, one line saying why; a score with values keeps its columns."""
    row = {"policy": "shp", "n": 10, "mean_rounds": 2.0, "mean_operational_tokens": 900.0, "token_saving": 0.4,
           "mean_is": 0.8, "delta_is": -0.01, "non_inferior": True, "n_is": 10, "n_needed": 41, "margin": 0.02,
           "tost_power": 0.4, "degenerate": False, "split": "test",
           "scores": {"python": {"mean": None, "delta": None, "n_paired": 0, "share_failed": 1.0},
                      "right": {"mean": 0.7, "delta": -0.1, "n_paired": 10, "share_failed": 0.0}}}  # fmt: skip
    app._print_table(_result([row]))
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("policy"))
    assert "right" in head and "dright" in head and "python" not in head, head
    assert "python: left out (its scorer failed on every draft" in out
