"""Scores computed as a sweep stores its drafts: the simulated server over real HTTP, real Ray, the real
embedder, the store and DuckDB. The scorer is a ``python`` target (HotpotQA's own metrics loaded by name), so
its values at each policy's stop must equal the replay's EM/F1 of the same drafts."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

import analysis
import conf.schema  # noqa: F401
from analysis.stats.scores import compare_scores
from conf.resolve import to_job
from storage import Store
from sweeps import app
from sweeps import job as sweep_job
from sweeps.job import snapshot

pytestmark = pytest.mark.integration


def test_a_python_scorer_in_a_sweep_reaches_the_summary_with_paired_differences(tmp_path, ray_session, capsys):
    store = tmp_path / "store"
    overrides = ["provider=sim", "dataset.limit=4", "generation.max_rounds=3", f"store.path={store}",
                 "score=python", "score.target=shp_ray.policy.scorers:hotpot"]  # fmt: skip
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    job = to_job(cfg)
    done = sweep_job.run(job, output_dir=tmp_path / "a", job_tag="t", config_snapshot=snapshot(cfg), command="t")
    assert (done.generated, done.failed) == (4, 0)
    scores = Store(store).read("scores")
    assert scores.num_rows == 2 * 4 * 3  # em and f1 of every round
    assert set(scores["scorer"].to_pylist()) == {"python:shp_ray.policy.scorers:hotpot"}
    con = analysis.connect(store)
    try:
        by_replay = con.execute(
            "SELECT r.policy, avg(r.final_em), avg(r.final_em - r.baseline_em) FROM replay r GROUP BY r.policy"
        ).fetchall()
        by_score = con.execute(
            "SELECT policy, mean_value, delta, n_paired, share_failed FROM score_summary WHERE score = 'em'"
        ).fetchall()
        stats = compare_scores(con, n_resamples=100)
        means = {(p, sc): (m, d) for p, sc, m, d in con.execute(
            "SELECT policy, score, mean_value, delta FROM score_summary").fetchall()}  # fmt: skip
    finally:
        con.close()
    summary = {p: (m, d, n, f) for p, m, d, n, f in by_score}
    assert {p for p, *_ in by_replay} <= set(summary) and "oracle_em" in summary
    for policy, mean_em, delta_em in by_replay:
        assert summary[policy][:2] == pytest.approx((mean_em, delta_em)) and summary[policy][2:] == (4, 0.0)
    assert {(r["policy"], r["score"]) for r in stats} >= {("fixed_k1", "em"), ("shp", "f1")}

    # the user's scores reach the console table: a column of each at the stop and its paired difference
    capsys.readouterr()
    app._print_table(done)
    out = capsys.readouterr().out.splitlines()
    head = out[2].split()
    assert head[7:11] == ["em", "dem", "f1", "df1"], head
    rows = [line.split() for line in out[4 : out.index(next(x for x in out[4:] if x.startswith("saving")))]]
    assert len(rows) == len(done.summary) >= 5
    for cells in rows:
        em, f1 = means[(cells[0], "em")], means[(cells[0], "f1")]
        assert cells[7:11] == [f"{em[0]:.3f}", f"{em[1]:+.3f}", f"{f1[0]:.3f}", f"{f1[1]:+.3f}"], cells
    assert any(line.startswith("em: its mean at the stop") or "; em: its mean at the stop" in line for line in out)

    # a report.primary the run has no values of: a python scorer names its scores only in its results, so the plan
    # cannot tell; the job refuses it once the generation is stored, before any replay row or report is written
    from sweeps.plan import make_plan

    with initialize_config_module(config_module="conf", version_base="1.3"):
        bad = to_job(compose(config_name="config", overrides=[*overrides, "report.primary=emm"]))
    assert make_plan(bad).refused is None
    before = Store(store).read("results").num_rows
    with pytest.raises(sweep_job.JobFailed, match=r"^report.primary=emm: .* it has: is, em, f1; did you mean `em`\?"):
        sweep_job.run(bad, output_dir=tmp_path / "b", job_tag="t", config_snapshot=snapshot(cfg), command="t")
    assert Store(store).read("results").num_rows == before and not (tmp_path / "b" / "report").exists()
