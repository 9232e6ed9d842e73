"""Revision dynamics per generation: round-1 approval, share revised, d_t and IS by round."""

from __future__ import annotations

import pytest

import analysis
from tests.test_families_property import make_encoder, write_store


def test_dynamics_say_whether_the_loop_revised(tmp_path) -> None:
    # s0 frozen and approved at round 1 (" approved" counts: the cascade's own test, any case, leading space);
    # s1 revises twice and is never approved.
    trajs = [
        ("s0", ["Paris", "Paris", "Paris"], [" approved.", "APPROVED", ""], [(5, 3)] * 3, [0.5, 0.5, 0.5], []),
        ("s1", ["Lyon", "Paris", "Paris, France"], ["Wrong city.", "Add the country.", ""], [(5, 3)] * 3,
         [0.2, 0.6, 0.8], []),
    ]  # fmt: skip
    write_store(str(tmp_path), trajs, make_encoder(0.0))
    con = analysis.connect(str(tmp_path))
    try:
        dyn = con.sql("SELECT * FROM dynamics").fetchall()
        cols = [d[0] for d in con.sql("SELECT * FROM dynamics").description]
        by_round = con.sql(
            "SELECT round, trajectories, mean_distance, mean_is, approval_rate FROM dynamics_by_round"
        ).fetchall()
    finally:
        con.close()
    (row,) = dyn
    d = dict(zip(cols, row, strict=True))
    assert d["trajectories"] == 2
    assert d["round1_approval_rate"] == pytest.approx(0.5)
    assert d["share_revised"] == pytest.approx(0.5)
    assert d["mean_distinct_drafts"] == pytest.approx(2.0)
    assert d["mean_approvals"] == pytest.approx(1.0)
    r1, r2, r3 = by_round
    assert r1[0] == 1 and r1[2] is None  # no d_1
    assert r2[2] > 0 and r2[2] == pytest.approx(r2[2])  # s1 moved, s0 did not: a positive mean
    assert r1[3] == pytest.approx(0.35) and r3[3] == pytest.approx(0.65)
    assert (r1[4], r2[4], r3[4]) == (pytest.approx(0.5), pytest.approx(0.5), 0.0)


def test_the_report_says_when_a_run_is_frozen(tmp_path) -> None:
    from analysis.report import write_report

    trajs = [(f"s{i}", ["Paris"] * 3, ["APPROVED", "APPROVED", ""], [(5, 3)] * 3, [0.5] * 3, []) for i in range(3)]
    write_store(str(tmp_path / "store"), trajs, make_encoder(0.0))
    md = write_report(tmp_path / "store", tmp_path / "report").read_text()
    assert "## Revision dynamics: did the loop revise?" in md
    assert "| 100% | 0% | 1.00 |" in md  # round-1 approval 100%, none revised, one distinct draft each
    assert "**Frozen dynamics in g**" in md and "no evidence about when to stop" in md
    assert (tmp_path / "report" / "dynamics.csv").read_text().startswith("split,gen_id,")
