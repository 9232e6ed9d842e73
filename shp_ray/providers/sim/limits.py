"""The simulated server's rate limits: RPM/TPM quotas over a SHORT window, and the headers that report them.

A quota of ``rpm`` requests per minute is enforced as ``rpm * window_s / 60`` requests per
``window_s`` seconds, so a burst of a whole minute's quota is refused as real providers refuse it.
Two kinds of window: *sliding* (a log of the last ``window_s`` seconds) and *fixed* (the quota
resets at each boundary, so bursts at the edges pass -- as some providers do). A refusal is
answered with ``Retry-After`` in the style asked for (seconds, an HTTP date, milliseconds, none, or
each in turn), and every reply states the quotas in OpenAI's or Anthropic's headers, so clients can
be tested against each style.
"""

from __future__ import annotations

import collections
import math
import time
from datetime import UTC, datetime
from email.utils import formatdate
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the options are built from this module's constants: a type-only import
    from shp_ray.providers.sim.options import SimOptions

RETRY_AFTER_STYLES = ("seconds", "http-date", "ms", "none", "rotate")
RATELIMIT_DIALECTS = ("openai", "anthropic")


class SlidingWindow:
    """Sliding-window log of (time, amount); what was used in the last ``window_s`` seconds."""

    def __init__(self, cap: float, window_s: float) -> None:
        self.cap, self.window_s = cap, window_s
        self.log: collections.deque[tuple[float, float]] = collections.deque()
        self.used = 0.0

    def _expire(self, now: float) -> None:
        while self.log and self.log[0][0] <= now - self.window_s:
            self.used -= self.log.popleft()[1]

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` fits (0 = now). A request larger than the cap fits an empty window."""
        self._expire(now)
        if self.used + amount <= self.cap or not self.log:
            return 0.0
        need, freed = self.used + amount - self.cap, 0.0
        for t, a in self.log:
            freed += a
            if freed >= need:
                return max(0.001, t + self.window_s - now)
        return max(0.001, self.log[-1][0] + self.window_s - now)

    def add(self, amount: float, now: float) -> None:
        self.log.append((now, amount))
        self.used += amount

    def remaining(self, now: float) -> int:
        self._expire(now)
        return max(0, int(self.cap - self.used))

    def reset_in(self, now: float) -> float:
        """Seconds until the window is whole again (its newest use expires)."""
        self._expire(now)
        return max(0.0, self.log[-1][0] + self.window_s - now) if self.log else 0.0

    def remove(self, amount: float, at: float) -> None:
        for i, (t, a) in enumerate(self.log):
            if t == at and a == amount:
                del self.log[i]
                self.used -= amount
                return


class FixedWindow:
    """Fixed windows [k*W, (k+1)*W): the quota resets at each boundary (bursts at the edges pass)."""

    def __init__(self, cap: float, window_s: float) -> None:
        self.cap, self.window_s = cap, window_s
        self.index, self.used = -1, 0.0

    def _roll(self, now: float) -> None:
        index = int(now // self.window_s)
        if index != self.index:
            self.index, self.used = index, 0.0

    def wait_for(self, amount: float, now: float) -> float:
        self._roll(now)
        if self.used + amount <= self.cap or self.used == 0:
            return 0.0
        return max(0.001, self.reset_in(now))

    def add(self, amount: float, now: float) -> None:
        self._roll(now)
        self.used += amount

    def remaining(self, now: float) -> int:
        self._roll(now)
        return max(0, int(self.cap - self.used))

    def reset_in(self, now: float) -> float:
        return (int(now // self.window_s) + 1) * self.window_s - now

    def remove(self, amount: float, at: float) -> None:
        if int(at // self.window_s) == self.index:
            self.used = max(0.0, self.used - amount)


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.3f}s"


def _rfc3339(wall: float) -> str:
    """An RFC 3339 UTC time with milliseconds (Anthropic's reset headers are RFC 3339 times)."""
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Limits:
    """The request and token quotas (either may be off) and the headers that report them."""

    def __init__(self, options: SimOptions) -> None:
        rpm, tpm, window_s = options.rpm, options.tpm, options.window_s
        self.rpm, self.tpm = rpm, tpm
        self.count_rejected = options.count_rejected
        self.retry_after = options.retry_after
        self.ratelimit_headers = options.ratelimit_headers
        self.dialect = options.ratelimit_dialect
        self.refusals = 0  # 429s answered so far: "rotate" takes the next Retry-After style at each
        per_window = window_s / 60.0
        window = FixedWindow if options.window_kind == "fixed" else SlidingWindow
        self.requests = window(max(1.0, rpm * per_window), window_s) if rpm else None
        self.tokens = window(max(1.0, tpm * per_window), window_s) if tpm else None

    def wait_for(self, prompt_tokens: int, now: float) -> float:
        """Seconds until a request of ``prompt_tokens`` fits both quotas (0 = now)."""
        wait = 0.0
        if self.requests is not None:
            wait = max(wait, self.requests.wait_for(1, now))
        if self.tokens is not None:
            wait = max(wait, self.tokens.wait_for(prompt_tokens, now))
        return wait

    def refused(self, now: float) -> None:
        """A request was refused: with ``count_rejected`` it uses quota anyway (punishes clients that hammer)."""
        if self.count_rejected and self.requests is not None:
            self.requests.add(1, now)

    def charge(self, tokens: int, now: float) -> None:
        """A request was served: one request and its prompt + completion tokens."""
        if self.requests is not None:
            self.requests.add(1, now)
        if self.tokens is not None:
            self.tokens.add(tokens, now)

    def uncharge(self, tokens: int, charged_at: float) -> None:
        """Give back what :meth:`charge` took at ``charged_at`` (a server error that does not count)."""
        if self.requests is not None:
            self.requests.remove(1, charged_at)
        if self.tokens is not None:
            self.tokens.remove(tokens, charged_at)

    def limit_headers(self, now: float) -> dict[str, str]:
        """The quotas' state in the configured dialect (none when turned off): OpenAI's
        ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset a duration) or Anthropic's
        ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` (reset an RFC 3339 time).
        The limit is the window's quota; the reset is when the quota is whole again, as both define it."""
        h: dict[str, str] = {}
        if not self.ratelimit_headers:
            return h
        for name, win in (("requests", self.requests), ("tokens", self.tokens)):
            if win is None:
                continue
            limit, remaining, reset = str(int(win.cap)), str(win.remaining(now)), win.reset_in(now)
            if self.dialect == "anthropic":
                h[f"anthropic-ratelimit-{name}-limit"] = limit
                h[f"anthropic-ratelimit-{name}-remaining"] = remaining
                h[f"anthropic-ratelimit-{name}-reset"] = _rfc3339(time.time() + reset)
            else:
                h[f"x-ratelimit-limit-{name}"] = limit
                h[f"x-ratelimit-remaining-{name}"] = remaining
                h[f"x-ratelimit-reset-{name}"] = _duration(reset)
        return h

    def retry_headers(self, wait: float) -> dict[str, str]:
        """How long to wait, in the ``retry_after`` style ("rotate": each 429 the next style in turn)."""
        style = self.retry_after
        if style == "rotate":
            style = RETRY_AFTER_STYLES[self.refusals % 4]
        self.refusals += 1
        if style == "seconds":
            return {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(math.ceil(wait * 1000))}
        if style == "http-date":  # 1 s resolution: round up to the next whole second
            return {"Retry-After": formatdate(math.ceil(time.time() + wait), usegmt=True)}
        if style == "ms":
            return {"retry-after-ms": str(math.ceil(wait * 1000))}
        return {}
