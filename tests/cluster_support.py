"""A real multi-node Ray cluster on this machine for the cluster tests (``ray.cluster_utils.Cluster``: a head and
worker nodes, each its own raylet and processes), with node deaths detected in ~1.5 s (the head's health checks
tightened; Ray's default is ~15 s, which only makes the wait longer)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FAST_DEATH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 500}


@contextmanager
def local_cluster(workers: int) -> Iterator[Any]:
    """A head (1 CPU) and ``workers`` worker nodes (1 CPU and resource ``shp_node_<i>`` each, in ``.workers``),
    this process joined to it as a driver."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.cluster_utils import Cluster

    assert not ray.is_initialized(), "another module left Ray running"
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "_system_config": FAST_DEATH},
    )
    try:
        c.workers = [c.add_node(num_cpus=1, resources={f"shp_node_{i}": 1}) for i in range(workers)]  # type: ignore[attr-defined]
        c.wait_for_nodes()
        ray.init(address=c.address, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def same_summary(root: str, address: str) -> None:
    """The Ray replay of the store at ``root`` (on the cluster at ``address``) equals the single-node replay: the same
    policy_summary row for row, floats up to the order of their additions."""
    import analysis
    from analysis import sql

    summary = sql.query("bench_ray_summary", columns="* EXCLUDE (scores)")  # the per-score map is not combined
    single = analysis.connect(root).sql(summary)
    columns, expected = single.columns, single.fetchall()
    on_ray = analysis.connect(root, ray_address=address)
    got = on_ray.sql(sql.query("bench_ray_summary", columns="*"))
    assert got.columns == columns
    rows = got.fetchall()
    assert len(rows) == len(expected) > 0
    for want, have in zip(expected, rows, strict=True):
        for column, a, b in zip(columns, want, have, strict=True):
            if isinstance(a, float) and isinstance(b, float):
                assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (want[:3], column, a, b)
            else:
                assert a == b, (want[:3], column, a, b)
    assert analysis.setup_of(on_ray).inputs == "ray"
