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
from dataclasses import dataclass, field
from typing import Any

from shp_ray.generation.actors import LockstepActor, StoreWriterActor, TrajectoryWorker, WorkerSetup
from shp_ray.generation.cluster import actor_raised, driver_node, live_nodes, on_node, start_ray
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.embedder import known_dim
from shp_ray.generation.guard import GenerationAborted
from shp_ray.generation.interrupt import check as check_interrupt
from shp_ray.generation.node_services import ClusterServices, start_services
from shp_ray.generation.pool import WorkerPool
from shp_ray.generation.run_context import Run
from shp_ray.generation.run_summary import count_progress, generation_row
from shp_ray.providers.shared_limiter import forget_limiter
from storage.write_fault import write_failure


@dataclass
class _Placed:
    """The actors a run started (``owned``: killed at its end) and the handles the driver's loop uses."""

    owned: list[object] = field(default_factory=list)
    services: ClusterServices | None = None
    pool: WorkerPool | None = None
    writer: Any = None
    lockstep: Any = None


def run_ray(pending: Iterator[Scenario], run: Run) -> None:
    """Place the run's actors over the cluster, drive the workers until every scenario is done (or the breaker
    trips), then flush the writer and add the services' counts to the summary."""
    import ray

    first = next(pending, None)
    if first is None:  # everything is stored already: no Ray, no model load
        return
    pending = itertools.chain([first], pending)
    lanes = 0
    if run.spec.batch:  # every trajectory of the job advances together: all of them in flight at once
        todo = list(pending)
        lanes, pending = len(todo), iter(todo)
    started = start_ray(run.options.ray_address, run.options.num_cpus)
    placed = _Placed()
    try:
        run.summary.ray_cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        _place(run, placed, lanes)
        t0 = time.perf_counter()
        _drive(run, placed, pending, lanes)
        run.summary.rows = ray.get(placed.writer.flush.remote())
        run.summary.generation_s = time.perf_counter() - t0
        _tally(run, placed)
    except KeyboardInterrupt:  # Ctrl-C: stop calling, keep the whole trajectories the writer holds, then stop
        if placed.pool is not None:
            placed.pool.kill_all()
        if placed.writer is not None:
            run.summary.rows = ray.get(placed.writer.flush.remote())
        raise
    except Exception as exc:
        # The store or a cache could not be written (a full disk): stop here, one line, not Ray's traceback.
        if (fault := write_failure(exc)) is not None:
            raise fault from None
        raise
    finally:
        if placed.pool is not None:
            placed.pool.kill_all()
        for actor in placed.owned:
            with contextlib.suppress(Exception):  # an actor of a node that died is gone already
                ray.kill(actor)
        if run.options.ephemeral_endpoint:
            forget_limiter(run.spec)
        if started:
            ray.shutdown()


