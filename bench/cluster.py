"""``shp-bench generation cluster``: generation on a local multi-node Ray cluster, 1 vs 2 vs 3 nodes.

Each node count gets a fresh ``ray.cluster_utils.Cluster`` on this machine (a head and k-1 worker
nodes, ``--cpus-per-node`` logical CPUs each: separate raylets and processes, one host's cores). On
each, the same generation (``fake-hash`` embedder, lexical judge: the pipeline, not a model) runs
twice against the simulated server (``shp-serve``, a test double, in its own process):

- **limited**: the server enforces ``--rpm`` and the client is told it. The one limiter per
  endpoint is cluster-wide, so the request rate must stay at the limit whatever the node count
  (``ratio_to_limit`` ~ 1, not k), with no 429 storm;
- **unlimited**: no limit, ``--latency-s`` per reply; what more nodes buy on this machine's cores.

Then the cache actor's throughput: ``--cache-ops`` gets and puts of response records issued at
once by an actor on a worker node through it, against the same from an actor on the driver's node
opening the SQLite file itself (the single-machine path). One JSON line, printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def _cluster(nodes: int, cpus: int):  # noqa: ANN202 - ray.cluster_utils.Cluster
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})
    for _ in range(nodes - 1):
        c.add_node(num_cpus=cpus)
    c.wait_for_nodes()
    return c


def _generation(a: argparse.Namespace, nodes: int, limited: bool) -> dict[str, Any]:
    from bench.sim_process import SIM, ServerProcess, stream
    from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
    from shp_ray.providers.base import ProviderSpec
    from storage.parts import Store

    n = a.limited_scenarios if limited else a.scenarios
    opts: dict[str, Any] = {"latency_s": a.latency_s}
    if limited:
        opts |= {"rpm": a.rpm, "window_s": a.window_s}
    cfg = GenerationConfig(
        max_rounds=a.rounds, embedder="fake-hash", judge="lexical", workers=nodes, concurrency=a.concurrency,
        flush_every=64,
    )  # fmt: skip
    root = tempfile.mkdtemp(prefix="shp-bench-cluster-")
    try:
        with ServerProcess(SIM, opts) as sim:
            spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model", rpm=a.rpm if limited else None)
            s = generate(stream(n), cfg, Store(root), spec, RunOptions(total=n, progress=False))
            stats = sim.finish()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    requests = n * (2 * a.rounds - 1)
    rps = requests / s.generation_s
    out: dict[str, Any] = {
        "nodes": nodes,
        "server": "limited" if limited else "unlimited",
        "scenarios": n,
        "requests": requests,
        "generation_s": round(s.generation_s, 2),
        "requests_per_s": round(rps, 2),
        "trajectories_per_node": sorted(s.nodes.values(), reverse=True),
        "server_ok": stats["ok"],
        "http_429": stats["http_429"],
        "failed": s.failed,
    }
    if limited:
        out |= {"limit_rps": round(a.rpm / 60, 2), "ratio_to_limit": round(rps / (a.rpm / 60), 3)}
    return out


def _cache_probe(ops: int) -> dict[str, Any]:
    """Gets and puts through the cache actor from a worker node vs the SQLite file from the driver's node."""
    import ray

    from shp_ray.generation.cache_actor import response_cache, start_cache_actor
    from shp_ray.generation.cluster import driver_node, live_nodes, on_node
    from shp_ray.generation.services import cache_get, cache_put

    @ray.remote(num_cpus=0)
    class Probe:
        async def run(self, folder: str, actor: object, ops: int) -> dict[str, float]:
            cache = response_cache(folder, actor)
            record = {"content": "x" * 400, "prompt_tokens": 300, "completion_tokens": 100, "latency_s": 0.1}
            t = time.perf_counter()
            await asyncio.gather(*(cache_put(cache, f"k{i}", record) for i in range(ops)))
            put_s = time.perf_counter() - t
            t = time.perf_counter()
            got = await asyncio.gather(*(cache_get(cache, f"k{i}") for i in range(ops)))
            get_s = time.perf_counter() - t
            assert all(g is not None for g in got)
            return {"puts_per_s": round(ops / put_s), "gets_per_s": round(ops / get_s)}

    driver = driver_node()
    other = next(n.node_id for n in live_nodes(driver) if n.node_id != driver)
    folder = tempfile.mkdtemp(prefix="shp-bench-cache-")
    try:
        actor = start_cache_actor(folder, on_node(driver))
        remote = ray.get(Probe.options(**on_node(other)).remote().run.remote(folder, actor, ops))  # type: ignore[attr-defined]  # a Ray ActorClass
        served = ray.get(actor.stats.remote())
        local = ray.get(Probe.options(**on_node(driver)).remote().run.remote(folder + "/local", None, ops))  # type: ignore[attr-defined]  # a Ray ActorClass
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "ops": ops,
        "remote": remote,
        "remote_actor_calls": served["calls"],
        "local_sqlite": local,
    }


def bench_cluster(a: argparse.Namespace) -> dict[str, Any]:
    import ray

    from shp_ray.generation.generate import start_ray

    runs, cache = [], None
    for nodes in a.nodes:
        c = _cluster(nodes, a.cpus_per_node)
        try:
            start_ray(c.address)
            for limited in (True, False):
                runs.append(_generation(a, nodes, limited))
            if nodes > 1 and cache is None and a.cache_ops:
                cache = _cache_probe(a.cache_ops)
        finally:
            ray.shutdown()
            c.shutdown()
    return {
        "bench": "generation.cluster",
        "server": "shp-serve (simulated test double, not a model)",
        "cpus_per_node": a.cpus_per_node,
        "machine_cores": os.cpu_count(),
        "rounds": a.rounds,
        "concurrency_per_worker": a.concurrency,
        "rpm": a.rpm,
        "latency_s": a.latency_s,
        "runs": runs,
        "cache_actor": cache,
    }


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("cluster", help="1 vs 2 vs 3 nodes of a local Ray cluster, rate-limited and unlimited")
    c.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    c.add_argument("--cpus-per-node", type=int, default=1)
    c.add_argument("--scenarios", type=int, default=120, help="scenarios of the unlimited runs")
    c.add_argument("--limited-scenarios", type=int, default=60, help="scenarios of the rate-limited runs")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--concurrency", type=int, default=16)
    c.add_argument("--rpm", type=float, default=900.0)
    c.add_argument("--window-s", type=float, default=2.0)
    c.add_argument("--latency-s", type=float, default=0.05)
    c.add_argument("--cache-ops", type=int, default=2000, help="0: skip the cache actor probe")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="shp-bench generation")
    add_parser(p.add_subparsers(dest="mode", required=True))
    print(json.dumps(bench_cluster(p.parse_args(argv)), sort_keys=True))
    return 0
