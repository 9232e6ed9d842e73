"""``generate(scenarios, cfg, store, provider_spec)``: full trajectories on Ray into the store.

Scenarios stream in (any iterable); at most ``workers x concurrency``
trajectories are in flight, so memory does not grow with the number of
scenarios. A (gen_id, scenario_id) already in the store is skipped: a rerun
after a crash (``kill -9`` included) finishes the run without duplicate rows,
and the persistent response cache makes it repeat no completed paid call.

Ray starts quietly on this machine (2 CPUs, no dashboard, no usage stats) or
joins ``ray_address`` (one node or a cluster: :mod:`shp_ray.generation.ray_run`);
an already initialised Ray is reused and left running. ``RunOptions(backend="local")`` runs
the same loop in-process (unit tests, tiny runs).

A :class:`~shp_ray.generation.guard.Breaker` watches the run: when the endpoint's server dies, a permanent
refusal comes back, or the same failure ends trajectory after trajectory, the run stops issuing
calls, keeps what it completed, records the reason in ``failures`` (stage ``endpoint``) and
raises :class:`~shp_ray.generation.guard.GenerationAborted`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from shp_ray.generation.answer_config import build as build_extractor
from shp_ray.generation.cluster import start_ray
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import Scenario
from shp_ray.generation.embedder import Embedder, embedder_name
from shp_ray.generation.guard import Breaker, GenerationAborted, failure_outcome
from shp_ray.generation.interrupt import check as check_interrupt
from shp_ray.generation.lockstep import Lockstep, LockstepProvider, lockstep_local, still_running
from shp_ray.generation.loop import generate_trajectory
from shp_ray.generation.progress import Progress
from shp_ray.generation.records import trajectory_rows
from shp_ray.generation.run_context import Run, RunOptions
from shp_ray.generation.run_summary import GenerationSummary, count_progress, generation_row, record_abort
from shp_ray.generation.score_config import build as build_scorer
from shp_ray.generation.services import (
    CachedChat,
    EmbedBatcher,
    JudgeService,
    LocalServices,
    load_factory,
)
from shp_ray.providers.base import ProviderSpec
from storage.cache import JUDGMENTS_FILE, RESPONSES_FILE, JudgeCache, ResponseCache
from storage.compact import recover
from storage.manifest import new_run_id, write_manifest
from storage.parts import TEMP_GRACE_S, Store
from storage.resume import done_scenarios, failed_scenarios
from storage.verify import require_sound
from storage.write_fault import WriteFailed, writing
from storage.writer import StoreWriter

log = logging.getLogger("shp_ray.batch")

__all__ = ["GenerationConfig", "GenerationSummary", "RunOptions", "generate", "judge_label", "start_ray"]


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
    store: Store,
    provider_spec: ProviderSpec,
    options: RunOptions | None = None,
) -> GenerationSummary:
    """Generate every scenario not yet stored for this config; returns what happened.

    ``options`` (:class:`RunOptions`): the backend, the provider factory, the caches, where Ray runs, the
    progress line (default: on Ray, the paper's defaults). Raises GenerationAborted when the run stops early.
    """
    options = RunOptions() if options is None else options
    cache = _open_store_and_caches(store, options)
    gen_id = cfg.gen_id(provider_spec.kind, provider_spec.model)
    skip = done_scenarios(store, gen_id)
    if not cfg.retry_failed:
        skip |= failed_scenarios(store, gen_id)
    total = options.total
    if total is None and hasattr(scenarios, "__len__"):
        total = len(scenarios)  # type: ignore[arg-type]
    summary = GenerationSummary(
        options.run_id or new_run_id(), gen_id, store.uri, embedder_name(cfg.embedder), judge_label(cfg, provider_spec)
    )
    start = time.perf_counter()
    pending = _pending(scenarios, skip, summary)
    first = next(pending, None)  # nothing to generate: no Ray, no model load
    # Ray first: a run whose Ray does not start records no manifest row.
    ray_here = options.backend == "ray" and first is not None and start_ray(options.ray_address, options.num_cpus)
    if first is not None:
        pending = itertools.chain([first], pending)
    breaker = Breaker(provider_spec, options.watchdog)
    try:
        write_manifest(
            store,
            summary.run_id,
            {"generation": cfg.to_dict(), "provider": asdict(provider_spec), "store": store.uri, "gen_id": gen_id},
            {"seed": cfg.seed},
            options.command,
        )
        with Progress(total, options.progress) as prog:
            run = Run(cfg, store, provider_spec, cache, summary, prog, breaker, options)
            if options.backend == "local":
                asyncio.run(_run_local(pending, run))
            else:
                from shp_ray.generation.ray_run import run_ray  # imports Ray: only when a run uses it

                run_ray(pending, run)
    except BaseException:  # Ctrl-C, a crash: batches at the provider run on, and the user must hear of them
        if provider_spec.batch and (told := still_running(cache)):
            log.warning("%s", told)
        raise
    finally:
        if ray_here:
            import ray

            ray.shutdown()
    summary.elapsed_s = time.perf_counter() - start
    if breaker.tripped:
        record_abort(store, gen_id, breaker.tripped)
        raise GenerationAborted(
            f"generation stopped early: {breaker.tripped}\n"
            f"This run stored {summary.generated} trajectories (kept; nothing half-written) and "
            f"{summary.failed} failed for good; the rest were not generated. Rerun the same command to resume."
        )
    return summary


def _open_store_and_caches(store: Store, options: RunOptions) -> Path:
    """Settle what a killed run left in the store, check the store, and open the caches (their folder returned):
    a store or a cache that cannot be used is said before any call is paid."""
    recover(store)  # first: a killed compaction's temp is settled by its journal, never swept
    store.sweep_temp(min_age_s=TEMP_GRACE_S)
    require_sound(store, writer=True)  # resume reads the store: a damaged part is named, never half-believed
    cache = Path(options.cache_dir) if options.cache_dir else store.cache_dir
    with writing(cache):
        cache.mkdir(parents=True, exist_ok=True)
    for opened in (ResponseCache(cache / RESPONSES_FILE), JudgeCache(cache / JUDGMENTS_FILE)):
        opened.close()  # opened here first: a cache that cannot be written is said before any call is paid
    return cache


@dataclass
class _Local:
    """The local backend's parts: the chat (through the batch lockstep in batch mode), the live chat under it,
    the embedding batcher, the lockstep (None: live calls), and the services the loop calls."""

    chat: CachedChat
    live: CachedChat
    batcher: EmbedBatcher
    lockstep: Lockstep | None
    services: LocalServices


def _local_services(pending: Iterator[Scenario], run: Run) -> tuple[Iterator[Scenario], _Local]:
    """The local backend's parts, and the scenarios as the lockstep counts them."""
    cfg, spec, cache = run.cfg, run.spec, run.cache
    live = CachedChat(
        load_factory(run.options.provider_factory)(replace(spec, batch=False)), ResponseCache(cache / RESPONSES_FILE)
    )
    pending, lockstep = lockstep_local(pending, spec, live.provider, cache, run.summary.gen_id)
    chat = live if lockstep is None else CachedChat(LockstepProvider(lockstep.complete), live.cache)
    embedder = Embedder(cfg.embedder, batch_size=cfg.embed_batch_size)
    judge = None
    if cfg.judges_inline:
        judge_chat = live if cfg.judge == "llm" else None  # never through the lockstep: a judge is no lane
        judge = JudgeService(
            cfg.judge, JudgeCache(cache / JUDGMENTS_FILE), judge_chat, cfg.judge_model or spec.model,
            cfg.judge_max_tokens, cfg.judge_parse_retries, cfg.seed,
        )  # fmt: skip
    batcher = EmbedBatcher(embedder, cfg.embed_batch_size)
    return pending, _Local(chat, live, batcher, lockstep, LocalServices(chat, batcher, judge))


async def _run_local(pending: Iterator[Scenario], run: Run) -> None:
    """The local backend: the loop in this process, ``workers x concurrency`` trajectories in flight (every one
    at once in batch mode), each written whole as it completes."""
    cfg, spec, summary, prog, breaker = run.cfg, run.spec, run.summary, run.prog, run.breaker
    pending, parts = _local_services(pending, run)
    chat, live, batcher, lockstep, services = parts.chat, parts.live, parts.batcher, parts.lockstep, parts.services
    embedder = batcher.embedder
    dim = embedder.dim
    writer = StoreWriter(run.store, dim, cfg.flush_every)
    scorers = [build_scorer(s) for s in cfg.scores]  # a python scorer is imported once, before any trajectory
    extractor = build_extractor(cfg.answer)  # each draft's answer (draft_answers), for the answer-based families
    writer.add("generations", [generation_row(summary.gen_id, cfg, spec, embedder.name, dim)])
    # Batch mode: every trajectory in flight at once (each waits in the lockstep, at no cost).
    limit = asyncio.Semaphore(cfg.workers * cfg.concurrency if lockstep is None else max(1, lockstep.lanes))

    faults: list[WriteFailed] = []  # the store or a cache could not be written: the run stops

    async def one(scn: Scenario) -> None:
        try:
            try:
                result = await generate_trajectory(scn, cfg, spec.model, services)
            finally:
                if lockstep is not None:
                    lockstep.leave()
            approval = cfg.prompts.approval
            rows = trajectory_rows(
                result, summary.gen_id, dim, embedder.name, approval, scorers, extractor, cfg.logprobs.last_k
            )
            writer.add_trajectory(rows)
            summary.generated += 0 if result.failed else 1
            summary.failed += 1 if result.failed else 0
            count_progress(summary, prog, chat.stats.snapshot(), chat.http_429())
            breaker.observe(failure_outcome(result.fatal), summary.paid_calls)
        except WriteFailed as fault:
            faults.append(fault)
        finally:
            limit.release()

    tasks: set[asyncio.Task[None]] = set()
    t0 = time.perf_counter()
    unstarted = lockstep.lanes if lockstep is not None else 0
    for scn in pending:
        await limit.acquire()  # bounded in flight: the iterator is pulled only as slots free up
        check_interrupt()  # a Ctrl-C that became a swallowed cancellation still stops the run
        breaker.check_endpoint()
        if breaker.tripped or faults:
            limit.release()
            break
        summary.submitted += 1
        unstarted -= 1
        task = asyncio.create_task(one(scn))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if lockstep is not None and unstarted:
        lockstep.expect(-unstarted)  # stopped early: lanes that never started hold no batch back
    # A write fault stops new trajectories but lets those in flight finish: each reply they pay for is
    # kept in the response cache, so the rerun pays for none of them again.
    while tasks and not breaker.tripped:
        await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
        check_interrupt()
    for task in tasks:  # stopped early: in-flight trajectories are dropped whole, never half-written
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if faults:
        await batcher.close()
        raise faults[0]
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
