"""``shp-bench replay --ray-nodes 1,3``: the replay of a bucketed store on one node vs on a local Ray cluster.

Each figure is a FRESH process that opens the store and reads ``policy_summary`` (every standard policy and the
10 x 5 eps x k grid, as ``shp-bench replay`` replays): on one node, ``analysis.connect(store)`` (one DuckDB); with
``nodes`` = k, ``analysis.connect(store, ray_address=...)`` joined to a ``ray.cluster_utils.Cluster`` of k nodes
of 1 CPU each started here (one DuckDB per bucket as a Ray task, the shares added up: ``analysis.replay.ray_replay``).
On one machine the nodes share its cores, so this measures the overhead of going through Ray (joining,
scheduling, one open per bucket, the combination), not a speed-up. Every open is measured twice, the first
(which computes and keeps each bucket's replay inputs) and a later one; the summaries must equal the single-node
one (floats to 1e-9), else the benchmark fails. A store that is not bucketed is moved into ``--buckets`` buckets
first (timed); a new one is written into them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where the store is written
    from storage.synthetic import SyntheticSpec


def measure(store: Path, rounds: int, address: str | None) -> dict[str, Any]:
    """In a fresh process: open the store (on Ray when ``address``) and read policy_summary."""
    from bench.measure import peak_rss_mb, replay_policies

    t0 = time.perf_counter()
    import analysis
    from analysis import sql

    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    con = analysis.connect(store, policies=replay_policies(rounds), ray_address=address)
    rows = con.sql(sql.query("bench_ray_summary", columns="*" if address else "* EXCLUDE (scores)")).fetchall()
    took = time.perf_counter() - t0
    return {"end_to_end_s": round(took, 3), "import_s": round(import_s, 3), "peak_rss_mb": round(peak_rss_mb()),
            "inputs": analysis.setup_of(con).inputs, "rows": [[_plain(v) for v in r] for r in rows]}  # fmt: skip


def _plain(v: object) -> object:
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def _same(a: list, b: list) -> bool:
    def eq(x: object, y: object) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(x) and math.isnan(y))
        return x == y

    return len(a) == len(b) and all(len(r) == len(s) and all(map(eq, r, s)) for r, s in zip(a, b, strict=True))


def _fresh(store: Path, rounds: int, address: str | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.replay_ray", str(store), str(rounds), address or ""]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"measuring process failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _twice(store: Path, rounds: int, address: str | None) -> dict[str, Any]:
    first, later = _fresh(store, rounds, address), _fresh(store, rounds, address)
    later["first_open_s"] = first["end_to_end_s"]
    shown = {k: v for k, v in later.items() if k != "rows"}
    print(json.dumps({"address": address, **shown}), file=sys.stderr, flush=True)  # each figure as it comes
    return later


def bucketed(store: Path, spec: SyntheticSpec, buckets: int) -> dict[str, Any]:
    """``store`` in ``buckets`` buckets: moved there if it holds parts (timed), else written there (``spec``)."""
    from analysis.replay import signals_store
    from storage.parts import Store
    from storage.rebucket import outside, rebucket
    from storage.synthetic import write_synthetic_store

    made: dict[str, Any] = {}
    st = Store(store)
    if st.parts("rounds"):
        if outside(st) or not st.buckets:
            t0 = time.perf_counter()
            made["rebucket"] = rebucket(st, st.buckets or buckets)
            made["rebucket_s"] = round(time.perf_counter() - t0, 1)
        return made
    store.mkdir(parents=True, exist_ok=True)
    rebucket(st, buckets)  # an empty store: the layout file only, so every part below is written into the buckets
    t0 = time.perf_counter()
    write_synthetic_store(store, spec)
    made["synth_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    signals_store.build(Store(store))
    made["signals_build_s"] = round(time.perf_counter() - t0, 1)
    return made


def run(store: Path, rounds: int, nodes: list[int], made: dict[str, Any]) -> dict[str, Any]:
    """The single-node figure, then each cluster size's; ``identical``: every summary equals the single-node one."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray.cluster_utils import Cluster

    from storage.parts import Store
    from storage.rebucket import store_buckets

    single = _twice(store, rounds, None)
    out: dict[str, Any] = {"single_node": {k: v for k, v in single.items() if k != "rows"}, "ray": {}}
    identical = True
    for k in nodes:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            for _ in range(k - 1):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            got = _twice(store, rounds, cluster.address)
        finally:
            _stop(cluster)
        identical &= _same(single["rows"], got.pop("rows"))
        out["ray"][str(k)] = got
    st = Store(store).snapshot()
    return {**out, "identical": identical, "buckets": len(store_buckets(st)), "policies_rows": len(single["rows"]),
            "parts": {t: len(st.parts(t)) for t in ("rounds", "signals", "trajectory_inputs", "judgments")},
            **made, "process": "fresh (each open in a new interpreter)",
            "data": "synthetic (storage.synthetic: not a model's output)"}  # fmt: skip


def _stop(cluster: object) -> None:
    """Stop the local cluster; on a loaded machine its GCS may not answer the drain: then kill its processes."""
    try:
        cluster.shutdown()  # type: ignore[attr-defined]  # a ray.cluster_utils.Cluster
    except Exception:  # noqa: BLE001 - ray.exceptions.RpcError and kin: the processes are ours, kill them
        for node in cluster.list_all_nodes():  # type: ignore[attr-defined]  # a ray.cluster_utils.Cluster
            node.kill_all_processes(check_alive=False, allow_graceful=False)


if __name__ == "__main__":  # the measuring process: STORE ROUNDS ADDRESS (empty: one node)
    print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] or None)), flush=True)