def _place(run: Run, placed: _Placed, lanes: int) -> None:
    """Start the services of every node, the store writer (and in batch mode the lockstep) on the driver's
    node, and the workers: at least one per node with CPUs."""
    import ray

    cfg, spec, summary, factory, cache = run.cfg, run.spec, run.summary, run.options.provider_factory, str(run.cache)
    driver = driver_node()
    nodes = live_nodes(driver)
    services = start_services(nodes, driver, cfg, spec, factory, cache)
    placed.services = services
    placed.owned.extend(services.owned)
    # The writer and the workers start while the embedding model loads; they need its size, known from the
    # model's folder for the default (else the run waits for the model first).
    dim = known_dim(cfg.embedder)
    if dim is None:
        services.ready()
        dim = services.dim
    here = on_node(driver)
    writer = StoreWriterActor.options(max_concurrency=1, **here).remote(run.store.uri, dim, cfg.flush_every)
    placed.writer = writer
    placed.owned.append(writer)
    per_worker = cfg.concurrency
    workers = cfg.workers_for(None if lanes else run.prog.state.total, len(nodes))
    if lanes:
        lockstep = LockstepActor.options(max_concurrency=10_000, **here).remote(spec, factory, cache, summary.gen_id)
        placed.lockstep = lockstep
        placed.owned.append(lockstep)
        ray.get(lockstep.expect.remote(lanes))
        per_worker = -(-lanes // workers) + 1  # a lane that cannot start would hold every batch back

    # A server started for this run has no other caller than its one live worker (no judge actor, no lockstep):
    # that worker keeps the limiter itself.
    judge_actors = any(svc.judge is not None for svc in services.nodes.values())
    only_caller = run.options.ephemeral_endpoint and workers == 1 and not lanes and not judge_actors
    setup = WorkerSetup(cfg, spec, factory, cache, summary.gen_id, dim, only_caller)

    def make(node_id: str) -> object:
        node = services.nodes[node_id]
        return TrajectoryWorker.options(max_concurrency=per_worker, **on_node(node_id)).remote(
            setup, node, writer, placed.lockstep
        )

    def usable() -> list[str]:  # the nodes a replacement worker may go to: their services still alive
        services.forget_dead()
        return [n.node_id for n in nodes if n.node_id in services.nodes]

    placed.pool = WorkerPool(make, usable, workers, per_worker)
    warm = [w.handle.warm.remote() for w in placed.pool.workers]  # actor processes up, provider ready
    services.ready(expected_dim=dim)  # nothing is written before every node's model has embedded a text
    ray.get(writer.add.remote("generations", [generation_row(summary.gen_id, cfg, spec, services.embedder, dim)]))
    try:
        ray.get(warm)
    except ray.exceptions.ActorDiedError as exc:
        # A worker's constructor builds the provider on its node (a key read from that node's environment):
        # what it raised is the message, not Ray's traceback of it.
        if (said := actor_raised(exc)) is None:  # not its constructor: a node lost (the pool's business)
            raise
        raise GenerationAborted(f"a trajectory worker could not start: {said}. No trajectory was generated.") from None


def _drive(run: Run, placed: _Placed, pending: Iterator[Scenario], lanes: int) -> None:
    """The driver's loop: keep the workers filled (bounded in flight), count each finished trajectory, wake each
    second for the progress line, stop issuing calls once the breaker trips."""
    import ray

    summary, breaker, pool = run.summary, run.breaker, placed.pool
    assert pool is not None
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
        total = pool.stats()
        count_progress(summary, run.prog, total, total["http_429"])

    def more() -> Scenario | None:
        nonlocal lanes
        scn = None if breaker.tripped or pool.fault else next(pending, None)
        if scn is not None:
            summary.submitted += 1
            lanes -= 1
        return scn

    while not breaker.tripped:  # bounded in flight; wake each second for progress
        check_interrupt()  # a Ctrl-C that a blocking Ray call swallowed still stops the run
        pool.fill(more)
        if not pool.in_flight:
            break
        collect(pool.wait(1.0))
        poll()
    if placed.lockstep is not None and lanes > 0:
        ray.get(placed.lockstep.expect.remote(-lanes))  # stopped early: lanes that never started hold nothing back
    if pool.fault is not None:
        raise pool.fault
    if breaker.tripped:  # stop issuing calls: in-flight trajectories are dropped whole, never half-written
        pool.kill_all()
    summary.lost_workers, summary.resubmitted = pool.lost, pool.resubmitted
    if not breaker.tripped:
        poll(force=True)


def _tally(run: Run, placed: _Placed) -> None:
    """Add what the services counted (the judge's calls, the embedded texts, the cache actor, the lockstep) to
    the summary; close the lockstep."""
    import ray

    summary, services = run.summary, placed.services
    assert services is not None
    jstats = services.judge_stats()
    summary.tokens += int(jstats.get("judge_tokens", 0))
    summary.paid_tokens += int(jstats.get("judge_paid_tokens", 0))
    summary.calls += int(jstats.get("judge_calls", 0))
    summary.cached_calls += int(jstats.get("judge_cached", 0))
    summary.http_429 += int(jstats.get("judge_http_429", 0))
    summary.embedded_texts = services.embedded_texts()
    if services.cache is not None:
        summary.cache_actor = ray.get(services.cache.stats.remote())
    if placed.lockstep is not None:
        summary.batch = ray.get(placed.lockstep.stats.remote())
        ray.get(placed.lockstep.close.remote())
