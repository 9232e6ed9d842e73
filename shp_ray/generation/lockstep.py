"""Lockstep: every trajectory of a job advances one call per provider batch (``provider.batch=true``).

The loop code does not change. Each trajectory (a *lane*) still awaits its Writer or Critic call;
in batch mode that call lands here and waits. Once every lane that may still call is waiting, the
waiting requests go out as one batch (split only where the provider's file limits say so): round
t's Writer calls of every trajectory, then their Critic calls, then round t+1 -- about
``2 * max_rounds - 1`` batches for a job of any size. A trajectory that ends (its last round, or a
failure) leaves, so it never holds the others back. The same requests, prompts and cache keys as
live mode: the stored trajectories are the same rows.

Nothing is paid twice:

- a request's ``custom_id`` is its response-cache key; every batch is written to the
  :class:`~storage.batch_ledger.BatchLedger` (requests first, then the batch id) before its first
  poll, and carries its submission key in its metadata. A rerun after a kill finds the batch its
  requests are in -- in the ledger, or at the provider for a kill between create and record -- and
  polls it instead of creating another;
- every line of an output file goes into the response cache before the batch is marked taken in,
  so a rerun answers those calls from the cache;
- a line that failed (error file, expired, cancelled, malformed output) goes into the next batch,
  and after ``max_tries`` batches to the live client (rate-limited, retried) instead;
- a request already in the response cache when its step goes out is answered from it: on a cluster,
  a trajectory whose worker died is run again elsewhere and asks again for a call its first run is
  still waiting on (the same cache key); it must not ride a second batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.services import completion_from_record, completion_record
from shp_ray.providers.base import ChatRequest, Completion, Provider, ProviderError, ProviderSpec
from shp_ray.providers.batch_api import BatchAPI, BatchState
from shp_ray.providers.batch_files import BatchLimits, request_line, split_lines
from storage.batch_ledger import BATCHES_FILE, BatchLedger, BatchRecord
from storage.cache import RESPONSES_FILE, ResponseCache

log = logging.getLogger("shp_ray.batch")

SUBMISSION_KEY = "shp_submission"  # the batch metadata key that names its submission


def submission_key(role: str, custom_ids: list[str], attempt: int) -> str:
    """The same requests at the same attempt always make the same key (what finds a batch again)."""
    blob = "\n".join([role, str(attempt), *sorted(custom_ids)])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass
class LockstepStats:
    batches_created: int = 0
    batches_adopted: int = 0  # found in the ledger or at the provider: not created again
    batch_requests: int = 0  # lines sent in batches (a retried line counts again)
    batch_completed: int = 0  # calls answered by a batch
    batch_failed_lines: int = 0
    live_fallbacks: int = 0  # calls sent live after max_tries batches
    polls: int = 0
    steps: int = 0  # flushes: one per lockstep step
    statuses: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> dict[str, object]:
        return {**vars(self), "statuses": dict(self.statuses)}


@dataclass(frozen=True)
class LockstepOptions:
    """How a :class:`Lockstep` batches: ``max_tries`` batches per request before it goes live, ``poll_s`` between
    polls, the provider's batch ``limits``, the ``metadata`` every batch carries, ``files_dir`` where finished
    batches' files wait until their lines are cached, and the ``clock`` it sleeps on."""

    max_tries: int = 2
    poll_s: float = 30.0
    limits: BatchLimits | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    files_dir: Path | None = None
    clock: Callable[[float], Awaitable[None]] = asyncio.sleep


@dataclass
class _Waiting:
    request: ChatRequest
    futures: list[asyncio.Future[Completion]] = field(default_factory=list)
    failures: int = 0  # batches this request failed in during this run


