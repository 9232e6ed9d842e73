"""The simulated server's rate limits: RPM/TPM quotas over a SHORT window, and the headers that report them.

A quota of ``rpm`` requests per minute is enforced as ``rpm * window_s / 60`` requests per
``window_s`` seconds, so a burst of a whole minute's quota is refused as real providers refuse it.
Two kinds of window: *sliding* (a log of the last ``window_s`` seconds) and *fixed* (the quota
resets at each boundary, so bursts at the edges pass -- as some providers do). A refusal is
answered with ``Retry-After`` in the style asked for (seconds, an HTTP date, milliseconds or none)
and ``x-ratelimit-*`` headers, so clients can be tested against each style.
"""

from __future__ import annotations

import collections
import math
import time
from email.utils import formatdate

RETRY_AFTER_STYLES = ("seconds", "http-date", "ms", "none")


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
        self._expire(now)
        return max(0.0, self.log[0][0] + self.window_s - now) if self.log else 0.0


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


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.3f}s"


class Limits:
    """The request and token quotas (either may be off) and the headers that report them."""

    def __init__(
        self,
        rpm: float | None,
        tpm: float | None,
        *,
        window_s: float = 2.0,
        window_kind: str = "sliding",
        count_rejected: bool = False,
        retry_after: str = "seconds",
        ratelimit_headers: bool = True,
    ) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.count_rejected = count_rejected
        self.retry_after = retry_after
        self.ratelimit_headers = ratelimit_headers
        per_window = window_s / 60.0
        window = FixedWindow if window_kind == "fixed" else SlidingWindow
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

    def limit_headers(self, now: float) -> dict[str, str]:
        """``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (none when turned off)."""
        h: dict[str, str] = {}
        if not self.ratelimit_headers:
            return h
        for name, win, per_min in (("requests", self.requests, self.rpm), ("tokens", self.tokens, self.tpm)):
            if win is None:
                continue
            h[f"x-ratelimit-limit-{name}"] = str(int(per_min or 0))
            h[f"x-ratelimit-remaining-{name}"] = str(win.remaining(now))
            h[f"x-ratelimit-reset-{name}"] = _duration(win.reset_in(now))
        return h

    def retry_headers(self, wait: float) -> dict[str, str]:
        """How long to wait, in the ``retry_after`` style."""
        style = self.retry_after
        if style == "seconds":
            return {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(math.ceil(wait * 1000))}
        if style == "http-date":  # 1 s resolution: round up to the next whole second
            return {"Retry-After": formatdate(math.ceil(time.time() + wait), usegmt=True)}
        if style == "ms":
            return {"retry-after-ms": str(math.ceil(wait * 1000))}
        return {}
