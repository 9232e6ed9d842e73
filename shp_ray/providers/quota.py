"""A server's request window as the client sees it: lanes that a burst may fill, and what headers say.

Why lanes, not a smooth pacer: a server that enforces "C requests per W seconds" (a sliding log, or
fixed windows that reset at their boundary) admits C requests at once at the start of a window. A
pacer that spaces requests 60/rpm apart never uses that allowance, and every retry costs it a whole
slot. Here the window is C *lanes*: a request takes the lane that frees first and holds it for W
(plus a margin for arrival jitter). No interval of W then holds more than C sends -- under either
window kind -- and a window's allowance goes out at its start. Smooth pacing is the case C = 1.

A request that never reached the quota (a refused connection, a 5xx the server does not count)
hands its lane back (:meth:`Lanes.give_back`): its retry does not wait for a window.

Headers: a reply that says how much of the quota is left (OpenAI's ``x-ratelimit-remaining-requests``
with ``x-ratelimit-reset-requests`` as a duration such as "6m0s" or "20ms"; Anthropic's
``anthropic-ratelimit-requests-remaining`` with ``-reset`` as an RFC 3339 time) re-synchronises the
lanes (:meth:`Lanes.sync`): as many lanes are taken as the server counts as used, until it says the
quota is whole again, and the rest may go out at once -- a burst to what the server allows, no more.
Both providers define the reset as the time until the quota is *fully* replenished.

:class:`RateLimits` is what the client is told of the quota (rpm, tpm, the window), and the lanes a told
window gives.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shp_ray.providers.retry_policy import MAX_HINT_S, parse_duration

KINDS = ("requests", "tokens")
# A lane is held W + 20 ms + 0.2 % of W. Each lane is anchored at its request's measured send, so the margin only
# covers the spread of the delay from that send to the server's clock (localhost at load 8: p50 4-7 ms, p99
# 50-100 ms); a later arrival draws a 429 that raises the margin for a while (Lanes.raise_margin, Lanes.ease).
# At 1 % of W (70 ms at 5 s) a run of 6 windows lost 0.4 s for good: 0.963 of capacity told at 500 ms, 0.97 at 30 ms.
_LANE_MARGIN = (0.02, 0.002)


@dataclass(frozen=True)
class Allowance:
    """What one reply said about one quota (requests or tokens)."""

    remaining: float
    reset_s: float  # seconds from the reply until the quota is whole again
    limit: float | None = None  # the quota's size, when the server says it


@dataclass(frozen=True)
class Heard:
    """What one attempt tells the limiter besides its outcome."""

    sent_at: float | None = None  # time.monotonic() when its request left (None: it never did)
    said: dict[str, Allowance] = field(default_factory=dict)  # the quotas its reply stated
    hint_step_s: float = 0.0  # its Retry-After's resolution (1 s: a whole-second hint, rounded up; 0: none)


def _rfc3339_in(value: str, wall_now: float) -> float | None:
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp() - wall_now


def _number(value: str | None) -> float | None:
    try:
        x = float(value) if value is not None else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) and x >= 0 else None


def read_allowances(headers: Mapping[str, str], wall_now: float | None = None) -> dict[str, Allowance]:
    """The allowances a reply's headers state, by kind ("requests", "tokens"); {} when it states none."""
    lower = {k.lower(): v for k, v in headers.items()}
    wall = time.time() if wall_now is None else wall_now
    out: dict[str, Allowance] = {}
    for kind in KINDS:
        remaining = _number(lower.get(f"x-ratelimit-remaining-{kind}"))
        reset = lower.get(f"x-ratelimit-reset-{kind}")
        seconds = parse_duration(reset) if reset is not None else None
        limit = _number(lower.get(f"x-ratelimit-limit-{kind}"))
        if remaining is None or seconds is None:  # Anthropic's names, an absolute reset time
            remaining = _number(lower.get(f"anthropic-ratelimit-{kind}-remaining"))
            reset = lower.get(f"anthropic-ratelimit-{kind}-reset")
            seconds = _rfc3339_in(reset, wall) if reset is not None else None
            limit = _number(lower.get(f"anthropic-ratelimit-{kind}-limit"))
        if remaining is not None and seconds is not None:
            out[kind] = Allowance(remaining, min(MAX_HINT_S, max(0.0, seconds)), limit)
    return out


