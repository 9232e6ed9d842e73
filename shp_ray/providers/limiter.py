"""One rate limiter per (endpoint, key): window lanes or smooth pacing, server pauses, AIMD concurrency.

Why not a token bucket library: a request's token cost is only an ESTIMATE (prompt + max_tokens)
until the reply's ``usage`` settles it, and many processes share one limiter through a Ray actor
that must never block on a sleeping caller. So ``acquire`` RESERVES a start time and returns how
long the caller should sleep, and ``release`` reports what came of it.

Requests: a told limit with its window (``rpm`` and ``window_s``: "40 requests per 5 s") is paced by
the window's lanes (:mod:`quota`): the allowance a window grants at its start goes out at once, and
an attempt that never reached the quota (``outcome="unreached"``: a refused connection, a 5xx the
server does not count) gives its lane back, so its retry does not wait for a window. A told rpm
without a window is paced smoothly at ``headroom * rpm`` (one lane of width 60/rpm). A reply's
rate-limit headers (``said``) re-synchronise the lanes and, when no limit was told, create them:
the client bursts to what the server says it allows. Tokens (``tpm``) are paced GCRA-style: the
estimate is reserved and settled with the reply's ``usage``; a reply that says how many tokens are
left holds back a request that would not fit until the server's reset.

When the limits are unknown and no header tells them, the limiter adapts a concurrency window
AIMD-style (TCP's rule): grow by one per success (doubling per round trip until the first 429, then
~+1 per round trip), halve on a 429, hold while latency is far above the best seen. The first burst
of 429s with hints teaches the window (what the server admitted before, requests in flight included,
until the hinted time): from then on its lanes pace as if told. Without hints it paces at a request
rate learned from the 429s. Server hints (Retry-After) pause every caller of the endpoint until the
hinted time, unless the lanes already account for the refusal.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import math
import time
from dataclasses import asdict
from typing import Any

from shp_ray.providers.learned_rate import LearnedRate
from shp_ray.providers.quota import Allowance, Heard, Lanes, RateLimits, Refunds, WidthProbe, lane_margin
from shp_ray.providers.retry_policy import MAX_HINT_S

GRANT_AHEAD_S = 0.05  # a start is granted at most this far ahead (a caller's sleep, not a reservation)
_LEARN_HINT_S = 0.2  # a 429's hint at least this long tells a window's end (shorter: a smooth limit)
_LEARN_BURST_S = 1.0  # the window is learned from a 429 this soon after the first: the first window's refusals
_ARRIVAL_ORDER_S = 0.05  # requests sent this close together may reach the server in either order


class RateLimiter:
    """The limiter state of one endpoint. Async-safe within one event loop; shared via Ray."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self._ids = itertools.count(1)
        self._leases: dict[int, tuple[float, float, int]] = {}  # id -> (start time, expiry, est tokens)
        self._turn = asyncio.Lock()  # callers wait in turn (FIFO); the one holding it waits for room
        self._changed = asyncio.Event()  # set when a slot or a lane frees: the caller in turn looks again
        self._queued = 0  # callers waiting for their turn or for room
        self._lanes = limits.lanes()
        self._refunds = Refunds()  # when lanes were given back; distrusted once a 429 followed one
        self._tat_tok = 0.0
        self._tokens_said: tuple[float, float, float] | None = None  # (remaining, whole again at, as of)
        self._pause_until = 0.0
        self._cwnd = float(min(limits.initial_concurrency, limits.max_concurrency))
        self._slow_start = True
        self._last_decrease = 0.0
        self._rate_scale = 1.0  # a told limit that still draws 429s is paced lower, then recovers
        # unknown limits: a request rate learned from 429s (the admitted rate when they came)
        self._rate = LearnedRate()
        self._sent: collections.deque[float] = collections.deque()  # when the admitted requests left
        self._window_from_429 = False  # lanes learned from a 429's hint (no limit told, no headers)
        self._probe: WidthProbe | None = None  # narrows a learned width that whole-second hints left loose
        self._window_origin: float | None = None  # when the first request of the learned window left
        self._learned_at = -math.inf  # when the window was learned
        self._first_refusal: float | None = None  # when the first 429 came
        self._best_latency = math.inf
        self.counters: collections.Counter[str] = collections.Counter()

    def configure(self, limits: RateLimits) -> None:
        """New limits for the same endpoint (the latest client's spec wins); pacing state is kept."""
        if limits != self.limits:
            self.limits = limits
            self._lanes = limits.lanes() or self._lanes
            self._cwnd = min(self._cwnd, float(limits.max_concurrency))
            self.counters["reconfigured"] += 1
            self._wake()

    # -- concurrency -------------------------------------------------------------------------
    def _paced(self) -> bool:
        """Pacing knows the limit (told, or stated by the server's headers): no AIMD window."""
        return self.limits.told or self._lanes is not None

    def _window(self) -> int:
        if self._paced():
            return self.limits.max_concurrency
        return max(1, min(self.limits.max_concurrency, int(self._cwnd)))

    def _reclaim(self, now: float) -> None:
        dead = [i for i, (_, expiry, _) in self._leases.items() if expiry < now]
        for i in dead:
            del self._leases[i]
            self.counters["leases_reclaimed"] += 1
        if dead:
            self._wake()

    def _wake(self) -> None:
        self._changed.set()

    def _start_at(self, est_tokens: int, now: float) -> float:
        """When pacing would let a request of ``est_tokens`` start (nothing reserved)."""
        start = max(now, self._pause_until)
        if self._lanes is not None:
            start = max(start, self._lanes.next_free() - self._early())
        if self.limits.tpm is not None:
            start = max(start, self._tat_tok)
        start = max(start, self._tokens_wait(est_tokens, now))
        if not self._paced() and self._rate.rps is not None:
            start = max(start, self._rate.tat)
        return start

    async def acquire(self, est_tokens: int = 0) -> tuple[int, float]:
        """Take a slot and reserve a start time. Returns (lease id, seconds to sleep before sending).

        A start is granted at most ``GRANT_AHEAD_S`` ahead: until then the caller waits here, in turn,
        so a lane handed back (an attempt that never reached the quota) goes to the next caller at
        once instead of sitting behind reservations made for a later window.
        """
        self._queued += 1
        try:
            async with self._turn:
                while True:
                    now = time.monotonic()
                    self._reclaim(now)
                    wait = None  # no slot: until one frees
                    if len(self._leases) < self._window():
                        wait = self._start_at(est_tokens, now) - now
                        if wait <= GRANT_AHEAD_S:
                            grant = self._reserve(est_tokens)
                            assert grant is not None  # no max_delay_s: always reserves
                            return grant
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), None if wait is None else wait)
        finally:
            self._queued -= 1

    def try_acquire(self, est_tokens: int = 0, max_delay_s: float | None = None) -> tuple[int, float] | None:
        """``acquire`` if a slot is free right now (nobody waiting ahead), else None.

        Also None unless pacing lets it start within ``max_delay_s`` (default ``GRANT_AHEAD_S``): a
        hedge takes only capacity nobody else is queued for, never a later slot.
        """
        self._reclaim(time.monotonic())
        if len(self._leases) >= self._window() or self._queued:
            return None
        return self._reserve(est_tokens, GRANT_AHEAD_S if max_delay_s is None else max_delay_s)

    def _reserve(self, est_tokens: int, max_delay_s: float | None = None) -> tuple[int, float] | None:
        now = time.monotonic()
        start = self._start_at(est_tokens, now)
        if max_delay_s is not None and start - now > max_delay_s:
            return None  # nothing reserved
        lim = self.limits
        if lim.tpm is not None:
            self._tat_tok = start + max(0, est_tokens) * 60.0 / (lim.tpm * lim.headroom * self._rate_scale)
        if not self._paced():
            self._rate.reserve(start, now)
        lease = next(self._ids)
        if self._lanes is not None:
            self.counters["margin_eased"] += self._lanes.ease(now)
            self.counters["lanes_regrown"] += self._window_from_429 and self._lanes.regrow(now)
            early, free, after = self._early(), self._lanes.next_free(), self._lanes.first_started()
            self._lanes.reserve(lease, start, self._rate_scale, early)
            if early > 0 and start < free and self._probe is not None:
                self._probe.sent(lease, after)
        self._leases[lease] = (start, start + lim.lease_ttl_s, max(0, est_tokens))
        self.counters["acquired"] += 1
        return lease, start - now

    def _tokens_wait(self, est_tokens: int, now: float) -> float:
        """When a reply said how many tokens are left: the reset, if this request would not fit before it."""
        if self._tokens_said is None:
            return now
        remaining, whole_at, seen = self._tokens_said
        if whole_at <= now:
            self._tokens_said = None
            return now
        ahead = sum(est for start, _, est in self._leases.values() if start > seen)
        return whole_at if ahead + est_tokens > remaining else now

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
        heard: Heard | None = None,
    ) -> None:
        """Return the slot. outcome: "ok" | "rate_limited" | "error" | "unreached" (an error that never
        reached the quota) | "cancelled". ``heard``: when the request left, what its reply stated."""
        started, _, _ = self._leases.pop(lease, (time.monotonic(), 0.0, 0))
        now = time.monotonic()
        self.counters[outcome] += 1
        lim = self.limits
        if lim.tpm is not None and actual_tokens is not None:  # settle the estimate
            self._tat_tok = max(
                now - 1.0, self._tat_tok + (actual_tokens - est_tokens) * 60.0 / (lim.tpm * lim.headroom)
            )
        if heard is not None and heard.sent_at is not None and self._lanes is not None:
            self._lanes.anchor(lease, heard.sent_at)
        if heard is not None and heard.said:
            left = heard.sent_at if heard.sent_at is not None else started
            self._heed(heard.said, (lease, left - _ARRIVAL_ORDER_S), now)
        elif outcome == "unreached":
            self._give_back(lease, now)
        sent_at = heard.sent_at if heard is not None else None
        if outcome in ("ok", "error") or (outcome == "unreached" and sent_at is not None):
            # it reached the server and was not refused. A 5xx or a dropped connection after the request left
            # may be counted or not: a window learned from a 429 counts it (a lane too many is taken away by
            # the 429s it draws; a lane too few never comes back)
            self._sent.append(sent_at if sent_at is not None else started)
            while self._sent and self._sent[0] < now - MAX_HINT_S:
                self._sent.popleft()
        self._rate.observe(now, admitted=outcome in ("ok", "error"))
        # a refusal the lanes now account for (the window it taught, a lane given back that the server
        # counted after all) holds no one past them: a hint rounded up to whole seconds would idle them all
        step = heard.hint_step_s if heard is not None else 0.0
        explained = self._probed(lease, outcome, (sent_at or started, now), wait_hint_s, step)
        explained = explained or (outcome == "rate_limited" and self._refused(lease, started, now, wait_hint_s, step))
        # a 429 on a window's lanes: its hint's rounding up (a Retry-After is whole seconds) is the lanes' to
        # pace, held longer by the raised margin; only what surely must be waited pauses everyone
        paced = outcome == "rate_limited" and self._lanes is not None and self._lanes.capacity > 1
        surely = None if wait_hint_s is None else wait_hint_s - (step if paced else 0.0)
        if surely is not None and surely > 0 and not explained:
            self._pause(now, surely)
        if outcome == "ok" and latency_s is not None:
            self._rate_scale = min(1.0, self._rate_scale + 0.01)
            self._best_latency = min(self._best_latency, latency_s)
            congested = latency_s > 3.0 * self._best_latency and latency_s > 0.05
            if not congested:
                self._cwnd += 1.0 if self._slow_start else 1.0 / max(1.0, self._cwnd)
                self._cwnd = min(self._cwnd, float(lim.max_concurrency))
        self._wake()

    def _give_back(self, lease: int, now: float) -> None:
        """An attempt that never reached the quota: its lane is free again (a refused one keeps it)."""
        if self._lanes is not None and self._refunds.trusted and self._lanes.give_back(lease):
            self._refunds.at.append(now)
            self.counters["lanes_given_back"] += 1

    def _distrust_refunds(self, now: float) -> bool:
        """A 429 soon after a lane was given back: the server counts what failed. True if this told us so."""
        no = self._refunds.distrust(now, self._lanes.width_s if self._lanes is not None else 0.0)
        self.counters["refunds_distrusted"] += no
        return no

    def _early(self) -> float:
        return self._probe.early_s(self._lanes) if self._probe is not None and self._lanes is not None else 0.0

    def _probed(self, lease: int, outcome: str, times: tuple[float, float], hint: float | None, step: float) -> bool:
        """The outcome of a probe of the learned width (``times``: when it left, now); True if it was refused."""
        if self._probe is None or self._lanes is None or self._probe.lease != lease:
            return False
        moved, refused = self._probe.outcome(self._lanes, outcome, times, hint, step)
        self.counters["window_probed"] += moved
        if refused:  # refused early -- or a lane given back the server counted (else the next 429 takes a lane)
            self._distrust_refunds(times[1])
        return refused

    def _refused(self, lease: int, started: float, now: float, hint: float | None, step: float) -> bool:
        """A 429: a limit lower than paced for, or lanes given back that were counted. True if the lanes explain it."""
        if self._first_refusal is None:
            self._first_refusal = now
        learnable = not self.limits.told and hint is not None and hint >= _LEARN_HINT_S
        if learnable and self._lanes is None and self._learn_window(now, hint, step):  # type: ignore[arg-type]  # learnable: hint set
            return True
        if self._window_origin is not None and started < self._learned_at:  # the burst that taught the window
            self._narrow_window(lease, now, hint if learnable else None, step)
            return True
        if self._distrust_refunds(now):  # the server counts what failed: keep every lane
            return True
        if not self._paced() and self._rate.refused(started, now):
            self.counters["rate_cuts"] += 1
        lanes = self._lanes
        if lanes is not None and lanes.capacity > 1 and started >= self._last_decrease:
            raised_before = lanes.raised_at
            lanes.raise_margin(now)
            if self._window_from_429 and now - raised_before < 2.0 * lanes.width_s:
                # a guessed window that still draws 429s a window after the margin was raised: a smaller one
                # (one refusal alone is more often a late arrival than a lane too many)
                lanes.shrink(max(1, lanes.capacity // 20), now)
            self._last_decrease = now
            self.counters["margin_raised"] += 1
        elif started >= self._last_decrease:
            self._cwnd = max(1.0, self._cwnd / 2.0)  # multiplicative decrease, once per round trip
            self._rate_scale = max(0.3, self._rate_scale * 0.85)  # a told limit that is too high
            self._slow_start = False
            self._last_decrease = now
            self.counters["decreases"] += 1
        return False

    def _learn_window(self, now: float, hint: float, step: float) -> bool:
        """A 429 with a hint, no limit told and no headers, in the run's first burst of refusals: the window
        is what the server admitted -- the requests answered and every one in flight (a refusal comes back at
        once, a reply after its latency; some that left after the refused one arrived before it) -- until the
        hinted time: a sliding window that fills up while the client ramps up refuses exactly then. Lanes of
        that window, holding those requests; each later refusal takes one away (:meth:`_narrow_window`)."""
        if self._first_refusal is None or now - self._first_refusal > _LEARN_BURST_S:
            return False
        if len(self._sent) + len(self._leases) < 2:
            return False
        origin = min([*self._sent, *(start for start, _, _ in self._leases.values())])
        self._window_origin, self._learned_at = origin, now
        self._rebuild_lanes(len(self._sent) + len(self._leases), now + hint - origin, self._sent)
        self._probe = WidthProbe(now + hint - step - origin)
        self._window_from_429 = True
        self._last_decrease = now  # the 429s of requests already sent say nothing about these lanes
        self.counters["window_learned"] += 1
        return True

    def _narrow_window(self, lease: int, now: float, hint: float | None, step: float) -> None:
        """Another refusal of the burst that taught the window. If its request was counted in the window
        (it left before the one that taught it, yet the server refused it: arrivals cross), the window is a
        lane smaller. Its hint may be more precise (a ``retry-after-ms`` against a whole-second
        ``Retry-After``), and a hint only ever rounds up: the window is the shortest any of them implies.
        Busy lanes free that much sooner."""
        lanes = self._lanes
        if lanes is None or self._window_origin is None:
            return
        if lanes.give_back(lease):
            lanes.resize(lanes.capacity - 1)
            self.counters["window_shrunk"] += 1
        if hint is None:
            return
        width = now + hint - self._window_origin
        if self._probe is not None:
            self._probe.floor = max(self._probe.floor, min(width, lanes.width_s) - step)
        if 0.5 * lanes.width_s <= width < lanes.width_s:
            lanes.hold(now, width - lanes.width_s)
            lanes.width_s = width
            self.counters["window_narrowed"] += 1
            self._wake()

    def _heed(self, said: dict[str, Allowance], seen: tuple[int, float], now: float) -> None:
        """A reply stated the quota: the lanes (created if no limit was told) and the tokens follow it."""
        requests, tokens = said.get("requests"), said.get("tokens")
        if requests is not None:
            capacity = int(requests.limit) if requests.limit else int(requests.remaining) + 1
            if not requests.limit and self._lanes is not None:  # no size stated: the most ever seen free
                capacity = max(capacity, self._lanes.capacity)
            width = max(requests.reset_s, self._lanes.width_s if self._lanes is not None else 0.0)
            if self._lanes is None or (self.limits.window_s is None and capacity != self._lanes.capacity):
                self._rebuild_lanes(capacity, width)  # the server's window, not a told one
            elif self.limits.window_s is None and width > self._lanes.width_s:
                self._lanes.width_s, self._lanes.margin_s = width, max(self._lanes.margin_s, lane_margin(width))
            self._lanes.sync(requests, *seen, now)  # type: ignore[union-attr]  # set: just rebuilt if it was None
            self.counters["synced"] += 1
        if tokens is not None and self.limits.tpm is None:  # a told tpm is paced already (GCRA)
            self._tokens_said = (tokens.remaining, now + tokens.reset_s, seen[1])

    def _rebuild_lanes(
        self, capacity: int, width: float, sent: collections.deque[float] | None = None, leases: list[int] | None = None
    ) -> None:
        """Lanes of the server's window, holding the requests ``sent`` before and the leases already granted
        (their starts stand): ``leases``, or every one (the others were refused: they hold no lane)."""
        margin = max(lane_margin(width), self._lanes.margin_s if self._lanes is not None else 0.0)
        self._lanes = Lanes(capacity, width, margin)
        for start in sent or ():
            self._lanes.reserve(0, start)
        for lease in sorted(self._leases if leases is None else leases):
            self._lanes.reserve(lease, self._leases[lease][0], self._rate_scale)
        self.counters["lanes_rebuilt"] += 1
        self._wake()

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
            "waiting": self._queued,
            "concurrency_window": self._window(),
            "rate_scale": round(self._rate_scale, 3),
            "refunds_trusted": self._refunds.trusted,
            **(self._lanes.snapshot(time.monotonic()) if self._lanes is not None else {}),
            "learned_rps": None if self._rate.rps is None else round(self._rate.rps, 3),
            "paused_for_s": max(0.0, self._pause_until - time.monotonic()),
            **dict(self.counters),
        }
