"""One attempt, raced against a hedge once it has run past its deadline and the limiter has room.

Why a hedge and not only "cancel and retry": a request the server holds for seconds and then fails
hurts a run only where nothing else can use the capacity it waits on -- at the tail, when the
limiter has no queue. There a second attempt costs quota nobody is waiting for and ends the wait.
Earlier, every slot is wanted by a queued request, so the hedge waits for room instead of taking a
slot from someone else (``try_acquire_now``: a free slot, nobody queued, pacing lets it start now).
The original keeps running -- it may still answer first, and its latency is then observed, so a
legitimately slow class of reply raises the deadline instead of being cut again and again.

Past ``abandon_s`` everything still running is cancelled and the caller retries through the
limiter's queue like any failed attempt: a hang never holds a call longer than that, even when the
limiter never has room.

Leases: the caller hands in the lease of its first attempt; :func:`race` releases every lease but
the one behind the result it returns (``RaceResult.lease``), which the caller releases by outcome.
If the race is cancelled, it releases all of them (the caller's too).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from shp_ray.providers.shared_limiter import LimiterHandle

POLL_S = 0.1  # how often an attempt past its deadline asks the limiter for room


class HedgeGate(Protocol):
    """Who may hedge (the adaptive deadline's overdue count and budget)."""

    def enter_overdue(self) -> None: ...

    def leave_overdue(self) -> None: ...

    def may_hedge(self) -> bool: ...

    def spend(self, n: int) -> None: ...


class AttemptLike(Protocol):
    kind: str  # "ok" = a usable reply
    status: int | None


A = TypeVar("A", bound=AttemptLike)


@dataclass
class RaceResult(Generic[A]):
    result: A | None  # None: abandoned (everything still running was cancelled at abandon_s)
    lease: int  # the lease behind ``result`` (or the caller's, if abandoned): the caller releases it
    sent: float  # when ``result``'s attempt was sent (time.monotonic)
    hedges: int  # hedges sent


async def _after(delay: float, send: Callable[[], Awaitable[A]]) -> A:
    if delay > 0:  # at most ROOM_NOW_S: the pacing's own start time, kept to the letter
        await asyncio.sleep(delay)
    return await send()


def _outcome(result: AttemptLike) -> str:
    return "rate_limited" if result.status == 429 else "error"


async def race(
    send: Callable[[], Awaitable[A]],
    limiter: LimiterHandle,
    lease: int,
    est_tokens: int,
    deadline_s: float,
    gate: HedgeGate,
    abandon_s: float = math.inf,
    max_hedges: int = 2,
) -> RaceResult[A]:
    """Send once; past ``deadline_s`` add a hedge when the limiter has room; first usable reply wins.

    At most one hedge runs beside the original at a time (a second only after the first failed),
    and at most ``max_hedges`` in all.
    """
    t0 = time.monotonic()
    running: dict[asyncio.Future[A], tuple[int, float]] = {asyncio.ensure_future(send()): (lease, t0)}
    keep: int | None = None  # the lease handed back (not released here)
    hedges = 0
    overdue = False
    try:
        while True:
            age = time.monotonic() - t0
            if age >= deadline_s and not overdue:
                overdue = True
                gate.enter_overdue()
            if age >= abandon_s:
                keep = lease
                for _, (other, _) in running.items():
                    if other != lease:
                        limiter.release(other, outcome="cancelled")
                return RaceResult(None, lease, t0, hedges)
            room_wanted = age >= deadline_s and hedges < max_hedges and len(running) == 1
            if room_wanted and gate.may_hedge():
                grant = await limiter.try_acquire_now(est_tokens)
                if grant is not None:
                    hedges += 1
                    gate.spend(1)
                    running[asyncio.ensure_future(_after(grant[1], send))] = (grant[0], time.monotonic() + grant[1])
                    room_wanted = False
            # wake at the deadline, then every POLL_S while a hedge waits for room, and at abandon_s
            wake = deadline_s - age if age < deadline_s else (POLL_S if room_wanted else math.inf)
            timeout = min(wake, abandon_s - age)
            done, _ = await asyncio.wait(
                set(running), timeout=None if math.isinf(timeout) else timeout, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                own, sent = running.pop(task)
                if (bug := task.exception()) is not None:  # a bug, not a reply: release its lease, then raise
                    limiter.release(own, outcome="error")
                    raise bug
                result = task.result()
                if result.kind == "ok" or not running:  # the answer, or the last attempt standing
                    keep = own
                    for _, (other, _) in running.items():
                        limiter.release(other, outcome="cancelled")
                    return RaceResult(result, own, sent, hedges)
                limiter.release(own, outcome=_outcome(result))  # another attempt still runs
                if own == lease:
                    lease = next(iter(running.values()))[0]  # the survivor becomes the attempt abandoned
    finally:
        if overdue:
            gate.leave_overdue()
        for task, (own, _) in running.items():
            task.cancel()
            if keep is None:  # the race itself was cancelled: nothing is handed back
                limiter.release(own, outcome="cancelled")
