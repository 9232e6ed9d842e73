"""The one small interface every provider implements: ``await provider.complete(request)``.

Rate limiting, retries and caching wrap a provider; they do not live inside it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

SLOT_SPACE = 720720  # the least common multiple of 1..16


@dataclass(frozen=True)
class ChatRequest:
    """One chat call. Everything here changes the output, so all of it is in the cache key."""

    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content) pairs
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    # Ask for each generated token's log-probability (``logprobs: true``; the token-confidence family reads them).
    # In the cache key only when asked: a request without it keeps the key every stored cache holds.
    logprobs: bool = False
    # Which conversation this call continues (a trajectory's role): a server with slots (the embedded
    # llama-server) serves one affinity from one slot, so the call resumes from its evaluated prefix.
    # It changes where the call runs, not what it asks: not in the cache key.
    affinity: str = field(default="", compare=False)

    def slot(self) -> int | None:
        """llama-server's ``id_slot`` for this call, None without an affinity. The server wraps it around
        its slot count; SLOT_SPACE divides evenly by every count up to 16, so the slots share alike."""
        if not self.affinity:
            return None
        return int.from_bytes(hashlib.sha256(self.affinity.encode()).digest()[:8], "big") % SLOT_SPACE

    def key_parts(self) -> dict[str, object]:
        """The readable parts of the cache key (for debugging a cache hit or miss)."""
        parts: dict[str, object] = {
            "model": self.model,
            "messages": [list(m) for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if self.logprobs:  # a reply with log-probabilities is another record than one without
            parts["logprobs"] = True
        return parts

    def cache_key(self) -> str:
        blob = json.dumps(self.key_parts(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def openai_messages(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    def openai_body(self, default_model: str = "") -> dict[str, object]:
        """The ``/v1/chat/completions`` JSON body: the one the live client POSTs and a batch line carries,
        so a request answered either way is the same request."""
        body: dict[str, object] = {
            "model": self.model or default_model,
            "messages": self.openai_messages(),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.logprobs:
            body["logprobs"] = True
        return body


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# How a call was paid: "live" (one request, answered now) or "batch" (a provider's Batch API: uploaded
# with others, answered later, billed at its batch discount). The store keeps each call's mode so the
# replay can price it as it was paid (analysis: operational_cost_usd) and as if it had been the other.
LIVE, BATCH = "live", "batch"
CALL_MODES = (LIVE, BATCH)


@dataclass(frozen=True)
class Completion:
    content: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 1
    model: str = ""
    cached: bool = False
    mode: str = LIVE  # how it was paid for (CALL_MODES): a batch line costs the batch price
    # each generated token's log-probability, in order, when the request asked and the provider returned them
    logprobs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.mode not in CALL_MODES:
            raise ValueError(f"Completion.mode must be one of {list(CALL_MODES)}, got {self.mode!r}")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class ProviderError(Exception):
    """A call that finally failed. ``retryable`` says whether another attempt could succeed.

    Messages never carry the API key or request headers.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


@runtime_checkable
class Provider(Protocol):
    name: str

    async def complete(self, request: ChatRequest) -> Completion: ...


@dataclass(frozen=True)
class ProviderSpec:
    """How to build a provider inside any process (a Ray actor included).

    The key itself never travels: only the NAME of the environment variable
    that holds it, read where the client is built.
    """

    kind: str = "openai"  # openai | sim | llama | scripted
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""  # name of the env var holding the key; "" = no key (local servers)
    rpm: float | None = None  # requests per minute; None = unknown (adaptive concurrency)
    tpm: float | None = None  # tokens per minute; None = unknown
    # The window the provider enforces rpm over ("40 requests per 5 s": rpm=480, rate_window_s=5): a
    # window's allowance then goes out at its start. None = unknown: smooth pacing at rpm, until the
    # provider's rate-limit headers state the window.
    rate_window_s: float | None = None
    max_concurrency: int = 16
    max_retries: int = 8
    timeout_s: float = 120.0
    # Hedging: an attempt past every recent success gets a second one when the limiter has room, and is
    # abandoned and retried later (:mod:`shp_ray.providers.deadline`). Off: a request is never paid twice
    # (only the timeout_s above ends an attempt); on, a slow reply that still succeeds may be paid twice.
    hedge: bool = False
    # Batch mode (the provider's Batch API, about half price): every trajectory of a job advances one
    # call per batch (shp_ray.generation.lockstep). A request no batch answered in batch_max_tries
    # batches goes live; batches are polled every batch_poll_s seconds.
    batch: bool = False
    batch_poll_s: float = 30.0
    batch_max_tries: int = 2
