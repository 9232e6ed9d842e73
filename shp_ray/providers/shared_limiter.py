"""Find THE limiter of an endpoint: a named Ray actor when Ray runs, else one per process.

Every client of one (base_url, key) -- in any Ray actor, task or driver, and across the jobs of a
Hydra multirun that join one Ray instance -- reaches the same detached, named actor
(``get_if_exists=True``), so N workers never sum to N x the limit -- on one machine or on every node
of a cluster: the actor lives on the head node and survives any worker node. The actor's name carries a
sha256 of (base_url, key), never the key. Without Ray, one ``RateLimiter`` per process and event
loop plays the same role -- and so it does in a process that is an endpoint's only caller
(:func:`limit_in_process`), where a shared actor would only cost a process.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import sys
import time
from dataclasses import asdict, replace
from typing import Any, Protocol

from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.limiter import RateLimiter, RateLimits

NAMESPACE = "shp_ray"
HEAD_NODE = "node:__internal_head__"  # the resource Ray gives the head node (its GCS dies with the cluster)


@functools.cache
def host_clock() -> str:
    """Which CLOCK_MONOTONIC this process reads: every process of one boot shares it (Linux)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return f"pid-{os.getpid()}"  # unknown: never equal to another process's


ROOM_NOW_S = 0.02  # "room now": pacing would let a request start within this (one event-loop hiccup)
_local: dict[str, list[tuple[asyncio.AbstractEventLoop, RateLimiter]]] = {}
_in_process = False  # limit_in_process() was called: this process is the only caller of its endpoints


def limit_in_process() -> None:
    """From now on this process keeps its limiters itself, Ray or not: for a process that is the only caller of
    the endpoints it calls (a run's one trajectory worker against a server started for that run)."""
    global _in_process
    _in_process = True


def limiter_id(base_url: str, api_key: str) -> str:
    """A stable id of (endpoint, key) that reveals neither beyond the hash."""
    blob = base_url.rstrip("/").lower() + "\x00" + api_key
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class LimiterHandle(Protocol):
    async def acquire(self, est_tokens: int = 0) -> tuple[int, float]: ...

    async def try_acquire_now(self, est_tokens: int = 0) -> tuple[int, float] | None:
        """(lease, delay <= ROOM_NOW_S) if the limiter has room now (a free slot, nobody queued,
        pacing lets it start at once), else None and nothing reserved."""
        ...

    def release(self, lease: int, **outcome: Any) -> None: ...

    def pause(self, seconds: float) -> None: ...

    async def snapshot(self) -> dict[str, Any]: ...


class LocalLimiter:
    """In-process handle: calls the RateLimiter directly."""

    kind = "local"

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    async def acquire(self, est_tokens: int = 0) -> tuple[int, float]:
        return await self.limiter.acquire(est_tokens)

    async def try_acquire_now(self, est_tokens: int = 0) -> tuple[int, float] | None:
        return self.limiter.try_acquire(est_tokens, max_delay_s=ROOM_NOW_S)

    def release(self, lease: int, **outcome: Any) -> None:
        self.limiter.release(lease, **outcome)

    def pause(self, seconds: float) -> None:
        self.limiter.pause(seconds)

    async def snapshot(self) -> dict[str, Any]:
        return self.limiter.snapshot()


