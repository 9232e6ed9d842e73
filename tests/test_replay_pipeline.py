"""Replay over a store written by the real generation pipeline equals the reference executor.

The store comes from shp_ray.generation.generate (in-process backend, the scripted test
provider, the fake-hash embedder, the lexical judge); the reference side reads
it with shp_ray.generation.records.load_trajectories, an independent loader that computes
d_t with shp_ray.policy.scoring.cosine_distance in float64.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import analysis
from analysis.replay.policy_table import grid_policies
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.generation.records import load_trajectories
from shp_ray.policy.reference import replay
from shp_ray.policy.table import standard_policies
from shp_ray.providers.base import ProviderSpec
from storage.parts import Store

SPEC = ProviderSpec(kind="scripted", model="scripted-model")
POLICIES = standard_policies(random_seeds=(0, 3)) + grid_policies([0.0, 0.03, 0.06, 0.12], [1, 2])


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline-store")
    base = load_scenarios("shp_paper", limit=10)
    scenarios = [*base[:8], replace(base[8], scenario_id="empty", question=base[8].question + " [empty-draft]")]
    cfg = GenerationConfig(max_rounds=5, embedder="fake-hash", workers=1, concurrency=4)
    summary = generate(
        scenarios,
        cfg,
        Store(root),
        SPEC,
        RunOptions(provider_factory="tests.gen_support:make_provider", backend="local"),
    )
    assert summary.generated == 9
    return root, summary


def test_replay_equals_reference_on_a_generated_store(generated) -> None:
    root, summary = generated
    trajs = load_trajectories(Store(root), summary.gen_id, judge=summary.judge)
    con = analysis.connect(root, policies=POLICIES)
    assert con.execute("SELECT DISTINCT judge FROM judgments").fetchall() == [(summary.judge,)]
    rows = con.execute(
        "SELECT policy, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is FROM replay"
    ).fetchall()
    assert len(rows) == len(trajs) * len(POLICIES) == 9 * len(POLICIES)
    named = {p.name: p for p in POLICIES}
    for name, sid, tau, reason, op, ev, fin in rows:
        ref = replay(named[name], trajs[sid])
        assert (tau, reason, op, ev) == (ref.stop_round, ref.reason, ref.operational_tokens, ref.evaluation_tokens), (
            name,
            sid,
        )
        assert (fin is None and math.isnan(ref.final_is)) or fin == pytest.approx(ref.final_is, abs=1e-12)


def test_distances_agree_with_the_independent_loader(generated) -> None:
    root, summary = generated
    trajs = load_trajectories(Store(root), summary.gen_id, judge=summary.judge)
    con = analysis.connect(root, policies=[])
    for sid, t, d in con.execute("SELECT scenario_id, round, distance FROM rounds WHERE round > 1").fetchall():
        assert d == pytest.approx(trajs[sid].rounds[t - 1].distance, abs=1e-6)
    # The empty drafts (zero vectors) give d = 1.0 in both.
    assert {
        d for (d,) in con.execute("SELECT distance FROM rounds WHERE scenario_id = 'empty' AND round > 1").fetchall()
    } == {1.0}
