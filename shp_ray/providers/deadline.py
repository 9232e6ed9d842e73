"""The adaptive deadline: when an attempt has run long enough to be worth a hedge, then abandoned.

A fixed timeout (``ProviderSpec.timeout_s``, minutes) is for a dead server. A server that holds a
request for seconds and then fails it (a stuck upstream behind a gateway) costs a caller the whole
hold; once the rest of the run's requests are done, that hold is the run's tail. So an attempt that
has run past every recent success gets a hedge when the limiter has room (:mod:`hedge`), and is
abandoned and retried at ``abandon_after`` x that deadline. The deadline is learned:

    deadline = max(floor_s, slack x the slowest of the last ``window`` successful attempts)

The slowest recent success (~p99.6 over 256), not a mid quantile: a rare but legitimate slow reply
(a long completion, a slow replica) must not be duplicated, or its paid work is paid again.
Three guards keep hedges and abandonment from costing more paid calls than they save:

- no deadline until ``min_samples`` successes were seen (nothing is known yet);
- each abandonment of the same call doubles its next deadline, so a call whose replies really are
  that slow still completes (a deadline never starves a request);
- a budget (a token bucket: ``budget_share`` of a token per attempt, at most ``budget_cap``; a hedge
  or an abandoned attempt spends one) caps the extra attempts at a share of all attempts, so a
  server that slows down for everyone is waited for, not flooded with duplicates.

Every extra attempt goes through the endpoint's rate limiter like any other attempt.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass


@dataclass(frozen=True)
class DeadlinePolicy:
    floor_s: float = 1.0  # never hedge an attempt younger than this
    slack: float = 1.5  # x the slowest recent success
    window: int = 256  # successes remembered
    min_samples: int = 16  # successes seen before any deadline applies
    budget_share: float = 0.05  # extra attempts (hedges, abandoned) allowed per attempt, in the long run
    budget_cap: float = 5.0  # ... and in a burst
    abandon_after: float = 4.0  # x the deadline: cancel what still runs and retry through the queue

    def __post_init__(self) -> None:
        if self.floor_s <= 0 or self.slack < 1.0 or self.window < 1 or self.min_samples < 1 or self.abandon_after < 1:
            raise ValueError(
                f"DeadlinePolicy{self}: need floor_s > 0, slack >= 1, window >= 1, min_samples >= 1, abandon_after >= 1"
            )
        if not 0.0 <= self.budget_share <= 1.0 or self.budget_cap < 0:
            raise ValueError(f"DeadlinePolicy{self}: need budget_share in [0, 1] and budget_cap >= 0")


class AdaptiveDeadline:
    """The latencies of one client's successful attempts and the budget of extra attempts."""

    def __init__(self, policy: DeadlinePolicy | None = None) -> None:
        self.policy = policy or DeadlinePolicy()
        self._latencies: collections.deque[float] = collections.deque(maxlen=self.policy.window)
        self._seen = 0
        self._tokens = self.policy.budget_cap

    def observe(self, latency_s: float) -> None:
        """A successful attempt took ``latency_s`` (sent to reply read)."""
        self._latencies.append(latency_s)
        self._seen += 1

    def current(self) -> float | None:
        """The deadline an attempt would get now (None while too little is known)."""
        if self._seen < self.policy.min_samples:
            return None
        return max(self.policy.floor_s, self.policy.slack * max(self._latencies))

    def for_attempt(self, abandoned_before: int) -> float | None:
        """The deadline of an attempt about to be sent (None = run to the timeout); earns the budget its share.

        ``abandoned_before`` counts this call's attempts already abandoned: each doubles it.
        """
        self._tokens = min(self.policy.budget_cap, self._tokens + self.policy.budget_share)
        base = self.current()
        if base is None or self._tokens < 1.0:
            return None
        return base * 2.0 ** min(abandoned_before, 10)

    def spend(self, n: int) -> None:
        """``n`` extra attempts (hedges, or the retry of an abandoned one) spend a token each."""
        self._tokens = max(0.0, self._tokens - float(n))

    def snapshot(self) -> dict[str, float | int | None]:
        current = self.current()
        return {
            "deadline_s": None if current is None else round(current, 3),
            "samples": self._seen,
            "budget": round(self._tokens, 2),
        }
