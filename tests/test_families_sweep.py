"""The other stopping families through the whole sweep: sim server, Ray, the real embedding model,
the Parquet store, the dev-fitted gain model, DuckDB replay, results rows and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.resolve import to_job
from shp_ray.policy.families.gain_model import load
from storage import Store
from sweeps import job as sweep_job
from sweeps.job import snapshot

pytestmark = pytest.mark.integration


def test_sweep_replays_families_with_a_dev_fitted_gain_model(tmp_path, ray_session):
    store = tmp_path / "store"
    overrides = [
        "provider=sim",
        "dataset.limit=3",
        "generation.max_rounds=3",
        "generation.concurrency=4",
        f"store.path={store}",
        "replay.policies=[shp,oracle_is,families]",
        "logprobs.request=true",  # the simulator returns them: the token-confidence family replays too
    ]
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    job = to_job(cfg)
    assert job.split == "test"
    res = sweep_job.run(job, output_dir=tmp_path / "out", job_tag="fam", config_snapshot=snapshot(cfg), command="t")
    assert res.trajectories == 3

    s = Store(store)
    splits = {r["scenario_id"]: r["split"] for r in s.read("scenarios").to_pylist()}
    assert sorted(splits.values()) == ["dev"] * 3 + ["test"] * 3  # dev generated only to fit the gain model
    results = s.read("results").to_pylist()
    test_ids = {k for k, v in splits.items() if v == "test"}
    assert {r["scenario_id"] for r in results} == test_ids  # the replay never touches dev
    by_policy = {r["policy"] for r in results}
    assert {"sim_threshold", "consensus", "gain_model", "verifier", "budget", "best_medoid", "confidence"} <= by_policy
    assert s.read("draft_logprobs").num_rows == s.read("rounds").num_rows  # one summary per draft
    gain = [r for r in results if r["policy"] == "gain_model"]
    assert all(r["reason"] in ("low_gain", "failsafe") for r in gain)  # fitted: never "unfitted"

    (artefact,) = (store / "artefacts" / "gain_model" / res.gen_id).glob("*.json")  # one fit: one judge, one weights
    model = load(artefact)
    assert model.meta["split"] == "dev" and model.meta["n_trajectories"] == 3 and model.meta["judge"] == res.judge
    assert s.read("feedback_embeddings").num_rows > 0  # critiques embedded for consensus / gain_model

    report = Path(res.report).read_text()
    assert "## Beyond SHP: other stopping systems on the same trajectories" in report
    assert "Share of the oracle gap closed" in report and model.digest in report
    assert "Verifier-first outcomes" in report
    summary = {r["policy"]: r for r in res.summary}
    assert json.dumps(sorted(summary)) and "gain_model" in summary
