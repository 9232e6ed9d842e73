"""The adaptive deadline: when an attempt has run long enough to be worth a hedge, then abandoned.

A fixed timeout (``ProviderSpec.timeout_s``, minutes) is for a dead server. A server that holds a
request for seconds and then fails it (a stuck upstream behind a gateway) costs a caller the whole
hold; once the rest of the run's requests are done, that hold is the run's tail. So an attempt that
has run past every recent success gets a hedge when the limiter has room (:mod:`hedge`), and is
abandoned and retried at ``abandon_after`` x that deadline (``abandon_floor_s`` at the soonest). The
deadline is learned:

    deadline = max(floor_s, slack x the slowest of the last ``window`` successful attempts)

The slowest recent success (~p99.6 over 256), not a mid quantile: a rare but legitimate slow reply
(a long completion, a slow replica) must not be duplicated, or its paid work is paid again.
Four guards keep hedges and abandonment from costing more paid calls than they save:

- no deadline until ``min_samples`` successes were seen and the client has watched for
  ``watch`` x the deadline: a latency longer than the time watched cannot have been seen yet, so
  the first replies of a slow class would all look stuck;
- no hedge while more than ``max_overdue`` attempts are past their deadline at once: many at once
  is a slow server, or a slow class of reply whose first successes have not come back yet (their
  latency is still unknown), not a stuck request;
- each abandonment of the same call doubles its next deadline, so a call whose replies really are
  that slow still completes (a deadline never starves a request);
- a budget (a token bucket: ``budget_share`` of a token per attempt, at most ``budget_cap``; a hedge
  or an abandoned attempt spends one) caps the extra attempts at a share of all attempts, so a
  server that slows down for everyone is waited for, not flooded with duplicates.

Every extra attempt goes through the endpoint's rate limiter like any other attempt.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class DeadlinePolicy:
    floor_s: float = 0.25  # never hedge an attempt younger than this
    slack: float = 3.0  # x the slowest recent success: a reply slowed by a loaded CPU (2x) is not duplicated
    window: int = 256  # successes remembered
    min_samples: int = 16  # successes seen before any deadline applies
    watch: float = 3.0  # ... and seconds watched (since the first attempt), x the deadline
    budget_share: float = 0.05  # extra attempts (hedges, abandoned) allowed per attempt, in the long run
    budget_cap: float = 5.0  # ... and in a burst
    abandon_after: float = 4.0  # x the deadline: cancel what still runs and retry through the queue
    # ... but never sooner than this: abandoning a reply of a slow class not yet seen pays for it twice,
    # while a hedge at the tail (only where the limiter has room) ends a stall without waiting that long
    abandon_floor_s: float = 4.0
    max_overdue: int = 4  # hedge only while at most this many attempts are past their deadline at once

    def __post_init__(self) -> None:
        if self.floor_s <= 0 or self.slack < 1 or self.window < 1 or self.min_samples < 1 or self.abandon_after < 1:
            raise ValueError(
                f"DeadlinePolicy{self}: need floor_s > 0, slack >= 1, window >= 1, min_samples >= 1, abandon_after >= 1"
            )
        if self.watch < 0 or self.max_overdue < 0 or self.abandon_floor_s < 0:
            raise ValueError(f"DeadlinePolicy{self}: need watch >= 0, max_overdue >= 0 and abandon_floor_s >= 0")
        if not 0.0 <= self.budget_share <= 1.0 or self.budget_cap < 0:
            raise ValueError(f"DeadlinePolicy{self}: need budget_share in [0, 1] and budget_cap >= 0")


class AdaptiveDeadline:
    """The latencies of one client's successful attempts and the budget of extra attempts."""

    def __init__(self, policy: DeadlinePolicy | None = None) -> None:
        self.policy = policy or DeadlinePolicy()
        self._latencies: collections.deque[float] = collections.deque(maxlen=self.policy.window)
        self._seen = 0
        self._tokens = self.policy.budget_cap
        self.overdue = 0  # attempts in flight past their deadline (the hedge race counts them)
        self._since: float | None = None  # when the first attempt was sent

    def observe(self, latency_s: float) -> None:
        """A successful attempt took ``latency_s`` (sent to reply read)."""
        self._latencies.append(latency_s)
        self._seen += 1

    def current(self) -> float | None:
        """The deadline an attempt would get now (None while too little is known)."""
        if self._seen < self.policy.min_samples or self._since is None:
            return None
        deadline = max(self.policy.floor_s, self.policy.slack * max(self._latencies))
        return deadline if time.monotonic() - self._since >= self.policy.watch * deadline else None

    def abandon_at(self, deadline_s: float) -> float:
        """When an attempt with this deadline is cancelled and retried through the queue."""
        return max(self.policy.abandon_floor_s, deadline_s * self.policy.abandon_after)

    def for_attempt(self, abandoned_before: int) -> float | None:
        """The deadline of an attempt about to be sent (None = run to the timeout); earns the budget its share.

        ``abandoned_before`` counts this call's attempts already abandoned: each doubles it.
        """
        if self._since is None:
            self._since = time.monotonic()
        self._tokens = min(self.policy.budget_cap, self._tokens + self.policy.budget_share)
        base = self.current()
        if base is None or self._tokens < 1.0:
            return None
        return base * 2.0 ** min(abandoned_before, 10)

    def enter_overdue(self) -> None:
        self.overdue += 1

    def leave_overdue(self) -> None:
        self.overdue = max(0, self.overdue - 1)

    def may_hedge(self) -> bool:
        """An overdue attempt may get a hedge: budget left, and it is not one of many overdue at once."""
        return self._tokens >= 1.0 and self.overdue <= self.policy.max_overdue

    def spend(self, n: int) -> None:
        """``n`` extra attempts (hedges, or the retry of an abandoned one) spend a token each."""
        self._tokens = max(0.0, self._tokens - float(n))

    def snapshot(self) -> dict[str, float | int | None]:
        current = self.current()
        return {
            "deadline_s": None if current is None else round(current, 3),
            "samples": self._seen,
            "budget": round(self._tokens, 2),
            "overdue": self.overdue,
        }