class Lockstep:
    """The collector of one job's calls; ``await lockstep.complete(request)`` is its provider call."""

    name = "batch"

    def __init__(
        self,
        api: BatchAPI,
        ledger: BatchLedger,
        cache: ResponseCache | None,
        *,
        role: str = "generation",
        live: Provider | None = None,
        options: LockstepOptions | None = None,
    ) -> None:
        options = LockstepOptions() if options is None else options
        self.api, self.ledger, self.cache, self.role, self.live = api, ledger, cache, role, live
        self.max_tries, self.poll_s, self.limits = options.max_tries, options.poll_s, options.limits or BatchLimits()
        self.metadata = dict(options.metadata)
        self.files_dir = options.files_dir  # where finished batches' files wait until their lines are cached
        self._sleep = options.clock
        self.stats = LockstepStats()
        self._lanes = 0  # trajectories that may still call
        self._blocked = 0  # callers waiting for a result
        self._waiting: dict[str, _Waiting] = {}
        self._flushing: asyncio.Task[None] | None = None

    # -- lanes ---------------------------------------------------------------------------------
    @property
    def lanes(self) -> int:
        return self._lanes

    def expect(self, lanes: int) -> None:
        """``lanes`` more trajectories will call (all of a job's, before the first one starts)."""
        self._lanes += lanes
        self._maybe_flush()  # fewer lanes (a run stopped early): the others may all be waiting already

    def leave(self) -> None:
        """One trajectory will call no more (it finished or failed)."""
        self._lanes -= 1
        self._maybe_flush()

    async def aclose(self) -> None:
        """Close the Batch API client and the ledger (the live provider belongs to the caller)."""
        aclose = getattr(self.api, "aclose", None)
        if aclose is not None:
            await aclose()
        self.ledger.close()

    # -- the provider call ---------------------------------------------------------------------
    async def complete(self, request: ChatRequest) -> Completion:
        fut: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(request.cache_key(), _Waiting(request)).futures.append(fut)
        self._blocked += 1
        self._maybe_flush()
        return await fut

    def _maybe_flush(self) -> None:
        if self._flushing is None and self._waiting and self._blocked >= self._lanes:
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        waiting, self._waiting = self._waiting, {}
        try:
            await self._step(waiting)
        except BaseException as exc:  # every waiter sees the error; nothing is left hanging
            for entry in waiting.values():
                self._settle(entry, exc)
            raise
        finally:
            self._flushing = None
        self._maybe_flush()  # every request of this step failed: the retries go out at once

    def _settle(self, entry: _Waiting, outcome: Completion | BaseException) -> None:
        for fut in entry.futures:
            if fut.done():
                continue
            self._blocked -= 1
            if isinstance(outcome, BaseException):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)

    # -- one step: batches out, results in -----------------------------------------------------
    async def _step(self, waiting: dict[str, _Waiting]) -> None:
        self.stats.steps += 1
        if self.cache is not None:  # answered since it was asked: a trajectory run again elsewhere asks late
            cache = self.cache
            known = await asyncio.to_thread(lambda: {cid: cache.get(cid) for cid in waiting})
            for cid, record in known.items():
                if record is not None:
                    self._settle(waiting.pop(cid), replace(completion_from_record(record), cached=False))
            if not waiting:
                return
        held = self.ledger.holding(list(waiting))
        records: dict[str, BatchRecord] = {}
        for rec in {r.submission: r for r in held.values()}.values():
            found = await self._resolve(rec)
            if found is not None:
                records[found.submission] = found
        fresh = [cid for cid in waiting if cid not in held or held[cid].submission not in records]
        for chunk in split_lines([request_line(cid, waiting[cid].request) for cid in fresh], self.limits):
            rec = await self._submit(chunk)
            records[rec.submission] = rec
        results: dict[str, Completion] = {}
        for rec in records.values():
            results.update(await self._take(rec, waiting))
        retries = []
        for cid, entry in waiting.items():
            if cid in results:
                self._settle(entry, results[cid])
            else:
                retries.append(self._retry(cid, entry))
        await asyncio.gather(*retries)

    async def _resolve(self, rec: BatchRecord) -> BatchRecord | None:
        """A submission of an earlier run: its batch, or None when it was never created."""
        if rec.batch_id:
            self.stats.batches_adopted += 1
            return rec
        found = await self.api.find(SUBMISSION_KEY, rec.submission)
        if found is None:  # the run stopped before the create call reached the provider: nothing to pay
            self.ledger.void(rec.submission)
            return None
        self.stats.batches_adopted += 1
        self.ledger.created(rec.submission, found.id, found.status)
        return self.ledger.get(rec.submission)

    async def _submit(self, lines: list[dict]) -> BatchRecord:
        cids = [line["custom_id"] for line in lines]
        key = submission_key(self.role, cids, max(self.ledger.tries(cid) for cid in cids))
        # Before the create: a kill after it is found by key. Where it went, for `shp-query --batches cancel`.
        self.ledger.intend(key, self.role, cids, endpoint=self.api.endpoint, key_env=self.api.spec.api_key_env)
        batch_id = await self.api.submit(lines, metadata={**self.metadata, SUBMISSION_KEY: key})
        self.ledger.created(key, batch_id, "validating")
        self.stats.batches_created += 1
        self.stats.batch_requests += len(lines)
        log.info("batch %s: %d %s requests submitted", batch_id, len(lines), self.role)
        rec = self.ledger.get(key)
        assert rec is not None
        return rec

    async def _take(self, rec: BatchRecord, waiting: dict[str, _Waiting]) -> dict[str, Completion]:
        """Poll ``rec``'s batch to its end, put every finished line in the cache, return them."""
        assert rec.batch_id is not None
        start = time.monotonic()
        while True:
            state = await self.api.retrieve(rec.batch_id)
            self.stats.polls += 1
            self.ledger.seen(rec.submission, state.status)
            if state.terminal:
                break
            await self._sleep(self.poll_s)
        self.stats.statuses[state.status] = self.stats.statuses.get(state.status, 0) + 1
        got = self.api.parse(*await self._files(state))
        out: dict[str, Completion] = {}
        for cid, completion in got.completions.items():
            completion = replace(completion, mode="batch")
            entry = waiting.get(cid)
            if self.cache is not None:
                record = completion_record(entry.request if entry is not None else None, completion)
                await asyncio.to_thread(self.cache.put, cid, record)
            out[cid] = completion
        self.stats.batch_completed += len(out)
        self.stats.batch_failed_lines += len(got.errors) + len(got.malformed)
        self.ledger.taken(rec.submission)  # only now: a kill before this re-reads the kept files, pays nothing
        if self.files_dir is not None:
            for path in (self.files_dir / f"{state.id}.jsonl", self.files_dir / f"{state.id}.errors.jsonl"):
                path.unlink(missing_ok=True)
        log.info(
            "batch %s %s after %.0f s: %d answered, %d failed lines",
            rec.batch_id, state.status, time.monotonic() - start, len(out), len(got.errors) + len(got.malformed),
        )  # fmt: skip
        return out

    async def _files(self, state: BatchState) -> tuple[bytes, bytes]:
        """A finished batch's output and error files, downloaded once: kept beside the ledger until taken."""
        if self.files_dir is None:
            return await self.api.download(state)
        kept = self.files_dir / f"{state.id}.jsonl"
        errors = self.files_dir / f"{state.id}.errors.jsonl"
        if kept.exists() and errors.exists():
            return kept.read_bytes(), errors.read_bytes()
        output, error_lines = await self.api.download(state)
        self.files_dir.mkdir(parents=True, exist_ok=True)
        for path, data in ((errors, error_lines), (kept, output)):  # the output last: both exist or it is fetched
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return output, error_lines

    async def _retry(self, cid: str, entry: _Waiting) -> None:
        """A request no batch answered: the next batch, or live after ``max_tries`` batches."""
        entry.failures += 1
        if self.ledger.tries(cid) < self.max_tries:
            self._waiting[cid] = entry
            return
        if self.live is None:
            self._settle(entry, ProviderError(f"no batch answered this request in {self.max_tries} tries"))
            return
        self.stats.live_fallbacks += 1
        try:
            completion = await self.live.complete(entry.request)
        except ProviderError as exc:
            self._settle(entry, exc)
            return
        self._settle(entry, completion)


