"""When a generation run must stop: the preflight, the breaker and the abort error.

A run that cannot succeed should say so once, in seconds, not burn every scenario's retry budget
and exit with an empty table:

- :func:`preflight` makes ONE real completion against the endpoint before Ray and the workers
  start, so a dead endpoint, a wrong key or a missing model is one clear error.
- :class:`Breaker` watches the outcomes while the run goes on and trips on a permanent refusal
  (401/403/404, an exhausted quota), on a run where no call has succeeded yet and a trajectory
  ran out of retries (a failure another attempt could have cured: the endpoint, not the request),
  on a call failed because the endpoint gave no reply for 2 x ``timeout_s`` (a stalled server:
  :data:`~shp_ray.providers.client.SILENT`),
  on the same failure ending several trajectories in a row, or when the endpoint's watchdog says
  its server died.
- :class:`GenerationAborted` carries the one message the user sees.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from shp_ray.generation.loop import Failure
from shp_ray.providers.base import ChatRequest, ProviderError, ProviderSpec
from shp_ray.providers.client import SILENT
from shp_ray.redaction import redact_text

PERMANENT_STATUSES = frozenset({401, 403, 404})
SAME_REASON_RUN = 3  # this many trajectories in a row failing the same way: the endpoint is down
_ATTEMPTS = re.compile(r" after \d+ attempt\(s\)")

Watchdog = Callable[[], None]  # raises (with the reason) once the endpoint's server has died


class GenerationAborted(RuntimeError):
    """The run was stopped early; the message says why and what to do."""


@dataclass(frozen=True)
class Outcome:
    """How one trajectory's call finally failed (what the breaker needs to know)."""

    reason: str  # stable across scenarios: no attempt counts
    status: int | None = None
    retryable: bool | None = None

    @property
    def permanent(self) -> bool:
        """No retry or other scenario can succeed: the key, the model or the quota is wrong."""
        return self.status in PERMANENT_STATUSES or (self.status == 429 and self.retryable is False)


def reason_of(message: str) -> str:
    """A failure message without its attempt count, so equal causes compare equal."""
    return _ATTEMPTS.sub("", message).strip()


def outcome_of(exc: BaseException) -> Outcome:
    status = getattr(exc, "status", None)
    retryable = getattr(exc, "retryable", None)
    return Outcome(reason_of(f"{type(exc).__name__}: {exc}"), status, retryable)


def failure_outcome(failure: Failure | None) -> Outcome | None:
    """The Outcome of a trajectory's fatal failure (None for a stored trajectory)."""
    if failure is None:
        return None
    return Outcome(reason_of(f"{failure.error_type}: {failure.message}"), failure.status, failure.retryable)


def advice_for(outcome: Outcome, spec: ProviderSpec) -> str:
    if spec.api_key_env and not os.environ.get(spec.api_key_env):
        return f"export {spec.api_key_env}=<your key> (provider.api_key_env names the variable holding the key)"
    if outcome.status in (401, 403):
        where = f"the variable {spec.api_key_env}" if spec.api_key_env else "provider.api_key_env"
        return f"check the API key ({where}) and its access to model {spec.model!r}"
    if outcome.status == 404:
        return f"check provider.model ({spec.model!r}) and provider.base_url"
    if outcome.status == 429:
        return "the account's quota is exhausted: add credit or use another key"
    return f"check that the endpoint {redact_text(spec.base_url)} is up and reachable, then rerun the same command"


class Breaker:
    """Decides, from finished trajectories and the paid-call count, that the run must stop."""

    def __init__(self, spec: ProviderSpec, watchdog: Watchdog | None = None) -> None:
        self.spec = spec
        self.watchdog = watchdog
        self.failed = 0
        self._recent: deque[Outcome | None] = deque(maxlen=SAME_REASON_RUN)
        self.tripped: str | None = None

    def check_endpoint(self) -> None:
        """Trip if the endpoint's own server died (its watchdog raises with the reason)."""
        if self.watchdog is None or self.tripped:
            return
        try:
            self.watchdog()
        except Exception as exc:  # noqa: BLE001 - the watchdog's message is the reason
            self.tripped = str(exc)

    def observe(self, failure: Outcome | None, paid_calls: int) -> None:
        """One finished trajectory: ``failure`` None if it was stored."""
        self._recent.append(failure)
        if failure is None or self.tripped:
            return
        self.failed += 1
        self.check_endpoint()  # a dead server explains the failure better than the failure does
        if self.tripped:
            return
        endpoint = redact_text(self.spec.base_url)
        why = None
        if failure.permanent:
            why = f"the endpoint {endpoint} refused the request permanently ({failure.reason})"
        elif SILENT in failure.reason:  # no reply at all for 2 x timeout_s: no other trajectory fares better
            why = f"the endpoint {endpoint} stopped answering ({failure.reason})"
        elif paid_calls == 0 and failure.retryable is not False:  # a 400 is that one request's problem
            why = f"no call to {endpoint} has succeeded in this run and a trajectory failed for good ({failure.reason})"
        elif len(self._recent) == SAME_REASON_RUN and all(o == failure for o in self._recent):
            why = f"the last {SAME_REASON_RUN} trajectories all failed the same way ({failure.reason})"
        if why:
            self.tripped = f"{why}. What to do: {advice_for(failure, self.spec)}."


def preflight(spec: ProviderSpec, watchdog: Watchdog | None = None, timeout_s: float = 120.0) -> None:
    """One real completion against ``spec``'s endpoint, with a short retry budget.

    Raises :class:`GenerationAborted` naming the endpoint, the reason and what to do. Not cached
    and not counted as a generation call: it checks the endpoint, it is not part of any trajectory.
    """
    from shp_ray.providers.registry import make_provider

    probe = replace(spec, max_retries=2, timeout_s=min(spec.timeout_s, timeout_s))
    request = ChatRequest(model=spec.model, messages=(("user", "Reply with the word OK."),), max_tokens=4)

    async def one() -> None:
        provider = make_provider(probe, use_ray=False)
        try:
            await provider.complete(request)
        finally:
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                await aclose()

    try:
        asyncio.run(one())
    except ProviderError as exc:
        if watchdog is not None:
            try:
                watchdog()
            except Exception as dead:  # noqa: BLE001 - the server's death is the real reason
                raise GenerationAborted(f"preflight: {dead}") from None
        outcome = outcome_of(exc)
        raise GenerationAborted(
            f"preflight: one test completion against {redact_text(spec.base_url)} (model {spec.model!r}) "
            f"failed: {exc}. What to do: {advice_for(outcome, spec)}. Nothing was generated."
        ) from None
