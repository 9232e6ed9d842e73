"""The replay on Ray (``analysis.connect(..., ray_address=...)``) on a three-node local cluster
(``ray.cluster_utils.Cluster``: a head and two worker nodes, 1 CPU each) equals the single-node replay: the same
``policy_summary`` row for row (floats up to the order of their additions), for a store on the local disk and one
on S3 (moto on 127.0.0.1). The store is made bucketed the way a user does it (``python -m storage.compact ROOT
--buckets N``), then its signals and replay inputs are written into the buckets (``--signals rebuild``).

The AWS variables are set before the cluster starts: a node's tasks read the credentials from the environment
their raylet was started with, never from the driver.
"""

from __future__ import annotations

import json
import statistics

import pytest

import analysis
from analysis.replay import ray_replay, signals_store
from storage import buckets, compact
from storage.parts import Store
from storage.synthetic import SyntheticSpec, write_synthetic_store
from tests.cluster_support import local_cluster, same_summary
from tests.s3_support import aws, moto

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-clusters")]  # see conftest.SHARED_FIXTURE_GROUPS
__all__ = ["aws", "moto"]
SPEC = SyntheticSpec(n_trajectories=48, rounds=3, dim=8, seed=11, chunk=16, batch_rate=0.2)


@pytest.fixture(scope="module")
def cluster(aws):
    with local_cluster(workers=2) as c:
        yield c


def _bucketed(root: str, capsys: pytest.CaptureFixture[str], count: int = 5) -> None:
    """A synthetic store at ``root``, moved into ``count`` buckets by the CLI, its signals then stored."""
    write_synthetic_store(root, SPEC)
    assert compact.main([root, "--buckets", str(count)]) == 0
    moved = json.loads(capsys.readouterr().out)["rebucket"]
    assert moved["parts_moved"] > 0
    assert signals_store.build(Store(root)).built == SPEC.n_trajectories  # written into the buckets


def test_the_ray_replay_of_a_local_store_equals_the_single_node_replay(cluster, tmp_path, capsys) -> None:
    root = str(tmp_path / "store")
    _bucketed(root, capsys)
    store = Store(root)
    assert store.buckets == 5
    for table in sorted(buckets.BUCKETED):  # every part of the per-round tables lies in its scenario's bucket
        for path in store.parts(table):
            rows = store.read_part(table, path, ["scenario_id"])["scenario_id"].to_pylist()
            assert {f"bucket={buckets.bucket_of(s, 5):02d}" for s in rows} == {path.split("/")[-2]}
    assert analysis.setup_of(analysis.connect(root)).inputs in ("written", "stored")  # the bucketed inputs believed

    same_summary(root, cluster.address)

    plan = ray_replay.plan(analysis.ReplayScope(store).resolved(), {}, (analysis.connect, analysis.setup_of))
    assert plan.buckets == (0, 1, 2, 3, 4)
    assert len(set(plan.nodes)) == 3  # the buckets dealt over the three nodes (one host: one disk)
    # The explicit second pass: a median does not add up, so every bucket returns its rows.
    diffs = "SELECT final_is - baseline_is AS d FROM replay WHERE policy = 'shp' AND final_is - baseline_is IS NOT NULL"
    median_on_ray = statistics.median(plan.rows(diffs)["d"].to_pylist())
    assert median_on_ray == statistics.median(r[0] for r in analysis.connect(root).sql(diffs).fetchall())


def test_the_ray_replay_of_an_s3_store_equals_the_single_node_replay(aws, cluster, capsys) -> None:
    uri = f"s3://{aws}/replay-store"
    _bucketed(uri, capsys, count=4)
    same_summary(uri, cluster.address)


def test_a_store_never_bucketed_and_killed_mid_write_replays_on_ray_as_on_one_node(cluster, tmp_path) -> None:
    """The default layout (no buckets) in the shape a kill -9 between a flush's rounds and its signals leaves (one
    rounds part with no signals or stored inputs; the rest with both): replayed in sets of parts that share no
    scenario, equal to the single-node replay."""
    root = str(tmp_path / "flat")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=12, rounds=3, dim=8, seed=2, chunk=4))
    assert signals_store.build(Store(root)).built == 12
    store = Store(root)
    for table in ("signals", "trajectory_inputs"):  # what the killed flush did not write
        store.fs.delete_file(store.parts(table)[0])
    assert store.buckets == 0 and len(store.parts("rounds")) == 3
    same_summary(root, cluster.address)
    plan = ray_replay.plan(analysis.ReplayScope(Store(root)).resolved(), {}, (analysis.connect, analysis.setup_of))
    assert len(plan.views) == 3  # one set per flush: no scenario in two of them
    held = [sorted({p for t in buckets.BUCKETED for p in v.parts(t)}) for v in plan.views]
    assert sorted(p for h in held for p in h) == sorted(p for t in buckets.BUCKETED for p in store.parts(t))
