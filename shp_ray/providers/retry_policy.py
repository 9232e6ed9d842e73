"""What a failed attempt means: retry or not, and how long to wait (server hints first).

Server hints, in order of precision: ``retry-after-ms``, ``Retry-After`` (delta-seconds or an
HTTP-date), then the ``x-ratelimit-reset-*`` durations when a ``x-ratelimit-remaining-*`` is 0.
Without a hint: exponential backoff with full jitter (AWS architecture blog's "full jitter":
uniform in [0, min(cap, base * 2**n)]), which de-synchronises many workers after a shared 429.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
PERMANENT_STATUS = frozenset({400, 401, 403, 404, 405, 413, 415, 422})
MAX_HINT_S = 600.0  # a hint beyond this is treated as nonsense and capped

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def is_retryable_status(status: int) -> bool:
    """429, 408 and 5xx are transient; every other 4xx is the caller's fault and never retried."""
    if status in RETRYABLE_STATUS:
        return True
    if status in PERMANENT_STATUS or 400 <= status < 500:
        return False
    return status >= 500


def parse_duration(value: str) -> float | None:
    """Parse ``x-ratelimit-reset-*`` values: "1s", "6m0s", "20ms", "1h2m3.5s", or bare seconds."""
    value = value.strip().lower()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``; None if absent."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value):
                return min(MAX_HINT_S, max(0.0, value))
        except ValueError:
            pass
    ra = lower.get("retry-after")
    if ra is None:
        return None
    ra = ra.strip()
    try:
        value = float(ra)
        return min(MAX_HINT_S, max(0.0, value)) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    wall = time.time() if now is None else now
    return min(MAX_HINT_S, max(0.0, when.timestamp() - wall))


def hint_step(headers: Mapping[str, str]) -> float:
    """The resolution of the hint :func:`parse_retry_after` reads: a ``Retry-After`` in whole seconds (or an
    HTTP date, whole seconds too) is a wait rounded up to 1 s; ``retry-after-ms`` (or a fractional value) is
    precise; 0.0 when there is no hint."""
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    if "retry-after-ms" in lower and parse_retry_after({"retry-after-ms": lower["retry-after-ms"]}) is not None:
        return 0.001
    ra = lower.get("retry-after")
    if ra is None or parse_retry_after({"retry-after": ra}) is None:
        return 0.0
    return 0.001 if "." in ra and not any(c.isalpha() for c in ra) else 1.0


def exhausted_window(headers: Mapping[str, str]) -> float | None:
    """If ``x-ratelimit-remaining-{requests,tokens}`` is 0, seconds until its reset; else None."""
    lower = {k.lower(): v for k, v in headers.items()}
    wait: float | None = None
    for kind in ("requests", "tokens"):
        remaining = lower.get(f"x-ratelimit-remaining-{kind}")
        reset = lower.get(f"x-ratelimit-reset-{kind}")
        if remaining is None or reset is None:
            continue
        try:
            if float(remaining) > 0:
                continue
        except ValueError:
            continue
        seconds = parse_duration(reset)
        if seconds is not None:
            wait = max(wait or 0.0, min(MAX_HINT_S, seconds))
    return wait


def should_retry(status: int, headers: dict[str, str], detail: str) -> bool:
    """Transient statuses are retried unless the server says ``x-should-retry: false`` or the
    429 is an exhausted quota (billing), which no amount of waiting fixes."""
    lower = {k.lower(): v.strip().lower() for k, v in headers.items()}
    if lower.get("x-should-retry") == "false":
        return False
    if status == 429 and "insufficient_quota" in detail:
        return False
    if lower.get("x-should-retry") == "true" and status not in (400, 401, 403, 404):
        return True
    return is_retryable_status(status)


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.25
    cap_s: float = 20.0

    def delay(self, retry_index: int, rng: random.Random | None = None) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**retry_index)]."""
        top = min(self.cap_s, self.base_s * (2.0 ** min(retry_index, 30)))
        return (rng or random).uniform(0.0, top)
