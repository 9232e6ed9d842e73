"""``generate``'s Ray backend: the run's actors placed over the cluster's nodes, the driver's loop.

On one machine: one embedding actor, one judge actor, ``workers`` trajectory workers, the store
writer, all opening the caches in place -- what a run always did. On a cluster
(:mod:`shp_ray.generation.cluster` says where each actor goes): every node with CPUs gets an
embedding and a judge actor and at least one worker; the store writer, the cache actor and the
batch lockstep sit on the driver's node; the rate limiter of the endpoint on the head node. The
driver counts the progress of every worker, and when a worker dies (its node lost), its scenarios
run again elsewhere (:mod:`shp_ray.generation.pool`).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

from shp_ray.generation.actors import LockstepActor, StoreWriterActor, TrajectoryWorker
from shp_ray.generation.cluster import driver_node, live_nodes, on_node, start_ray
from shp_ray.generation.config import DEFAULT_RAY_CPUS, GenerationConfig
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.guard import Breaker
from shp_ray.generation.interrupt import check as check_interrupt
from shp_ray.generation.node_services import ClusterServices, start_services
from shp_ray.generation.pool import WorkerPool
from shp_ray.generation.progress import Progress
from shp_ray.generation.run_summary import GenerationSummary, count_progress, generation_row
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.shared_limiter import forget_limiter
from storage.parts import Store
from storage.write_fault import write_failure


def run_ray(
    pending: Iterator[Scenario],
    cfg: GenerationConfig,
    store: Store,
    spec: ProviderSpec,
    factory: str,
    cache: Path,
    summary: GenerationSummary,
    prog: Progress,
    breaker: Breaker,
    address: str | None,
    num_cpus: int = DEFAULT_RAY_CPUS,
    keep_embedder: bool = False,
    ephemeral_endpoint: bool = False,
) -> None:
    import ray

    first = next(pending, None)
    if first is None:  # everything is stored already: no Ray, no model load
        return
    pending = itertools.chain([first], pending)
    lanes = 0
    if spec.batch:  # every trajectory of the job advances together: all of them in flight at once
        todo = list(pending)
        lanes, pending = len(todo), iter(todo)
    started = start_ray(address, num_cpus)
    owned: list[object] = []
    services: ClusterServices | None = None
    pool: WorkerPool | None = None
    writer = None
    try:
        summary.ray_cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        driver = driver_node()
        nodes = live_nodes(driver)
        services = start_services(nodes, driver, cfg, spec, factory, str(cache), keep_embedder=keep_embedder)
        owned.extend(services.owned)
        dim, here = services.dim, on_node(driver)
        writer = StoreWriterActor.options(max_concurrency=1, **here).remote(store.uri, dim, cfg.flush_every)
        owned.append(writer)
        ray.get(writer.add.remote("generations", [generation_row(summary.gen_id, cfg, spec, services.embedder, dim)]))
        lockstep = None
        per_worker = cfg.concurrency
        workers = max(cfg.workers, len(nodes))
        if lanes:
            lockstep = LockstepActor.options(max_concurrency=10_000, **here).remote(
                spec, factory, str(cache), summary.gen_id
            )
            owned.append(lockstep)
            ray.get(lockstep.expect.remote(lanes))
            per_worker = -(-lanes // workers) + 1  # a lane that cannot start would hold every batch back

        def make(node_id: str) -> object:
            svc = services.nodes[node_id]  # type: ignore[union-attr]
            return TrajectoryWorker.options(max_concurrency=per_worker, **on_node(node_id)).remote(
                cfg, spec, factory, str(cache), summary.gen_id, dim, svc.embed, svc.judge, writer, lockstep, svc.cache
            )

        def usable() -> list[str]:  # the nodes a replacement worker may go to: their services still alive
            services.forget_dead()  # type: ignore[union-attr]
            return [n.node_id for n in nodes if n.node_id in services.nodes]  # type: ignore[union-attr]

        pool = WorkerPool(make, usable, workers, per_worker)
        ray.get([w.handle.warm.remote() for w in pool.workers])  # actor processes up, provider ready
        last_stats = 0.0

        def collect(outs: list[dict]) -> None:
            for out in outs:
                summary.generated += 0 if out["failed"] else 1
                summary.failed += 1 if out["failed"] else 0
                node = str(out.get("node", ""))[:12]
                summary.nodes[node] = summary.nodes.get(node, 0) + 1
                if out["failure"] is not None:
                    poll(force=True)  # the breaker needs the current count of paid calls
                breaker.observe(out["failure"], summary.paid_calls)

        def poll(force: bool = False) -> None:
            nonlocal last_stats
            if not force and time.monotonic() - last_stats < 1.0:
                return
            last_stats = time.monotonic()
            breaker.check_endpoint()
            total = pool.stats()  # type: ignore[union-attr]
            count_progress(summary, prog, total, total["http_429"])

        def more() -> Scenario | None:
            nonlocal lanes
            scn = None if breaker.tripped or pool.fault else next(pending, None)  # type: ignore[union-attr]
            if scn is not None:
                summary.submitted += 1
                lanes -= 1
            return scn

        t0 = time.perf_counter()
        while not breaker.tripped:  # bounded in flight; wake each second for progress
            check_interrupt()  # a Ctrl-C that a blocking Ray call swallowed still stops the run
            pool.fill(more)
            if not pool.in_flight:
                break
            collect(pool.wait(1.0))
            poll()
        if lockstep is not None and lanes > 0:
            ray.get(lockstep.expect.remote(-lanes))  # stopped early: lanes that never started hold nothing back
        if pool.fault is not None:
            raise pool.fault
        if breaker.tripped:  # stop issuing calls: in-flight trajectories are dropped whole, never half-written
            pool.kill_all()
        summary.rows = ray.get(writer.flush.remote())
        summary.generation_s = time.perf_counter() - t0
        summary.lost_workers, summary.resubmitted = pool.lost, pool.resubmitted
        if not breaker.tripped:
            poll(force=True)
        jstats = services.judge_stats()
        summary.tokens += int(jstats.get("judge_tokens", 0))
        summary.paid_tokens += int(jstats.get("judge_paid_tokens", 0))
        summary.calls += int(jstats.get("judge_calls", 0))
        summary.cached_calls += int(jstats.get("judge_cached", 0))
        summary.http_429 += int(jstats.get("judge_http_429", 0))
        summary.embedded_texts = services.embedded_texts()
        if services.cache is not None:
            summary.cache_actor = ray.get(services.cache.stats.remote())
        if lockstep is not None:
            summary.batch = ray.get(lockstep.stats.remote())
            ray.get(lockstep.close.remote())
    except KeyboardInterrupt:  # Ctrl-C: stop calling, keep the whole trajectories the writer holds, then stop
        if pool is not None:
            pool.kill_all()
        if writer is not None:
            summary.rows = ray.get(writer.flush.remote())
        raise
    except Exception as exc:
        # The store or a cache could not be written (a full disk): stop here, one line, not Ray's traceback.
        if (fault := write_failure(exc)) is not None:
            raise fault from None
        raise
    finally:
        if pool is not None:
            pool.kill_all()
        for actor in owned:
            with contextlib.suppress(Exception):  # an actor of a node that died is gone already
                ray.kill(actor)
        if ephemeral_endpoint:
            forget_limiter(spec)
        if started:
            ray.shutdown()
