"""A request rate learned from 429s: how an untold limiter paces when no header states the quota and no 429's
hint tells its window (:mod:`limiter` learns a window when one does).

Multiplicative decrease to what the server admitted lately (at most once a second, never below half the current
rate in one cut: a paused spell admits nothing), and a probe upwards while no 429 comes (x2 every 10 s).
"""

from __future__ import annotations

import collections
import math

_RATE_HORIZON_S = 5.0  # the admitted rate is measured over this many recent seconds
_RATE_DOUBLING_S = 10.0  # without a 429 the learned rate doubles this often


class LearnedRate:
    """The learned rate of one endpoint (None until the first 429) and the next start it allows."""

    def __init__(self) -> None:
        self.rps: float | None = None
        self.tat = 0.0  # the theoretical arrival time of the next request (GCRA)
        self.last_cut = -math.inf
        self._admitted: collections.deque[float] = collections.deque()  # when admitted replies came
        self._first_admitted: float | None = None

    def observe(self, now: float, admitted: bool) -> None:
        """An attempt ended (``admitted``: it reached the server and was not refused)."""
        if admitted:
            self._admitted.append(now)
            if self._first_admitted is None:
                self._first_admitted = now
        while self._admitted and self._admitted[0] < now - _RATE_HORIZON_S:
            self._admitted.popleft()

    def reserve(self, start: float, now: float) -> None:
        if self.rps is not None:
            self.tat = start + 1.0 / self.at(now)

    def at(self, now: float) -> float:
        """The learned rate probes upwards while no 429 comes: x2 every 10 s since the last cut."""
        assert self.rps is not None
        return self.rps * 2.0 ** (min(600.0, max(0.0, now - self.last_cut)) / _RATE_DOUBLING_S)

    def refused(self, started: float, now: float) -> bool:
        """A 429 of a request that left at ``started``: cut (True) if it is evidence about the CURRENT rate,
        not a stale request, and the last cut is a second old."""
        if now - self.last_cut < 1.0 or started < self.last_cut or self._first_admitted is None:
            return False
        span = min(_RATE_HORIZON_S, max(1.0, now - self._first_admitted))
        measured = max(len(self._admitted) / span, 0.1)
        if self.rps is None:
            self.rps = measured
        else:  # never below half of the current rate in one cut: a paused spell admits nothing
            current = self.at(now)
            self.rps = max(0.05, current * 0.5, min(current * 0.9, measured))
        self.last_cut = now
        return True
