"""The options of the simulated server ``shp-serve`` (a test double of the protocol), one frozen
record checked when built.

Kept apart from the server so that the config (``conf``) can declare and check the ``sim``
provider's settings without loading aiohttp or the routes: nothing here starts a server.
"""

from __future__ import annotations

from dataclasses import dataclass

from shp_ray.providers.batch_files import MAX_BYTES, MAX_LINES
from shp_ray.providers.sim.faults import ALL_FAULT_KINDS, FAULT_KINDS
from shp_ray.providers.sim.limits import RATELIMIT_DIALECTS, RETRY_AFTER_STYLES


@dataclass(frozen=True)
class SimOptions:
    host: str = "127.0.0.1"
    port: int = 0  # 0 = a free port
    seed: int = 0
    latency_s: float = 0.0  # fixed latency per reply
    jitter_s: float = 0.0  # + uniform [0, jitter_s), deterministic per request
    rpm: float | None = None  # requests per minute, enforced per window_s
    tpm: float | None = None  # tokens per minute (prompt + completion), enforced per window_s
    window_s: float = 2.0
    window_kind: str = "sliding"  # sliding (a log of the last window_s) | fixed (resets at boundaries)
    count_rejected: bool = False  # a 429'd request still uses quota (punishes clients that hammer)
    fault_rate: float = 0.0
    faults: tuple[str, ...] = FAULT_KINDS  # or any of ALL_FAULT_KINDS (empty, stall: only when named)
    faults_after: int = 0  # the first this many chat requests are never faulted (a preflight passes first)
    slow_s: float = 1.5  # extra delay of a "slow" fault
    slow_fault_rate: float = 0.0  # share of arrivals held for slow_fault_s, then failed (504)
    slow_fault_s: tuple[float, float] = (5.0, 8.0)  # the hold is uniform in this range, per request
    retry_after: str = "seconds"  # seconds (+ retry-after-ms) | http-date | ms | none | rotate (each in turn)
    ratelimit_headers: bool = True  # state the quotas in every reply's headers
    ratelimit_dialect: str = "openai"  # x-ratelimit-*-{requests,tokens} | anthropic: anthropic-ratelimit-*
    fault_quota: str = "charged"  # charged: a faulted request uses quota | refunded: a 5xx or a drop does not
    api_key_env: str = ""  # if set, requests must carry "Bearer $value-of-that-env-var" (else 401)
    basic_auth: str = ""  # if set, "user:password" requests must carry as HTTP basic auth (a proxy in front)
    models: tuple[str, ...] = ()  # if set, other models get 404; empty = any model is served
    approve_rate: float = 0.3
    keep_requests: int = 0  # keep the messages of the last N chat requests answered live (SimServer.received)
    # The Batch API (/v1/files, /v1/batches): its own pace and faults, apart from the live limits above.
    batch_delay_s: float = 0.0  # how long each of validating, in_progress (before line 1) and finalizing lasts
    batch_lines_per_s: float | None = None  # lines answered per second per batch; None = as fast as it can
    batch_expiry_s: float = 86_400.0  # a batch not done this long after creation expires (OpenAI: 24 h)
    batch_fault_rate: float = 0.0  # share of line answers that fail (HTTP 500 in the error file)
    batch_malformed_rate: float = 0.0  # share of output lines written as broken JSON
    batch_max_lines: int = MAX_LINES  # requests per input file (more: the batch fails)
    batch_max_bytes: int = MAX_BYTES  # bytes per input file (more: the upload is refused, 413)
    batch_enqueued_tokens: int | None = None  # prompt tokens of running batches per model (more: the batch fails)

    def __post_init__(self) -> None:
        bad = [f for f in self.faults if f not in ALL_FAULT_KINDS]
        if bad:
            raise ValueError(f"SimOptions.faults: unknown kind(s) {bad}; choose from {ALL_FAULT_KINDS}")
        if self.faults_after < 0:
            raise ValueError(f"SimOptions.faults_after={self.faults_after} must be >= 0")
        if self.retry_after not in RETRY_AFTER_STYLES:
            raise ValueError(f"SimOptions.retry_after={self.retry_after!r}; choose from {RETRY_AFTER_STYLES}")
        if self.ratelimit_dialect not in RATELIMIT_DIALECTS:
            raise ValueError(f"SimOptions.ratelimit_dialect={self.ratelimit_dialect!r}: one of {RATELIMIT_DIALECTS}")
        if self.fault_quota not in ("charged", "refunded"):
            raise ValueError(f"SimOptions.fault_quota={self.fault_quota!r}; choose charged or refunded")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError(f"SimOptions.fault_rate={self.fault_rate} is not in [0, 1]")
        if not 0.0 <= self.slow_fault_rate <= 1.0:
            raise ValueError(f"SimOptions.slow_fault_rate={self.slow_fault_rate} is not in [0, 1]")
        lo, hi = self.slow_fault_s
        if not 0.0 <= lo <= hi:
            raise ValueError(f"SimOptions.slow_fault_s={self.slow_fault_s}: need 0 <= low <= high")
        if self.window_kind not in ("sliding", "fixed"):
            raise ValueError(f"SimOptions.window_kind={self.window_kind!r}; choose sliding or fixed")
        if self.window_s <= 0:
            raise ValueError(f"SimOptions.window_s={self.window_s} must be > 0")
        for name in ("batch_fault_rate", "batch_malformed_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"SimOptions.{name}={getattr(self, name)} is not in [0, 1]")
        if self.batch_delay_s < 0 or self.batch_expiry_s <= 0:
            raise ValueError(
                f"SimOptions: need batch_delay_s >= 0 and batch_expiry_s > 0, got {self.batch_delay_s}, "
                f"{self.batch_expiry_s}"
            )
        if self.batch_lines_per_s is not None and self.batch_lines_per_s <= 0:
            raise ValueError(f"SimOptions.batch_lines_per_s={self.batch_lines_per_s} must be > 0 (or None)")
        if self.keep_requests < 0:
            raise ValueError(f"SimOptions.keep_requests={self.keep_requests} must be >= 0")
        if self.batch_max_lines < 1 or self.batch_max_bytes < 1:
            raise ValueError("SimOptions: batch_max_lines and batch_max_bytes must be >= 1")
        if self.batch_enqueued_tokens is not None and self.batch_enqueued_tokens < 1:
            raise ValueError(f"SimOptions.batch_enqueued_tokens={self.batch_enqueued_tokens} must be >= 1 (or None)")