class Lanes:
    """C lanes of width W: the request quota of one server window, in the client's terms.

    ``reserve`` gives a lease the start time of the lane that frees first; ``give_back`` undoes a
    lease's reservation (it never reached the quota); ``sync`` aligns the lanes with what a reply
    said. Lease ids grow with time, so "sent after the reply's request" is "a larger lease id".
    """

    def __init__(self, capacity: int, width_s: float, margin_s: float) -> None:
        self.width_s, self.margin_s = width_s, margin_s
        self.raised_at = self.eased_at = -math.inf  # when a refusal last raised the margin, when it came down
        self.lost, self.shrunk_at = 0, -math.inf  # lanes taken away by refusals (they may come back), and when
        self.free_at: list[float] = []
        self.holder: list[int] = []  # lease holding the lane (0: nobody, or a use the server reported)
        self.before: list[float] = []  # the lane's free_at before its holder took it
        self.started: list[float] = []  # when the lane's holder left (known once it was answered)
        self.started_before: list[float] = []  # the lane's ``started`` before its holder took it
        self.answered: list[bool] = []  # the holder's reply came: the server has counted it
        self.resize(capacity)

    @property
    def capacity(self) -> int:
        return len(self.free_at)

    def resize(self, capacity: int, width_s: float | None = None) -> None:
        capacity = max(1, int(capacity))
        if width_s is not None:
            self.width_s = width_s
        while len(self.free_at) < capacity:
            self.free_at.append(0.0)
            self.holder.append(0)
            self.before.append(0.0)
            self.started.append(0.0)
            self.started_before.append(0.0)
            self.answered.append(False)
        while len(self.free_at) > capacity:  # drop the lanes that free first: the model stays cautious
            i = self.free_at.index(min(self.free_at))
            for lst in (self.free_at, self.holder, self.before, self.started, self.started_before, self.answered):
                del lst[i]

    def next_free(self) -> float:
        return min(self.free_at)

    def reserve(self, lease: int, not_before: float, scale: float = 1.0, early_s: float = 0.0) -> float:
        """The start time of ``lease``: when the first lane frees (``early_s`` sooner: a probe of the width), or
        ``not_before``; the lane is held W."""
        i = self.free_at.index(min(self.free_at))
        start = max(not_before, self.free_at[i] - early_s)
        self.started_before[i] = self.started[i]
        self.before[i], self.holder[i], self.started[i], self.answered[i] = self.free_at[i], lease, start, False
        self.free_at[i] = start + (self.width_s + self.margin_s) / scale
        return start

    def anchor(self, lease: int, sent_at: float) -> None:
        """``lease`` was answered, and had left at ``sent_at`` (later than reserved when a connection had to
        be opened or the event loop was busy): its lane is held W from then -- the server's window counts
        from the arrival, not from the reservation."""
        for i, who in enumerate(self.holder):
            if who == lease:
                self.free_at[i] = max(self.free_at[i], sent_at + self.width_s + self.margin_s)
                self.started[i], self.answered[i] = sent_at, True

    def hold(self, now: float, extra_s: float) -> None:
        """Every lane busy now is held ``extra_s`` longer (the margin grew)."""
        self.free_at = [t + extra_s if t > now else t for t in self.free_at]

    def raise_margin(self, now: float) -> None:
        """Refused at a window's start: the server saw the last window's requests later than they were sent (a
        queue before its clock). Each lane is held longer, up to 10 % of W."""
        raised = min(0.1 * self.width_s, 1.5 * self.margin_s + 0.05)
        self.hold(now, raised - self.margin_s)
        self.margin_s, self.raised_at = raised, now

    def ease(self, now: float) -> bool:
        """A window without a refusal since the margin was raised (or last came down): half its excess goes
        (True if it moved). Arrivals a load spike delayed once must not slow every window after it (each raise
        held W + 85 ms or more for the rest of the run)."""
        base = lane_margin(self.width_s)
        if self.margin_s <= base or now - max(self.raised_at, self.eased_at) < self.width_s:
            return False
        self.eased_at = now
        excess = (self.margin_s - base) / 2.0
        self.margin_s = base + (excess if excess >= 0.005 else 0.0)
        return True

    def shrink(self, n: int, now: float) -> None:
        """Refusals say the window holds ``n`` lanes fewer (a guess: :meth:`regrow` may give them back)."""
        before = self.capacity
        self.resize(before - n)
        self.lost, self.shrunk_at = self.lost + before - self.capacity, now

    def regrow(self, now: float) -> bool:
        """Two windows without a refusal since a lane was taken away: one comes back (True if it did). Under
        load a late arrival or a lane given back that the server counted draws the 429s that take a lane (0.90
        of capacity with 37 of 40 lanes, not told at 500 ms); a lane too many only costs a 429 every few windows."""
        if self.lost <= 0 or now - max(self.raised_at, self.shrunk_at) < 2.0 * self.width_s:
            return False
        self.resize(self.capacity + 1)
        self.lost, self.shrunk_at = self.lost - 1, now
        return True

    def give_back(self, lease: int) -> bool:
        """``lease`` never reached the quota: its lane is as it was before (False if it holds none)."""
        for i, who in enumerate(self.holder):
            if who == lease:
                self.free_at[i], self.holder[i], self.started[i] = self.before[i], 0, self.started_before[i]
                return True
        return False

    def sync(self, said: Allowance, lease: int, seen_before: float, now: float) -> None:
        """A reply to ``lease`` said ``said``: the server counts ``capacity - remaining`` as used, until
        ``now + reset_s`` at the latest.

        The server has surely counted the lanes whose requests were answered and left before
        ``seen_before`` (when the replied request left, less a little: requests sent together may
        arrive in either order); the other lanes stay as they are, since it may not count them yet.
        """
        used = max(0, min(self.capacity, self.capacity - int(said.remaining)))
        until = now + said.reset_s + self.margin_s
        known = [
            i
            for i, t in enumerate(self.free_at)
            if t > now and (self.holder[i] in (0, lease) or (self.answered[i] and self.started[i] <= seen_before))
        ]
        known.sort(key=lambda i: self.free_at[i])
        for i in known[: max(0, len(known) - used)]:  # the server has freed these: free now
            self.free_at[i] = self.before[i] = now
            self.holder[i] = 0
        idle = [i for i, t in enumerate(self.free_at) if t <= now]
        for i in idle[: max(0, used - (self.capacity - len(idle)))]:  # more used than we hold: someone else
            self.free_at[i] = self.before[i] = until
            self.holder[i] = 0

    def first_started(self) -> float:
        """When the request holding the lane that frees first left: the server's oldest, as far as we know."""
        return self.started[self.free_at.index(min(self.free_at))]

    def snapshot(self, now: float) -> dict[str, float | int]:
        return {
            "lanes": self.capacity,
            "lane_width_s": round(self.width_s, 3),
            "lane_margin_s": round(self.margin_s, 3),
            "lanes_busy": sum(t > now for t in self.free_at),
        }