class RayLimiter:
    """Handle on the named limiter actor.

    Calls are micro-batched per event-loop tick: every ``acquire`` issued in one tick travels in
    ONE actor call, and releases/pauses are sent fire-and-forget in batches, so a process with
    hundreds of calls in flight costs the actor a few round trips, not hundreds.
    """

    kind = "ray"

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._acquires: list[tuple[asyncio.Future[tuple[int, float]], int]] = []
        self._releases: list[tuple[int, dict[str, Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._same_clock = False  # does the actor read this process's monotonic clock (same host)?

    async def acquire(self, est_tokens: int = 0) -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[int, float]] = loop.create_future()
        if not self._acquires:
            loop.call_soon(self._flush_acquires)
        self._acquires.append((fut, est_tokens))
        return await fut

    def _flush_acquires(self) -> None:
        batch, self._acquires = self._acquires, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._send_acquires(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send_acquires(self, batch: list[tuple[asyncio.Future[tuple[int, float]], int]]) -> None:
        sent = time.monotonic()
        try:
            clock, grants = await self.actor.acquire_many.remote([est for _, est in batch])
        except BaseException as exc:
            for fut, _ in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        now = time.monotonic()
        lag = now - sent  # the round trip already waited part of each delay
        # On the actor's host the reserved start is an absolute time on our own clock: wait until
        # exactly then. (Guessing half the round trip sent requests early after a slow reply, and
        # early is what a short server window refuses.) Elsewhere, fall back to that guess.
        same_clock = self._same_clock = clock == host_clock()
        for (fut, _), (lease, delay, start) in zip(batch, grants, strict=False):
            if fut.done():  # the caller was cancelled meanwhile: give the slot back
                self.release(lease, outcome="cancelled")
            else:
                fut.set_result((lease, max(0.0, start - now if same_clock else delay - lag / 2)))
        rest = [(fut, est) for fut, est in batch[len(grants) :] if not fut.done()]
        if rest:  # not granted yet: back to the front of the queue, asked for in the next batch
            if not self._acquires:
                asyncio.get_running_loop().call_soon(self._flush_acquires)
            self._acquires[:0] = rest

    async def try_acquire_now(self, est_tokens: int = 0) -> tuple[int, float] | None:
        # rare (a hedge): one plain actor call, not worth batching
        return await self.actor.try_acquire_now.remote(est_tokens)

    def release(self, lease: int, **outcome: Any) -> None:
        heard = outcome.get("heard")
        if heard is not None and not self._same_clock:  # a send time on another host's clock means nothing
            outcome["heard"] = replace(heard, sent_at=None)
        if not self._releases:
            asyncio.get_running_loop().call_soon(self._flush_releases)
        self._releases.append((lease, outcome))

    def _flush_releases(self) -> None:
        batch, self._releases = self._releases, []
        if batch:
            self.actor.release_many.remote(batch)

    def pause(self, seconds: float) -> None:
        self.actor.pause.remote(seconds)

    async def snapshot(self) -> dict[str, Any]:
        return await self.actor.snapshot.remote()


@functools.cache
def _actor_class() -> Any:
    import ray

    @ray.remote(num_cpus=0, max_concurrency=10_000)  # type: ignore[call-overload]  # an actor option: not in ray's overloads
    class LimiterActor:
        """Thin async actor over RateLimiter (the logic is tested without Ray)."""

        def __init__(self, limits: dict[str, Any]) -> None:
            self.limiter = RateLimiter(RateLimits(**limits))

        async def acquire(self, est_tokens: int = 0) -> tuple[int, float]:
            return await self.limiter.acquire(est_tokens)

        async def acquire_many(self, est_tokens: list[int]) -> tuple[str, list[tuple[int, float, float]]]:
            """Wait for the first slot, then grant what is free NOW (never hold slots hostage).

            Each grant: (lease, delay, start as time.monotonic() here), with this host's clock id.
            """
            grants = [await self.limiter.acquire(est_tokens[0])]
            for est in est_tokens[1:]:
                grant = self.limiter.try_acquire(est)
                if grant is None:
                    break
                grants.append(grant)
            now = time.monotonic()
            return host_clock(), [(lease, delay, now + delay) for lease, delay in grants]

        async def try_acquire_now(self, est_tokens: int = 0) -> tuple[int, float] | None:
            return self.limiter.try_acquire(est_tokens, max_delay_s=ROOM_NOW_S)

        async def release(self, lease: int, **outcome: Any) -> None:
            self.limiter.release(lease, **outcome)

        async def release_many(self, batch: list[tuple[int, dict[str, Any]]]) -> None:
            for lease, outcome in batch:
                self.limiter.release(lease, **outcome)

        async def pause(self, seconds: float) -> None:
            self.limiter.pause(seconds)

        async def configure(self, limits: dict[str, Any]) -> None:
            self.limiter.configure(RateLimits(**limits))

        async def snapshot(self) -> dict[str, Any]:
            return self.limiter.snapshot()

    return LimiterActor


def ray_running() -> bool:
    """True when this process is connected to Ray (importing ray just to ask would cost seconds)."""
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


LIMITER_PREFIX = "shp-limiter-"  # every endpoint's limiter actor is named this, then the endpoint's id


def _actor_name(base_url: str, api_key: str) -> str:
    return f"{LIMITER_PREFIX}{limiter_id(base_url, api_key)}"


def forget_limiter(spec: ProviderSpec) -> bool:
    """Remove the named limiter actor of an endpoint that is going away; True if there was one.

    The actor is detached so that the jobs of a multirun share it; a server started for one run
    (the embedded llama.cpp server, the simulator) has a fresh port each time, so without this
    every such run would leave one more actor on a long-lived cluster.
    """
    if not ray_running():
        return False
    import ray

    api_key = os.environ.get(spec.api_key_env, "") if spec.api_key_env else ""
    try:
        actor = ray.get_actor(_actor_name(spec.base_url, api_key), namespace=NAMESPACE)
    except ValueError:
        return False
    ray.kill(actor)
    return True


def get_limiter(base_url: str, api_key: str, limits: RateLimits, *, use_ray: bool | None = None) -> LimiterHandle:
    """The shared limiter of (base_url, api_key); the latest caller's limits apply to all of them."""
    lid = limiter_id(base_url, api_key)
    if not _in_process and (use_ray if use_ray is not None else ray_running()):
        actor = (
            _actor_class()
            .options(
                name=_actor_name(base_url, api_key),
                namespace=NAMESPACE,
                get_if_exists=True,
                lifetime="detached",
                # On the head node, whoever asks first: a limiter started by a worker of another node
                # would die with that node, and every caller of the endpoint with it.
                resources={HEAD_NODE: 0.001},
            )
            .remote(asdict(limits))
        )
        actor.configure.remote(asdict(limits))  # an existing actor takes the latest spec's limits
        return RayLimiter(actor)
    # asyncio futures belong to one loop: one limiter per (endpoint, live loop) in this process
    loop = asyncio.get_running_loop()
    entries = [(lp, lim) for lp, lim in _local.get(lid, []) if not lp.is_closed()]
    for lp, lim in entries:
        if lp is loop:
            _local[lid] = entries
            lim.configure(limits)
            return LocalLimiter(lim)
    limiter = RateLimiter(limits)
    _local[lid] = [*entries, (loop, limiter)]
    return LocalLimiter(limiter)
