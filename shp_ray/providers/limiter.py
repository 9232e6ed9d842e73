"""One rate limiter per (endpoint, key): smooth RPM/TPM pacing, server pauses, AIMD concurrency.

Why not a token bucket library: a request's token cost is only an ESTIMATE (prompt + max_tokens)
until the reply's ``usage`` settles it, and many processes share one limiter through a Ray actor
that must never block on a sleeping caller. So this is GCRA-style virtual scheduling: ``acquire``
RESERVES the earliest start time that keeps requests and tokens under
``headroom * limit`` (smooth: one request every 60/rpm seconds, not a burst of a minute's quota),
returns how long the caller should sleep, and ``release`` refunds or charges the difference
between the estimate and the real usage.

When the limits are unknown the limiter adapts a concurrency window AIMD-style (TCP's rule):
grow by one per success (doubling per round trip until the first 429, then ~+1 per round trip),
halve on a 429, hold while latency is far above the best seen. Server hints (Retry-After,
exhausted x-ratelimit-remaining) pause every caller of the endpoint until the hinted time.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

_RATE_HORIZON_S = 5.0  # the admitted rate is measured over this many recent seconds
_RATE_DOUBLING_S = 10.0  # without a 429 the learned rate doubles this often


@dataclass(frozen=True)
class RateLimits:
    rpm: float | None = None  # requests per minute; None = unknown (adaptive concurrency)
    tpm: float | None = None  # tokens per minute; None = unknown
    max_concurrency: int = 16  # hard cap on calls in flight for the whole endpoint
    headroom: float = 0.98  # pace at this share of a told limit: arrival jitter must not cross it
    initial_concurrency: int = 4  # AIMD start when the limits are unknown
    lease_ttl_s: float = 300.0  # a lease not released by then (caller died) is reclaimed

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise ValueError(f"RateLimits.{name}={v!r}: must be a positive number or None")
        if self.max_concurrency < 1:
            raise ValueError(f"RateLimits.max_concurrency={self.max_concurrency}: must be >= 1")
        if not 0 < self.headroom <= 1:
            raise ValueError(f"RateLimits.headroom={self.headroom}: must be in (0, 1]")

    @property
    def told(self) -> bool:
        return self.rpm is not None or self.tpm is not None


class RateLimiter:
    """The limiter state of one endpoint. Async-safe within one event loop; shared via Ray."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self._ids = itertools.count(1)
        self._leases: dict[int, tuple[float, float]] = {}  # id -> (start time, expiry)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._tat_req = 0.0  # theoretical arrival time of the next request (GCRA)
        self._tat_tok = 0.0
        self._pause_until = 0.0
        self._cwnd = float(min(limits.initial_concurrency, limits.max_concurrency))
        self._slow_start = True
        self._last_decrease = 0.0
        self._rate_scale = 1.0  # a told limit that still draws 429s is paced lower, then recovers
        # unknown limits: a request rate learned from 429s (the admitted rate when they came)
        self._learned_rps: float | None = None
        self._tat_learned = 0.0
        self._last_rate_cut = -math.inf
        self._admitted: collections.deque[float] = collections.deque()
        self._first_admitted: float | None = None
        self._best_latency = math.inf
        self.counters: collections.Counter[str] = collections.Counter()

    def configure(self, limits: RateLimits) -> None:
        """New limits for the same endpoint (the latest client's spec wins); pacing state is kept."""
        if limits != self.limits:
            self.limits = limits
            self._cwnd = min(self._cwnd, float(limits.max_concurrency))
            self.counters["reconfigured"] += 1
            self._wake()

    # -- concurrency -------------------------------------------------------------------------
    def _window(self) -> int:
        if self.limits.told:
            return self.limits.max_concurrency
        return max(1, min(self.limits.max_concurrency, int(self._cwnd)))

    def _reclaim(self, now: float) -> None:
        dead = [i for i, (_, expiry) in self._leases.items() if expiry < now]
        for i in dead:
            del self._leases[i]
            self.counters["leases_reclaimed"] += 1
        if dead:
            self._wake()

    def _wake(self) -> None:
        free = self._window() - len(self._leases)
        while self._waiters and free > 0:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    async def acquire(self, est_tokens: int = 0) -> tuple[int, float]:
        """Take a slot and reserve a start time. Returns (lease id, seconds to sleep before sending)."""
        self._reclaim(time.monotonic())
        while len(self._leases) >= self._window() or self._waiters_ahead():
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except BaseException:
                if fut in self._waiters:
                    self._waiters.remove(fut)
                self._wake()
                raise
            if len(self._leases) < self._window():
                break
        grant = self._reserve(est_tokens)
        assert grant is not None  # no max_delay_s: always reserves
        return grant

    def try_acquire(self, est_tokens: int = 0, max_delay_s: float | None = None) -> tuple[int, float] | None:
        """``acquire`` if a slot is free right now (nobody waiting ahead), else None.

        With ``max_delay_s``, also None unless pacing would let it start within that many seconds:
        a hedge takes only capacity nobody else is queued for, never a later slot.
        """
        self._reclaim(time.monotonic())
        if len(self._leases) >= self._window() or self._waiters_ahead():
            return None
        return self._reserve(est_tokens, max_delay_s)

    def _reserve(self, est_tokens: int, max_delay_s: float | None = None) -> tuple[int, float] | None:
        now = time.monotonic()
        start = max(now, self._pause_until)
        lim = self.limits
        tat_req, tat_tok, tat_learned = self._tat_req, self._tat_tok, self._tat_learned
        if lim.rpm is not None:
            start = max(start, tat_req)
            tat_req = start + 60.0 / (lim.rpm * lim.headroom * self._rate_scale)
        if lim.tpm is not None:
            start = max(start, tat_tok)
            tat_tok = start + max(0, est_tokens) * 60.0 / (lim.tpm * lim.headroom * self._rate_scale)
        if not lim.told and self._learned_rps is not None:
            rate = self._learned_now(now)
            start = max(start, tat_learned)
            tat_learned = start + 1.0 / rate
        if max_delay_s is not None and start - now > max_delay_s:
            return None  # nothing reserved
        self._tat_req, self._tat_tok, self._tat_learned = tat_req, tat_tok, tat_learned
        lease = next(self._ids)
        self._leases[lease] = (start, start + lim.lease_ttl_s)
        self.counters["acquired"] += 1
        return lease, start - now

    def _waiters_ahead(self) -> bool:
        return any(not f.done() for f in self._waiters)

    # -- outcomes ----------------------------------------------------------------------------
    def release(
        self,
        lease: int,
        *,
        outcome: str,
        est_tokens: int = 0,
        actual_tokens: int | None = None,
        latency_s: float | None = None,
        wait_hint_s: float | None = None,
    ) -> None:
        """Return the slot. outcome: "ok" | "rate_limited" | "error" | "cancelled"."""
        started, _ = self._leases.pop(lease, (time.monotonic(), 0.0))
        now = time.monotonic()
        self.counters[outcome] += 1
        lim = self.limits
        if lim.tpm is not None and actual_tokens is not None:  # settle the estimate
            self._tat_tok = max(
                now - 1.0, self._tat_tok + (actual_tokens - est_tokens) * 60.0 / (lim.tpm * lim.headroom)
            )
        if wait_hint_s is not None and wait_hint_s > 0:
            self._pause(now, wait_hint_s)
        if outcome in ("ok", "error"):  # it reached the server and was not refused: admitted
            self._admitted.append(now)
            if self._first_admitted is None:
                self._first_admitted = now
        while self._admitted and self._admitted[0] < now - _RATE_HORIZON_S:
            self._admitted.popleft()
        if (
            outcome == "rate_limited"
            and not lim.told
            and now - self._last_rate_cut >= 1.0
            and started >= self._last_rate_cut  # evidence about the CURRENT rate, not a stale request
        ):
            self._cut_learned_rate(now)
        if outcome == "rate_limited" and started >= self._last_decrease:
            self._cwnd = max(1.0, self._cwnd / 2.0)  # multiplicative decrease, once per round trip
            self._rate_scale = max(0.3, self._rate_scale * 0.85)  # a told limit that is too high
            self._slow_start = False
            self._last_decrease = now
            self.counters["decreases"] += 1
        elif outcome == "ok" and latency_s is not None:
            self._rate_scale = min(1.0, self._rate_scale + 0.01)
            self._best_latency = min(self._best_latency, latency_s)
            congested = latency_s > 3.0 * self._best_latency and latency_s > 0.05
            if not congested:
                self._cwnd += 1.0 if self._slow_start else 1.0 / max(1.0, self._cwnd)
                self._cwnd = min(self._cwnd, float(lim.max_concurrency))
        self._wake()

    def _learned_now(self, now: float) -> float:
        """The learned rate probes upwards while no 429 comes: x2 every 10 s since the last cut."""
        assert self._learned_rps is not None
        return self._learned_rps * 2.0 ** (min(600.0, max(0.0, now - self._last_rate_cut)) / _RATE_DOUBLING_S)

    def _cut_learned_rate(self, now: float) -> None:
        """Multiplicative decrease to what the server actually admitted lately (at most once a second)."""
        if self._first_admitted is None:
            return
        span = min(_RATE_HORIZON_S, max(1.0, now - self._first_admitted))
        measured = max(len(self._admitted) / span, 0.1)
        if self._learned_rps is None:
            self._learned_rps = measured
        else:  # never below half of the current rate in one cut: a paused spell admits nothing
            current = self._learned_now(now)
            self._learned_rps = max(0.05, current * 0.5, min(current * 0.9, measured))
        self._last_rate_cut = now
        self.counters["rate_cuts"] += 1

    def pause(self, seconds: float) -> None:
        """A server hint (e.g. x-ratelimit-remaining = 0): nobody starts before now + seconds."""
        self._pause(time.monotonic(), seconds)

    def _pause(self, now: float, seconds: float) -> None:
        until = now + seconds
        if until > self._pause_until:
            self._pause_until = until
            self.counters["pauses"] += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "limits": asdict(self.limits),
            "in_flight": len(self._leases),
            "waiting": sum(not f.done() for f in self._waiters),
            "concurrency_window": self._window(),
            "rate_scale": round(self._rate_scale, 3),
            "learned_rps": None if self._learned_rps is None else round(self._learned_rps, 3),
            "paused_for_s": max(0.0, self._pause_until - time.monotonic()),
            **dict(self.counters),
        }
