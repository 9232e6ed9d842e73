"""A real multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head and two worker
nodes, each its own raylet and processes): generation spreads over the nodes, the caches and the
rate limiter hold for the whole cluster, ``shp-sweep ray.address=...`` runs on it, batch mode works
on it, and a worker node killed mid-generation costs at most the calls that were in flight on it.

Kept lean (2 shared cores): the simulated server on 127.0.0.1, the ``fake-hash`` embedder where the
real one is not the point, small N. Node deaths are detected in ~1.5 s (the head's health checks
are tightened for the test; Ray's default is ~15 s, which only makes the wait longer)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shp_ray.generation.cluster_lock import cluster_lease, lease_name
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.shared_limiter import limiter_id
from shp_ray.providers.sim.server import SimServer
from storage.parts import Store
from storage.resume import done_scenarios
from tests.cluster_support import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-clusters")]  # see conftest.SHARED_FIXTURE_GROUPS
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Everything a round row holds but the wall time it took.
SAME = ["gen_id", "scenario_id", "round", "draft", "feedback", "draft_hash", "writer_prompt_tokens",
        "writer_completion_tokens", "critic_prompt_tokens", "critic_completion_tokens", "embedding"]  # fmt: skip


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(workers=2) as c:
        yield c


def _spec(sim: SimServer, **kw: object) -> ProviderSpec:
    return ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model", **kw)  # type: ignore[arg-type]


def _rows(root: Path, table: str = "rounds", cols: list[str] = SAME) -> list[dict]:
    rows = Store(root).read(table).select(cols).to_pylist()
    return sorted(rows, key=lambda r: tuple(str(r[c]) for c in cols[:4]))


def _unique(rows: list[dict], *cols: str) -> bool:
    keys = [tuple(r[c] for c in cols) for r in rows]
    return len(keys) == len(set(keys))


def _reference(tmp_path: Path, scenarios: list, cfg: GenerationConfig) -> tuple[list[dict], int]:
    """The same generation in one process, no Ray: its rows and how many calls it paid."""
    with SimServer(latency_s=0.0) as sim:
        s = generate(scenarios, cfg, Store(tmp_path / "ref"), _spec(sim), RunOptions(backend="local", progress=False))
        assert s.failed == 0
        return _rows(tmp_path / "ref"), sim.stats["ok"]


def test_sweep_on_the_cluster_spreads_over_its_nodes_with_the_real_embedder(tmp_path, cluster) -> None:
    """``shp-sweep ray.address=<cluster>`` in its own process: a driver joining the cluster, one
    embedding actor per node with the real model, an LLM judge per node, the workers and judges of the
    other nodes caching through the cache actor."""
    store = tmp_path / "store"
    out = subprocess.run(
        [str(BIN / "shp-sweep"), "provider=sim", "provider.sim_latency_s=0.05", "dataset.limit=6",
         "generation.max_rounds=2", "generation.concurrency=2", "judge=llm", f"ray.address={cluster.address}",
         f"store.path={store}", f"hydra.run.dir={tmp_path / 'run'}", "report.enabled=false"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "6 generated now" in out.stdout and "on 3 Ray nodes" in out.stdout, out.stdout[-2000:]
    rounds = Store(store).read("rounds").to_pylist()
    assert len(rounds) == 12 and _unique(rounds, "gen_id", "scenario_id", "round")
    judgments = Store(store).read("judgments").to_pylist()  # the LLM judge's calls on every node, cached
    assert len(judgments) == 12 and {j["judge"] for j in judgments} == {"llm:sim-model"}
    assert {j["error"] for j in judgments} == {""}
    gens = Store(store).read("generations").to_pylist()
    assert len(gens) == 1 and gens[0]["embedder"].startswith("all-MiniLM-L6-v2")
    import ray

    named = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
    assert not any(n.startswith("shp-lock:") for n in named)  # the lease died with its job


def test_batch_mode_on_the_cluster_stores_what_live_mode_stores(tmp_path, cluster) -> None:
    scenarios = load_scenarios("shp_paper", limit=6)
    cfg = GenerationConfig(max_rounds=3, embedder="fake-hash", workers=3, flush_every=2)
    ref, _ = _reference(tmp_path, scenarios, cfg)
    with SimServer(batch_delay_s=0.05) as sim:
        spec = _spec(sim, batch=True, batch_poll_s=0.05)
        s = generate(
            scenarios, cfg, Store(tmp_path / "batch"), spec, RunOptions(ray_address=cluster.address, progress=False)
        )
        stats = sim.stats
    assert (s.generated, s.failed) == (6, 0) and len(s.nodes) == 3  # every node ran trajectories
    assert stats["batch"]["batches_created"] == 5 and stats["requests"] == 0  # 3 Writer + 2 Critic steps
    assert set(stats["batch"]["ok_by_custom_id"].values()) == {1}  # each call paid once
    assert _rows(tmp_path / "batch") == ref


def test_a_worker_node_killed_mid_generation_costs_only_its_calls_in_flight(tmp_path, cluster) -> None:
    """Kill a worker node (all its processes, SIGKILL) once a few trajectories are stored: the run
    finishes on the other nodes with every trajectory exact, none twice, and the calls paid twice
    are at most those that were in flight on the dead node (one per trajectory running there)."""
    n, rounds = 12, 3
    scenarios = load_scenarios("shp_paper", limit=n)
    cfg = GenerationConfig(max_rounds=rounds, embedder="fake-hash", workers=3, concurrency=2, flush_every=1)
    ref, ref_paid = _reference(tmp_path, scenarios, cfg)
    assert ref_paid == n * (2 * rounds - 1)
    root = tmp_path / "cluster"
    victim = cluster.workers[0]
    killed: dict[str, float] = {}

    def kill_when_stored(gen_id: str) -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if (root / "rounds").exists() and len(done_scenarios(Store(root), gen_id)) >= 3:
                break
            time.sleep(0.05)
        killed["at_stored"] = len(done_scenarios(Store(root), gen_id))
        cluster.remove_node(victim, allow_graceful=False)
        killed["t"] = time.monotonic()

    with SimServer(latency_s=0.3) as sim:
        gen_id = cfg.gen_id("sim", "sim-model")
        killer = threading.Thread(target=kill_when_stored, args=(gen_id,), daemon=True)
        killer.start()
        s = generate(scenarios, cfg, Store(root), _spec(sim), RunOptions(ray_address=cluster.address, progress=False))
        killer.join(60)
        paid, base_url = sim.stats["ok"], sim.base_url
    try:
        assert "t" in killed and killed["at_stored"] < n, f"the node was not killed mid-run: {killed}"
        assert (s.generated, s.failed) == (n, 0)
        # Its runs in flight ran again: at most `concurrency` per worker it held; a node may hold two
        # workers (the pool spreads them over the nodes whose services are up when it starts).
        assert s.lost_workers >= 1 and 1 <= s.resubmitted <= s.lost_workers * cfg.concurrency
        # Calls paid twice: at most one per trajectory that was in flight on the dead node (Writer and
        # Critic calls of a trajectory are sequential, the lexical judge makes none).
        assert 0 <= paid - ref_paid <= s.resubmitted, (paid, ref_paid, s.resubmitted)
        got = _rows(root)
        assert _unique(got, "gen_id", "scenario_id", "round") and got == ref
        judgments = Store(root).read("judgments").to_pylist()
        assert len(judgments) == n * rounds and _unique(judgments, "judge_key")
        assert Store(root).read("scenarios").num_rows == n
        assert s.cache_actor["puts"] > 0 and s.cache_actor["gets"] > 0  # the other nodes cached through it
        # The endpoint's one limiter lives on the head node: it outlived the worker node.
        import ray

        mine = f"shp-limiter-{limiter_id(base_url, '')}"
        limiters = [v for v in ray._private.state.actors().values() if v["Name"] == mine]
        assert [(v["Address"]["NodeID"], v["State"]) for v in limiters] == [(cluster.head_node.node_id, "ALIVE")]
    finally:
        cluster.workers[0] = cluster.add_node(num_cpus=1, resources={"shp_node_0": 1})  # for the next test
        cluster.wait_for_nodes()
    print(json.dumps({"paid": paid, "reference": ref_paid, "resubmitted": s.resubmitted, "nodes": s.nodes}))


def test_a_worker_node_killed_mid_batch_pays_no_line_twice(tmp_path, cluster) -> None:
    """Batch mode: the calls wait in the lockstep on the driver's node, so a worker node killed while a
    batch is out loses no call; its trajectories run again elsewhere and take their answers from the
    cache (or from the batch they were waiting on), never from a second batch."""
    scenarios = load_scenarios("shp_paper", limit=6)
    cfg = GenerationConfig(max_rounds=3, embedder="fake-hash", workers=3, flush_every=1)
    ref, _ = _reference(tmp_path, scenarios, cfg)
    victim = cluster.workers[1]
    with SimServer(batch_delay_s=1.5) as sim:

        def kill_in_second_batch() -> None:
            deadline = time.monotonic() + 240
            while sim.stats["batch"]["batches_created"] < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            cluster.remove_node(victim, allow_graceful=False)

        killer = threading.Thread(target=kill_in_second_batch, daemon=True)
        killer.start()
        spec = _spec(sim, batch=True, batch_poll_s=0.1)
        s = generate(
            scenarios, cfg, Store(tmp_path / "batch"), spec, RunOptions(ray_address=cluster.address, progress=False)
        )
        killer.join(60)
        stats = sim.stats
    try:
        assert (s.generated, s.failed) == (6, 0) and s.lost_workers >= 1 and s.resubmitted >= 1
        assert set(stats["batch"]["ok_by_custom_id"].values()) == {1} and stats["requests"] == 0  # none twice
        assert len(stats["batch"]["ok_by_custom_id"]) == 6 * 5
        assert _rows(tmp_path / "batch") == ref
    finally:
        cluster.workers[1] = cluster.add_node(num_cpus=1, resources={"shp_node_1": 1})
        cluster.wait_for_nodes()


_HOLD = """
import sys, time, ray
from shp_ray.generation.cluster_lock import cluster_lease
ray.init(address=sys.argv[1], include_dashboard=False, logging_level="WARNING", log_to_driver=False)
with cluster_lease(sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_the_generation_lease_holds_across_drivers_and_dies_with_its_holder(cluster) -> None:
    """Two drivers of one cluster: the second waits while the first holds the lease; a holder
    killed with SIGKILL releases it (Ray ends the actors a dead driver owned)."""
    name = lease_name("file:///some/store", "g" * 64)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, cluster.address, name], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(TimeoutError, match="held by another driver"), cluster_lease(name, timeout_s=2):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        with cluster_lease(name, timeout_s=60) as waited:
            assert waited < 60
        with cluster_lease(name, timeout_s=10) as waited:  # released on exit: taken again at once
            assert waited < 10
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(30)
        if holder.stdout is not None:
            holder.stdout.close()
