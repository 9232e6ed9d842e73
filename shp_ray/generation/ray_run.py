"""``generate``'s Ray backend: the run's actors placed over the cluster's nodes, the driver's loop.

On one machine: one embedding actor (none when one worker runs: it holds the model), one judge actor (the LLM
judge's), ``workers`` trajectory workers, all opening the caches in place. On a cluster
(:mod:`shp_ray.generation.cluster` says where each actor goes): every node with CPUs gets a judge actor, at least
one worker, and an embedding actor unless every node has one worker; the cache actor and
the batch lockstep sit on the driver's node; the rate limiter of the endpoint on the head node. The driver
writes the store: each worker answers a trajectory with its rows, so the rows cross the cluster once, and
no writer actor is started. It counts the progress of every worker, and when a worker dies (its node lost),
its scenarios run again elsewhere (:mod:`shp_ray.generation.pool`).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shp_ray.generation.actors import LockstepActor, TrajectoryWorker, WorkerSetup
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
from shp_ray.sandbox.stale import remove_stale_dirs
from storage.write_fault import write_failure
from storage.writer import StoreWriter


@dataclass
class _Placed:
    """The actors a run started (``owned``: killed at its end) and the handles the driver's loop uses."""

    owned: list[Any] = field(default_factory=list)  # Ray actor handles
    services: ClusterServices | None = None
    pool: WorkerPool | None = None
    writer: StoreWriter | None = None
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
        run.summary.rows = _flush(placed)
        run.summary.generation_s = time.perf_counter() - t0
        _tally(run, placed)
    except KeyboardInterrupt:  # Ctrl-C: stop calling, keep the whole trajectories the writer holds, then stop
        if placed.pool is not None:
            placed.pool.kill_all()
        if placed.writer is not None:
            run.summary.rows = _flush(placed)
        raise
    except Exception as exc:
        # The store or a cache could not be written (a full disk): stop here, one line, not Ray's traceback.
        if (fault := write_failure(exc)) is not None:
            raise fault from None
        raise
    finally:
        if placed.pool is not None:
            placed.pool.kill_all()
            if placed.pool.in_flight:  # killed mid-trajectory: the sandbox folders they held on this node go now
                remove_stale_dirs(again=True)
        for actor in placed.owned:
            with contextlib.suppress(Exception):  # an actor of a node that died is gone already
                ray.kill(actor)
        if run.options.ephemeral_endpoint:
            forget_limiter(run.spec)
        if started:
            ray.shutdown()


def _place(run: Run, placed: _Placed, lanes: int) -> None:
    """Start the services of every node, the store's writer (in this process), in batch mode the lockstep on
    the driver's node, and the workers: at least one per node with CPUs."""
    cfg, spec, summary, factory, cache = run.cfg, run.spec, run.summary, run.options.provider_factory, str(run.cache)
    driver = driver_node()
    nodes = live_nodes(driver)
    workers = cfg.workers_for(None if lanes else run.prog.state.total, len(nodes))
    # The workers start while the embedding actors load the model; they need its size, known from the model's
    # folder for the default (else the run waits for the model first). A node's only worker holds the model
    # itself, loaded once the worker is up: one actor process less, what a small run mostly costs.
    dim = known_dim(cfg.embedder)
    embed_in_worker = dim is not None and workers == len(nodes)
    services = start_services(nodes, driver, cfg, spec, factory, cache, embed_in_worker)
    placed.services = services
    placed.owned.extend(services.owned)
    if dim is None:
        services.ready()
        dim = services.dim
    placed.writer = StoreWriter(run.store, dim, cfg.flush_every)
    per_worker = _lockstep(run, placed, lanes, workers) if lanes else cfg.concurrency

    # A server started for this run has no other caller than its one live worker (no judge actor, no lockstep):
    # that worker keeps the limiter itself.
    judge_actors = any(svc.judge is not None for svc in services.nodes.values())
    only_caller = run.options.ephemeral_endpoint and workers == 1 and not lanes and not judge_actors
    setup = WorkerSetup(cfg, spec, factory, cache, summary.gen_id, dim, only_caller)

    def make(node_id: str) -> object:
        node = services.nodes[node_id]
        # one slot past the trajectories the pool gives it: the driver's stats call each second must be answered
        # while the worker is full, or the progress line counts no paid call until a trajectory ends
        return TrajectoryWorker.options(max_concurrency=per_worker + 1, **on_node(node_id)).remote(  # type: ignore[attr-defined]  # a Ray ActorClass
            setup, node, placed.lockstep
        )

    def usable() -> list[str]:  # the nodes a replacement worker may go to: their services still alive
        services.forget_dead()
        return [n.node_id for n in nodes if n.node_id in services.nodes]

    placed.pool = WorkerPool(make, usable, workers, per_worker)
    _started([w.handle.warm.remote() for w in placed.pool.workers])  # actor processes up, provider ready
    if embed_in_worker:
        services.loading = {w.node_id: w.handle.embed_info.remote() for w in placed.pool.workers}
    services.ready(expected_dim=dim)  # nothing is written before every node's model has embedded a text
    placed.writer.add("generations", [generation_row(summary.gen_id, cfg, spec, services.embedder, dim)])