class Refunds:
    """When lanes were given back (attempts that never reached the quota), trusted until a 429 soon after one
    says the server counts them after all."""

    def __init__(self) -> None:
        self.at: collections.deque[float] = collections.deque()
        self.trusted = True

    def distrust(self, now: float, width_s: float) -> bool:
        """A 429 now: True if a lane came back within a window of it (they are no longer given back)."""
        while self.at and self.at[0] < now - width_s - 1.0:
            self.at.popleft()
        if not (self.at and self.trusted):
            return False
        self.trusted = False
        return True


class WidthProbe:
    """The width of a window learned from 429s whose hints are whole seconds, rounded up: it lies in (``floor``,
    width]. Held at the upper end, every window of the run starts up to 1 s late (0.85 of capacity). So one
    request at a time goes out early, at the middle of that interval after the request whose lane it takes (the
    server's oldest): admitted, the window is at most that (the lanes free sooner); refused -- the server counts
    no refusal -- it is at least that, and its hint bounds it again. Halved each time, to ``PRECISION_S``."""

    PRECISION_S = 0.03

    def __init__(self, floor: float) -> None:
        self.floor = floor
        self.lease: int | None = None  # the probe in flight
        self.after = 0.0  # when the request whose lane it took left

    def early_s(self, lanes: Lanes) -> float:
        """How much sooner than the first lane frees the next request may go (0: no probe now)."""
        if self.lease is not None or lanes.width_s - self.floor <= self.PRECISION_S:
            return 0.0
        return (lanes.width_s - self.floor) / 2.0 + lanes.margin_s

    def sent(self, lease: int, after: float) -> None:
        self.lease, self.after = lease, after

    def outcome(
        self, lanes: Lanes, outcome: str, times: tuple[float, float], hint: float | None, step: float
    ) -> tuple[bool, bool]:
        """The probe's outcome (``times``: when it left, now): (the width moved, it was refused)."""
        sent, now = times
        if outcome in ("ok", "error"):
            return self.admitted(lanes, sent, now), False
        if outcome != "rate_limited":
            self.lease = None  # no reply, or one that says nothing of the window
            return False, False
        lanes.give_back(self.lease or 0)  # the server counts no refusal
        self.refused(lanes, sent, now, None if hint is None else now + hint, step)
        return True, True

    def admitted(self, lanes: Lanes, sent_at: float, now: float) -> bool:
        """The probe was admitted: the window is at most ``sent_at - after``. True if the lanes narrowed."""
        self.lease, width = None, sent_at - self.after
        if not self.floor < width < lanes.width_s:
            return False
        lanes.hold(now, width - lanes.width_s)
        lanes.width_s = width
        return True

    def refused(self, lanes: Lanes, sent_at: float, now: float, until: float | None, step: float) -> None:
        """The probe was refused (its lane is given back): the window is at least ``sent_at - after``; the
        hint says the oldest leaves at ``until``, rounded up by ``step``: at most that, at least that less it."""
        self.lease = None
        self.floor = max(self.floor, sent_at - self.after)
        if until is None:
            return
        upper = until - self.after
        if self.floor < upper < lanes.width_s:
            lanes.hold(now, upper - lanes.width_s)
            lanes.width_s = upper
        self.floor = max(self.floor, min(upper, lanes.width_s) - step)