class LockstepProvider:
    """The provider a :class:`~shp_ray.generation.services.CachedChat` wraps in batch mode: each call
    waits in a Lockstep (``submit`` is ``lockstep.complete``, or a Ray actor's method)."""

    name = "batch"

    def __init__(self, submit: Callable[[ChatRequest], Awaitable[Completion]]) -> None:
        self._submit = submit

    async def complete(self, request: ChatRequest) -> Completion:
        return await self._submit(request)


def open_lockstep(
    spec: ProviderSpec, cache_dir: Path, *, role: str, live: Provider | None, metadata: dict[str, str]
) -> Lockstep:
    """The Lockstep of one job on ``spec``'s endpoint, its ledger and response cache in ``cache_dir``."""
    return Lockstep(
        BatchAPI(spec),
        BatchLedger(cache_dir / BATCHES_FILE),
        ResponseCache(cache_dir / RESPONSES_FILE),
        role=role,
        live=live,
        options=LockstepOptions(
            max_tries=spec.batch_max_tries, poll_s=spec.batch_poll_s, metadata=metadata,
            files_dir=cache_dir / "batch-files",
        ),
    )  # fmt: skip


def still_running(cache_dir: Path) -> str:
    """What a stopped run says about its batches: which are still at the provider, and what to do."""
    path = cache_dir / BATCHES_FILE
    if not path.exists():
        return ""
    ledger = BatchLedger(path)
    try:
        open_ = [r for r in ledger.unfinished() if r.batch_id]
    finally:
        ledger.close()
    if not open_:
        return ""
    ids = ", ".join(r.batch_id or "" for r in open_[:5]) + (" ..." if len(open_) > 5 else "")
    return (
        f"{len(open_)} batch(es) are still at the provider ({ids}); they keep running and are paid for. "
        "Rerun the same command to resume polling them (nothing is submitted twice), or cancel them with "
        "`shp-query --store <store> --batches cancel`."
    )


def lockstep_local(
    pending: Iterable[Scenario], spec: ProviderSpec, live: Provider, cache: Path, gen_id: str
) -> tuple[Iterator[Scenario], Lockstep | None]:
    """Batch mode in-process: the job's scenarios (all of them: they advance together) and its Lockstep."""
    if not spec.batch:
        return iter(pending), None
    todo = list(pending)
    lockstep = open_lockstep(spec, cache, role="generation", live=live, metadata={"shp_gen_id": gen_id[:16]})
    lockstep.expect(len(todo))
    return iter(todo), lockstep
