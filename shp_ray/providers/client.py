"""The rate-limit-aware async client for any OpenAI-compatible ``/v1/chat/completions``.

One call = acquire a slot from the endpoint's shared limiter (which paces it), send it over
aiohttp, settle the token estimate with the reply's ``usage``. Retries (this client's policy is
the only one): 429 / 408 / 5xx / timeouts / connection resets / malformed bodies / 200s with no
text (:func:`reply_content`), waiting for the server's hint (Retry-After, retry-after-ms,
x-ratelimit-reset-*) or exponential backoff with full jitter; never a permanent 4xx
(400/401/403/404). A call that finally fails raises ``ProviderError`` -- with no key, header or
query string in its text.

When hedging is asked for (``ProviderSpec.hedge``), an attempt that runs past every recent success
(an adaptive deadline, :mod:`deadline`) gets a hedge once the limiter has room for one (:mod:`hedge`),
and is abandoned and retried through the limiter at a multiple of that deadline: a server that holds
a request for seconds before failing it no longer sets the run's tail. ``counters["hedges"]`` and
``counters["abandoned"]`` count them. Without it, a request is never paid twice: only ``timeout_s``
ends an attempt.

An endpoint that gives no reply at all (attempts that time out or are abandoned, and nothing else)
for ``SILENT_AFTER`` x ``timeout_s`` since its last reply fails the call at once, whatever retry
budget is left, with :data:`SILENT` in its message (the run's breaker stops on it): a stalled server
is declared dead within about 3 x ``timeout_s`` + the backoff cap of its last reply, not after
``max_retries`` timeouts in a row (9 x 120 s by default).

``Completion.latency_s`` is the wall time the caller waited (pacing, retries and backoff included);
``attempts`` counts HTTP attempts.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import functools
import json
import math
import os
import re
import time
import types
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp

from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec, Usage
from shp_ray.providers.deadline import AdaptiveDeadline, DeadlinePolicy
from shp_ray.providers.hedge import race
from shp_ray.providers.limiter import RateLimits
from shp_ray.providers.quota import Heard, read_allowances
from shp_ray.providers.reply import error_message, estimate_prompt_tokens, reply_content, reply_logprobs, reply_usage
from shp_ray.providers.retry_policy import Backoff, hint_step, parse_retry_after, should_retry
from shp_ray.providers.shared_limiter import LimiterHandle, get_limiter, ray_running
from shp_ray.redaction import redact_text

SILENT = "the endpoint gave no reply"  # in the message of a call failed by silence (the breaker reads it)
SILENT_AFTER = 2.0  # x timeout_s of nothing but attempts without a reply: the endpoint is dead
_SILENT_KINDS = ("timeout", "abandoned")  # no reply at all (an error status or a reset is a reply of sorts)
_KEYLIKE = re.compile(r"(sk|key|tok)-[A-Za-z0-9_\-]{6,}", re.IGNORECASE)


def redact(text: str, key: str = "") -> str:
    """``text`` with the key, and anything shaped like one, replaced by ``***`` (servers echo keys in errors)."""
    if key:
        text = text.replace(key, "***")
    return _KEYLIKE.sub("***", text)


def url_auth(base_url: str) -> tuple[str, str]:
    """``base_url`` without its user info, and that user info as an HTTP basic ``Authorization`` ("" if none).

    A basic-auth proxy in front of an OpenAI-compatible server is reached as ``https://user:pw@host/v1``;
    the credentials leave the URL here, so no error text or log line built from the URL can carry them.
    """
    parts = urlsplit(base_url)
    if "@" not in parts.netloc:
        return base_url, ""
    user_pass = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    auth = "Basic " + base64.b64encode(user_pass.encode()).decode()
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])), auth


def read_key(spec: ProviderSpec, endpoint: str) -> str:
    """The API key from the variable ``spec`` names ("" when it names none); a missing one is an error."""
    if not spec.api_key_env:
        return ""
    key = os.environ.get(spec.api_key_env, "")
    if not key:
        said = f"environment variable {spec.api_key_env} is not set"
        if _in_ray_actor():  # the driver's preflight had it: a node of a cluster the run joined lacks it
            said += " on this Ray node (a run's actors read the environment their node's Ray started with)"
        raise ProviderError(f"{said}; it must hold the API key for {endpoint}", retryable=False)
    return key


def _in_ray_actor() -> bool:
    """True in a Ray actor: on a cluster the run joined, its environment is not the driver's."""
    if not ray_running():
        return False
    import ray

    return ray.get_runtime_context().get_actor_id() is not None