@dataclass(frozen=True)
class RateLimits:
    rpm: float | None = None  # requests per minute; None = unknown (adaptive concurrency)
    tpm: float | None = None  # tokens per minute; None = unknown
    max_concurrency: int = 16  # hard cap on calls in flight for the whole endpoint
    headroom: float = 0.98  # smooth pacing (no window told) runs at this share of rpm/tpm: arrival jitter
    initial_concurrency: int = 4  # AIMD start when the limits are unknown
    lease_ttl_s: float = 300.0  # a lease not released by then (caller died) is reclaimed
    window_s: float | None = None  # the window the rpm is enforced over (rpm * window_s / 60 per window)

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "window_s"):
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

    def lanes(self) -> Lanes | None:
        """The request lanes a told rpm gives: one window's allowance, or one lane (smooth pacing)."""
        if self.rpm is None:
            return None
        if self.window_s is None:
            return Lanes(1, 60.0 / (self.rpm * self.headroom), 0.0)
        return Lanes(int(self.rpm * self.window_s / 60.0), self.window_s, lane_margin(self.window_s))


def lane_margin(width_s: float) -> float:
    """How much longer than W a lane is held: arrival jitter must not cross a window."""
    return _LANE_MARGIN[0] + _LANE_MARGIN[1] * width_s