def _lockstep(run: Run, placed: _Placed, lanes: int, workers: int) -> int:
    """Batch mode: start the job's lockstep on the driver's node, expecting ``lanes``; each worker's concurrency."""
    import ray

    cache, here = str(run.cache), on_node(driver_node())
    lockstep = LockstepActor.options(max_concurrency=10_000, **here).remote(  # type: ignore[attr-defined]  # a Ray ActorClass
        run.spec, run.options.provider_factory, cache, run.summary.gen_id
    )
    placed.lockstep = lockstep
    placed.owned.append(lockstep)
    ray.get(lockstep.expect.remote(lanes))
    return -(-lanes // workers) + 1  # a lane that cannot start would hold every batch back


def _started(warm: list[Any]) -> None:
    """Wait for the workers' processes; a constructor's error (a key read from its node's environment) is the
    message, not Ray's traceback of it."""
    import ray

    try:
        ray.get(warm)
    except ray.exceptions.ActorDiedError as exc:
        if (said := actor_raised(exc)) is None:  # not its constructor: a node lost (the pool's business)
            raise
        raise GenerationAborted(f"a trajectory worker could not start: {said}. No trajectory was generated.") from None


def _drive(run: Run, placed: _Placed, pending: Iterator[Scenario], lanes: int) -> None:
    """The driver's loop: keep the workers filled (bounded in flight), count each finished trajectory, wake each
    second for the progress line, stop issuing calls once the breaker trips."""
    import ray

    summary, breaker, pool, writer = run.summary, run.breaker, placed.pool, placed.writer
    assert pool is not None and writer is not None
    last_stats = 0.0

    def write(out: dict) -> bool:
        """Write a trajectory's rows; False once the store cannot be written (the run takes no new scenario,
        those in flight finish -- every reply they pay for is cached -- then it raises ``pool.fault``)."""
        if pool.fault is not None:
            return False
        try:
            writer.add_trajectory(out["rows"])
        except Exception as exc:
            if (fault := write_failure(exc)) is None:
                raise
            pool.fault = fault
            return False
        return True

    def collect(outs: list[dict]) -> None:
        for out in outs:
            if not write(out):
                continue
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


def _flush(placed: _Placed) -> dict[str, int]:
    """Write what the writer still holds; the rows written per table."""
    assert placed.writer is not None
    placed.writer.flush()
    return dict(placed.writer.written)


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
    in_workers = placed.pool.stats()["encoded"] if placed.pool is not None else 0  # nodes whose one worker embeds
    summary.embedded_texts = services.embedded_texts() + in_workers
    if services.cache is not None:
        summary.cache_actor = ray.get(services.cache.stats.remote())
    if placed.lockstep is not None:
        summary.batch = ray.get(placed.lockstep.stats.remote())
        ray.get(placed.lockstep.close.remote())