_WHAT = {"empty": "an empty reply"}  # how a failed attempt's kind reads in its message


@dataclass
class _Call:
    """One ``complete`` call across its attempts."""

    request: ChatRequest
    est: int  # tokens reserved per attempt: the prompt's estimate + max_tokens
    t0: float
    attempts: int = 0  # HTTP attempts, hedges included
    errors: int = 0
    limited: int = 0  # 429s
    abandoned: int = 0


@dataclass
class _Attempt:
    kind: str  # ok | http | timeout | abandoned | connection | malformed | empty (a 200 with no text)
    status: int | None = None
    headers: dict[str, str] | None = None
    completion: tuple[str, Usage, str, tuple[float, ...] | None] | None = None  # content, usage, model, logprobs
    detail: str = ""
    sent_at: float | None = None  # when the request's headers were written (None: it never left)


class OpenAICompatProvider:
    """``await provider.complete(ChatRequest(...)) -> Completion`` against an OpenAI-compatible URL."""

    name = "openai-compatible"

    def __init__(
        self,
        spec: ProviderSpec,
        *,
        backoff: Backoff | None = None,
        rate_limit_budget_s: float = 900.0,
        headroom: float = 0.98,
        use_ray: bool | None = None,
        deadline: DeadlinePolicy | None | bool = True,
    ) -> None:
        if not spec.base_url:
            raise ValueError(f"ProviderSpec(kind={spec.kind!r}).base_url is empty: say which endpoint to call")
        self.spec = spec
        self.endpoint = redact_text(spec.base_url)  # shown in every message: no user info, no secret
        url, self._auth = url_auth(spec.base_url)
        self._url = url.rstrip("/") + "/chat/completions"
        self._key = read_key(spec, self.endpoint)
        if self._auth and self._key:  # two Authorization headers: refused before any call
            raise ProviderError(
                f"{self.endpoint}: the base URL carries credentials (user:password@, sent as HTTP basic auth) and "
                f"{spec.api_key_env} holds an API key; keep one of them",
                retryable=False,
            )
        self.limits = RateLimits(
            rpm=spec.rpm,
            tpm=spec.tpm,
            max_concurrency=spec.max_concurrency,
            headroom=headroom,
            window_s=spec.rate_window_s,
        )
        self.backoff = backoff or Backoff()
        self.rate_limit_budget_s = rate_limit_budget_s
        self._use_ray = use_ray
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._limiter: LimiterHandle | None = None
        self.counters: collections.Counter[str] = collections.Counter()
        self.silent_after_s = SILENT_AFTER * spec.timeout_s
        self._heard = -math.inf  # when the endpoint last replied (any status)
        self._quiet_since: float | None = None  # when the attempts that got no reply began (since _heard)
        # Hedging only when asked for (``spec.hedge``): a hedged or abandoned attempt that the server
        # still answers is paid twice. The embedded llama.cpp server's latency is its own queue and the
        # reply's length on a shared CPU: abandoning there re-queues the same work, so it keeps the
        # plain timeout whatever is asked.
        if deadline is True:
            deadline = DeadlinePolicy() if spec.hedge and spec.kind != "llama" else None
        self.deadline = AdaptiveDeadline(deadline) if isinstance(deadline, DeadlinePolicy) else None

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatProvider(endpoint={self.endpoint!r}, model={self.spec.model!r})"

    # -- per-event-loop resources -------------------------------------------------------------
    def _ensure(self) -> tuple[aiohttp.ClientSession, LimiterHandle]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._session is None or self._session.closed or self._limiter is None:
            self._loop = loop
            connector = aiohttp.TCPConnector(limit=max(100, 2 * self.limits.max_concurrency))
            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(_mark_sent)
            self._session = aiohttp.ClientSession(connector=connector, trace_configs=[trace])
            self._limiter = get_limiter(self.spec.base_url, self._key, self.limits, use_ray=self._use_ray)
        return self._session, self._limiter

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> OpenAICompatProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def stats(self) -> dict[str, int]:
        """Counters for progress displays and benchmarks (this process's client only)."""
        return dict(self.counters)

    @property
    def limiter_kind(self) -> str:
        """ "ray" (the shared named actor), "local" (this process only) or "none" (not used yet)."""
        return str(getattr(self._limiter, "kind", "none"))

    async def limiter_snapshot(self) -> dict[str, Any]:
        """The SHARED limiter's state and counters (all clients of this endpoint and key)."""
        return await self._ensure()[1].snapshot()

    # -- the call -----------------------------------------------------------------------------
    async def complete(self, request: ChatRequest) -> Completion:
        session, limiter = self._ensure()
        call = _Call(request, estimate_prompt_tokens(request) + request.max_tokens, time.monotonic())
        while True:
            lease, delay = await limiter.acquire(call.est)
            result, lease, sent = await self._send(session, limiter, (lease, delay), call)
            settled = self._settle(limiter, lease, result, sent, call)  # releases the lease
            if isinstance(settled, Completion):
                return settled
            self.counters["retries"] += 1
            if settled > 0:
                await asyncio.sleep(settled)

    async def _send(
        self, session: aiohttp.ClientSession, limiter: LimiterHandle, grant: tuple[int, float], call: _Call
    ) -> tuple[_Attempt, int, float]:
        """One attempt, raced against hedges once a deadline applies: (result, its lease, when it was sent).

        The lease behind the result comes back unreleased; if this is cancelled, every lease is released.
        """
        lease, delay = grant
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        except BaseException:
            limiter.release(lease, outcome="cancelled", est_tokens=call.est)
            raise
        soft = None if self.deadline is None else self.deadline.for_attempt(call.abandoned)
        call.attempts += 1
        self.counters["attempts"] += 1
        if soft is None or self.deadline is None:
            sent = time.monotonic()
            try:
                return await self._attempt(session, call.request), lease, sent
            except BaseException:
                limiter.release(lease, outcome="cancelled", est_tokens=call.est)
                raise
        hard = self.deadline.abandon_at(soft)
        send = functools.partial(self._attempt, session, call.request)
        won = await race(send, limiter, lease, call.est, soft, self.deadline, hard)  # releases all if cancelled
        call.attempts += won.hedges
        self.counters["attempts"] += won.hedges
        self.counters["hedges"] += won.hedges
        result = won.result or _Attempt("abandoned", detail=f"no reply within {hard:.2f} s (adaptive)")
        return result, won.lease, won.sent

    def _settle(
        self, limiter: LimiterHandle, lease: int, result: _Attempt, sent: float, call: _Call
    ) -> Completion | float:
        """Release ``lease`` by what came of the attempt: the completion, or how long to wait before the
        next attempt (raises when the call fails for good)."""
        headers = result.headers or {}
        heard = Heard(result.sent_at, read_allowances(headers), hint_step(headers))
        if result.kind == "ok" and result.completion is not None:
            return self._succeed(limiter, lease, result, sent, call, heard)
        hint = parse_retry_after(headers)
        if result.kind == "http" and not should_retry(result.status or 0, headers, result.detail):
            limiter.release(lease, outcome="error", est_tokens=call.est, heard=heard)
            self.counters["failed"] += 1
            raise self._fail(result, call.attempts, retryable=False)
        if result.status == 429:
            call.limited += 1
            self.counters["http_429"] += 1
            limiter.release(lease, outcome="rate_limited", est_tokens=call.est, wait_hint_s=hint, heard=heard)
            if time.monotonic() - call.t0 + (hint or 0.0) > self.rate_limit_budget_s:
                raise self._fail(result, call.attempts, retryable=True, why="rate-limit budget exhausted")
            # a real hint pauses every caller in the shared limiter and headers re-pace it; else back off alone
            paced = (hint is not None and hint >= 0.05) or bool(heard.said)
            return 0.0 if paced else self.backoff.delay(call.limited - 1)
        call.errors += 1
        if result.kind != "abandoned":
            self.counters[f"fault_{result.kind if result.kind != 'http' else 'http_5xx'}"] += 1
        outcome = "unreached" if _unreached(result) else "error"
        limiter.release(lease, outcome=outcome, est_tokens=call.est, wait_hint_s=hint, heard=heard)
        if self._silent(result.kind, sent):
            why = f"{SILENT} for {SILENT_AFTER:g} x provider.timeout_s = {self.silent_after_s:g} s"
            raise self._fail(result, call.attempts, retryable=True, why=why)
        if call.errors > self.spec.max_retries:
            raise self._fail(result, call.attempts, retryable=True, why="retry budget exhausted")
        if result.kind == "abandoned":  # it already waited far longer than any backoff
            call.abandoned += 1
            self.counters["abandoned"] += 1
            if self.deadline is not None:
                self.deadline.spend(1)
            return 0.0
        return max(hint or 0.0, self.backoff.delay(call.errors - 1))

    def _succeed(
        self, limiter: LimiterHandle, lease: int, result: _Attempt, sent: float, call: _Call, heard: Heard
    ) -> Completion:
        assert result.completion is not None
        content, usage, model, logprobs = result.completion
        latency = time.monotonic() - sent
        limiter.release(
            lease, outcome="ok", est_tokens=call.est, actual_tokens=usage.total_tokens, latency_s=latency, heard=heard
        )
        if self.deadline is not None:
            self.deadline.observe(latency)
        self.counters["ok"] += 1
        self.counters["prompt_tokens"] += usage.prompt_tokens
        self.counters["completion_tokens"] += usage.completion_tokens
        return Completion(
            content=content,
            usage=usage,
            latency_s=time.monotonic() - call.t0,
            attempts=call.attempts,
            model=model or call.request.model,
            logprobs=logprobs,
        )

    def _silent(self, kind: str, sent: float) -> bool:
        """An attempt sent at ``sent`` got no reply (``kind``): has the endpoint now been silent too long?"""
        if kind not in _SILENT_KINDS:
            return False
        began = max(sent, self._heard)  # an attempt older than the last reply does not date the silence
        self._quiet_since = began if self._quiet_since is None else min(self._quiet_since, began)
        return time.monotonic() - self._quiet_since >= self.silent_after_s

    def _fail(self, result: _Attempt, attempts: int, *, retryable: bool, why: str = "") -> ProviderError:
        if retryable:
            self.counters["failed"] += 1
        what = f"HTTP {result.status}" if result.status is not None else _WHAT.get(result.kind, result.kind)
        detail = self._redact(result.detail)[:300]
        text = f"{self.endpoint}: {what} after {attempts} attempt(s)"
        text += f" ({why})" if why else ""
        text += f": {detail}" if detail else ""
        return ProviderError(text, status=result.status, attempts=attempts, retryable=retryable)

    def _redact(self, text: str) -> str:
        return redact(text, self._key)

    async def _attempt(self, session: aiohttp.ClientSession, request: ChatRequest) -> _Attempt:
        mark = types.SimpleNamespace(sent_at=None)  # _mark_sent sets it when the headers are written
        result = await self._post(session, request, mark)
        result.sent_at = mark.sent_at
        return result

    async def _post(self, session: aiohttp.ClientSession, request: ChatRequest, mark: object) -> _Attempt:
        payload = request.openai_body(self.spec.model)
        if self.spec.kind == "llama" and (slot := request.slot()) is not None:
            payload["id_slot"] = slot  # the embedded llama-server: this trajectory's slot (its prefix)
        headers = {"Content-Type": "application/json"}
        if self._key or self._auth:
            headers["Authorization"] = f"Bearer {self._key}" if self._key else self._auth
        try:
            timeout = aiohttp.ClientTimeout(total=self.spec.timeout_s)
            post = session.post(self._url, json=payload, headers=headers, timeout=timeout, trace_request_ctx=mark)
            async with post as resp:
                body = await resp.read()
                status, resp_headers = resp.status, dict(resp.headers)
            self._heard, self._quiet_since = time.monotonic(), None
        except TimeoutError:
            return _Attempt("timeout", detail=f"no reply within {self.spec.timeout_s} s")
        except (aiohttp.ClientError, ConnectionError, OSError) as exc:
            return _Attempt("connection", detail=type(exc).__name__)
        if status != 200:
            return _Attempt("http", status, resp_headers, detail=error_message(body))
        try:
            data = json.loads(body)
        except ValueError as exc:
            return _Attempt("malformed", status, resp_headers, detail=f"malformed 200 body ({type(exc).__name__})")
        content, missing = reply_content(data)
        if content is None:  # paid for, but nothing to keep: retried like a 5xx, never returned (so never cached)
            return _Attempt("empty", None, resp_headers, detail=f"a 200 reply with no text ({missing})")
        done = (content, reply_usage(data.get("usage"), request, content), str(data.get("model") or ""))
        return _Attempt("ok", status, resp_headers, completion=(*done, reply_logprobs(data)))


async def _mark_sent(session: aiohttp.ClientSession, ctx: types.SimpleNamespace, params: object) -> None:
    """aiohttp's trace hook: the request's headers are written (its attempt's ``sent_at``)."""
    ctx.trace_request_ctx.sent_at = time.monotonic()


def _unreached(result: _Attempt) -> bool:
    """A failure that never used the server's quota: no connection, or a server error (a 5xx)."""
    return result.kind == "connection" or (result.kind == "http" and (result.status or 0) >= 500)
