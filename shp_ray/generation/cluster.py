"""The Ray cluster a run uses: joining it, its live nodes, and pinning an actor to one of them.

Where a run's actors go (one node or many, the same rules):

- **the driver's node**: everything that owns a file on the driver's disk -- the store's writer (the driver itself), the
  cache actor (:mod:`shp_ray.generation.cache_actor`), the batch lockstep, the generation lease --
  so that the SQLite caches are only ever opened by processes of one host (SQLite's WAL mode is
  safe across processes, never across hosts);
- **every live node with CPUs**: trajectory workers, each with that node's embedding and judge
  actors (:mod:`shp_ray.generation.node_services`), so work spreads with the cluster;
- **the head node**: the shared rate limiter of an endpoint (``shp_ray.providers.shared_limiter``),
  a detached actor that outlives jobs and any worker node.

Ray's own ``SPREAD`` strategy places an actor without saying where until it runs; a worker has to
call the embedding actor of ITS node, so the run places every actor itself, by node id.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from shp_ray.generation import interrupt
from shp_ray.generation.config import DEFAULT_RAY_CPUS


class RayUnavailable(RuntimeError):
    """Ray did not start here, or the cluster ``ray.address`` names could not be joined; says which."""


def start_ray(address: str | None = None, num_cpus: int = DEFAULT_RAY_CPUS) -> bool:
    """Start Ray quietly (or join ``address``); returns True if this call started it.

    No address (or ``local``) starts a Ray of this process's own, even when a cluster is recorded on
    the machine (``ray start --head`` leaves one in Ray's temp folder, which ``ray.init()`` would join,
    and then refuse ``num_cpus``): a run joins a cluster only when ``ray.address`` names it (``auto``,
    ``host:port``, ``ray://``).
    """
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray keeps a record of every task in the GCS for its dashboard (off here): cap it low so the
    # GCS's memory stays flat however many calls a long generation makes.
    os.environ.setdefault("RAY_task_events_max_num_task_in_gcs", "10000")
    joining = bool(address) and address != "local"
    try:  # joining: the cluster's CPUs (num_cpus None, as when not given)
        ray.init(
            address=address if joining else "local",
            num_cpus=None if joining else num_cpus,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"ray.address={address}: could not join the cluster" if joining else "Ray did not start on this machine"
        raise RayUnavailable(f"{where}: {said}") from None
    interrupt.reclaim()  # Ray's own SIGTERM handler would end the run without keeping its trajectories
    return True


@dataclass(frozen=True)
class Node:
    node_id: str
    cpus: int  # the node's CPUs


def driver_node() -> str:
    """The node this process runs on (a driver, a Ray task of the launcher, an actor)."""
    import ray

    return ray.get_runtime_context().get_node_id()


def on_node(node_id: str) -> dict[str, Any]:
    """Actor options that pin it to ``node_id`` (never elsewhere: if that node dies, the actor dies)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


def live_nodes(driver: str | None = None) -> list[Node]:
    """The alive nodes that can take work: those with CPUs (all of them if none has any), the
    driver's first, then by node id (a stable order: workers spread the same way every run)."""
    import ray

    nodes = [Node(n["NodeID"], int(n["Resources"].get("CPU", 0))) for n in ray.nodes() if n["Alive"]]
    working = [n for n in nodes if n.cpus > 0] or nodes
    return sorted(working, key=lambda n: (n.node_id != driver, n.node_id))


def alive(node_ids: set[str]) -> set[str]:
    """Which of ``node_ids`` Ray still counts alive."""
    import ray

    return {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] in node_ids}


def actor_raised(exc: BaseException) -> str | None:
    """What an actor's own code raised, as one line (``Type: message``, without Ray's traceback): in a method (a
    ``RayTaskError``) or in its constructor (an ``ActorDiedError`` carrying one). None when the actor or its
    node was lost instead: nothing the user's configuration said."""
    import ray

    task_error = exc if isinstance(exc, ray.exceptions.RayTaskError) else None
    if task_error is None:
        task_error = next((a for a in exc.args if isinstance(a, ray.exceptions.RayTaskError)), None)
    if task_error is None or not isinstance(task_error.cause, BaseException):
        return None
    cause = task_error.cause
    return f"{type(cause).__name__}: {' '.join(str(cause).split())}"
