"""The simulated server's HTTP routes (aiohttp): ``POST /v1/chat/completions`` and ``GET /v1/models``,
plus the Batch API's ``/v1/files`` and ``/v1/batches`` (:mod:`batch`) on the same app.

A chat request is checked (API key, body, model), held to the rate limits (:mod:`limits`),
answered with a deterministic reply and real token counts (:mod:`replies`), after the
configured latency, unless a fault is drawn for it (:mod:`faults`). :class:`SimStats` counts
what the server saw, for tests to compare with what a client reports.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from shp_ray.providers.sim.batch import SimBatch
from shp_ray.providers.sim.batch_state import BatchStats
from shp_ray.providers.sim.chat import BadChat, chat_completion, error_body, parse_chat
from shp_ray.providers.sim.faults import ALL_FAULT_KINDS, draw_fault, draw_slow_fault, empty_reply, unit
from shp_ray.providers.sim.limits import Limits
from shp_ray.providers.sim.replies import ReplyOptions

if TYPE_CHECKING:  # the options live with the server that is built from them: a type-only import
    from shp_ray.providers.sim.options import SimOptions

SIM_OWNER = "shp-serve (simulated test double)"


@dataclass
class SimStats:
    requests: int = 0
    ok: int = 0
    http_429: int = 0
    http_4xx: int = 0
    tokens: int = 0
    slow_faults: int = 0  # held, then failed with a 504
    ok_unread: int = 0  # served (so paid for) after the client had gone: an abandoned or hedged call
    ok_by_request: dict[str, int] = field(default_factory=dict)  # request digest -> replies served (paid) for it
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ALL_FAULT_KINDS, 0))
    batch: BatchStats = field(default_factory=BatchStats)  # the Batch API's own counters (:mod:`batch`)
    # per second since the first request: [admitted, refused with 429] -- where a run ramps up or stalls
    timeline: list[list[int]] = field(default_factory=list)
    _t0: float | None = None

    def tick(self, now: float, refused: bool) -> None:
        if self._t0 is None:
            self._t0 = now
        second = int(now - self._t0)
        while len(self.timeline) <= second:
            self.timeline.append([0, 0])
        self.timeline[second][1 if refused else 0] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "ok": self.ok,
            "http_429": self.http_429,
            "http_4xx": self.http_4xx,
            "tokens": self.tokens,
            "faults": dict(self.faults),
            "faults_total": sum(self.faults.values()),
            "slow_faults": self.slow_faults,
            "ok_unread": self.ok_unread,
            "ok_repeated": sum(n - 1 for n in self.ok_by_request.values()),  # paid again for a request paid before
            "timeline": [list(x) for x in self.timeline],
            "batch": self.batch.as_dict(),
        }


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(error_body(status, message, kind), status=status, headers=headers)


class SimApp:
    """The aiohttp application plus its limit windows, fault counters and stats."""

    def __init__(self, options: SimOptions) -> None:
        self.o = options
        self.replies = ReplyOptions(seed=options.seed, approve_rate=options.approve_rate)
        self.limits = Limits(options)
        self.seen: collections.Counter[str] = collections.Counter()
        self.arrivals = 0  # chat requests admitted past the limits (faults_after counts these)
        self.unstall = asyncio.Event()  # set on shutdown: the stalled requests end, unanswered
        # What the requests said, for a test to read what a client sent (off unless keep_requests > 0).
        self.received: collections.deque[list[tuple[str, str]]] = collections.deque(maxlen=options.keep_requests)
        self.stats = SimStats()
        self.batch = SimBatch(options, self.replies, self._authorised, self.stats.batch)
        self.app = web.Application(client_max_size=self.batch.client_max_size)
        self.app.router.add_post("/v1/chat/completions", self.chat)
        self.app.router.add_get("/v1/models", self.models)
        self.batch.register(self.app)
        self.app.on_shutdown.append(self._unstall)

    def _refund(self, tokens: int, charged_at: float, fault: str | None) -> None:
        """A server error (or a dropped connection) on a server whose errors use no quota: give it back."""
        if self.o.fault_quota == "refunded" and fault in ("500", "503", "504", "drop"):
            self.limits.uncharge(tokens, charged_at)

    async def _unstall(self, app: web.Application) -> None:
        self.unstall.set()

    async def models(self, request: web.Request) -> web.Response:
        names = self.o.models or ("sim-1",)
        data = [{"id": m, "object": "model", "created": 0, "owned_by": SIM_OWNER} for m in names]
        return web.json_response({"object": "list", "data": data})

    def _authorised(self, request: web.Request) -> bool:
        if self.o.basic_auth:
            token = base64.b64encode(self.o.basic_auth.encode()).decode()
            return request.headers.get("Authorization", "") == f"Basic {token}"
        if not self.o.api_key_env:
            return True
        expected = os.environ.get(self.o.api_key_env, "")
        return bool(expected) and request.headers.get("Authorization", "") == f"Bearer {expected}"

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.stats.requests += 1
        if not self._authorised(request):
            self.stats.http_4xx += 1
            return _error(401, "invalid or missing API key", "invalid_request_error")
        raw = await request.read()
        try:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise BadChat(400, f"bad request body: {type(exc).__name__}") from None
            chat = parse_chat(body, self.o.models)
        except BadChat as exc:
            self.stats.http_4xx += 1
            return _error(exc.status, str(exc), exc.kind)
        self.received.append(chat.messages)

        n_prompt = chat.prompt_tokens
        now = time.monotonic()
        wait = self.limits.wait_for(n_prompt, now)
        self.stats.tick(now, refused=wait > 0)
        if wait > 0:
            self.stats.http_429 += 1
            self.limits.refused(now)
            headers = {**self.limits.retry_headers(wait), **self.limits.limit_headers(now)}
            return _error(429, "rate limit reached (simulated)", "rate_limit_error", headers)

        digest = hashlib.sha256(raw).hexdigest()
        nth = self.seen[digest]
        self.seen[digest] += 1
        reply_id = f"chatcmpl-sim-{digest[:16]}-{nth}"
        reply = chat_completion(self.replies, chat, reply_id=reply_id, created=int(time.time()))
        used = reply["usage"]["total_tokens"]
        self.limits.charge(used, now)  # an admitted request uses quota whether or not a fault follows
        self.stats.tokens += used

        hold = draw_slow_fault(self.o.seed, self.o.slow_fault_rate, self.o.slow_fault_s, digest, nth)
        if hold is not None:
            self.stats.slow_faults += 1
            await asyncio.sleep(hold)
            self._refund(used, now, "504")
            return _error(504, "upstream timed out (simulated slow fault)", "server_error")
        self.arrivals += 1
        fault = draw_fault(self.o.seed, self.o.faults, self.o.fault_rate, digest, nth)
        if self.arrivals <= self.o.faults_after:
            fault = None
        if fault is not None:
            self.stats.faults[fault] += 1
        if fault == "stall":  # read, never answered: what only the client's own timeout ends
            await self.unstall.wait()
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        delay = self.o.latency_s + self.o.jitter_s * unit(self.o.seed, "jitter", digest, nth)
        if fault == "slow":
            delay += self.o.slow_s
        if delay > 0:
            await asyncio.sleep(delay)
        self._refund(used, now, fault)
        headers = self.limits.limit_headers(time.monotonic())
        if fault in ("500", "503"):
            return _error(int(fault), "injected fault (simulated)", "server_error", headers)
        if fault == "drop":
            if request.transport is not None:  # close without a response; the client sees a reset
                request.transport.abort()
            return web.Response(status=500)
        if fault == "malformed":
            return web.Response(
                status=200,
                text='{"id": "chatcmpl-sim", "choices": [{"mess',
                headers=headers,
                content_type="application/json",
            )
        if fault == "empty":  # paid for (the quota is charged above) and useless
            return web.json_response(empty_reply(reply, self.o.seed, digest, nth), headers=headers)
        self.stats.ok += 1
        self.stats.ok_by_request[digest] = self.stats.ok_by_request.get(digest, 0) + 1
        if request.transport is None or request.transport.is_closing():
            self.stats.ok_unread += 1  # the reply is generated (and billed) whether or not it is read
        return web.json_response(reply, headers=headers)
