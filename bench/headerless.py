"""A rate-limited server that is NOT ours: a test double of a terse third-party OpenAI-compatible endpoint.

Written apart from the project's simulator (``shp_ray.providers.sim``), which sends ``x-ratelimit-*``
headers and whose replies take 0 ms: a client tuned against it alone can lean on what it says. This
one says nothing it does not have to:

- a sliding window of ``limit`` requests per ``window_s`` seconds (40 per 5 s), counted at arrival;
  every admitted request uses the window whatever follows (a fault included), a refused one does not;
- **no** ``x-ratelimit-*`` header, ever; a 429's hint rotates among ``Retry-After`` in whole seconds
  (rounded up), ``Retry-After`` as an HTTP date (whole seconds, rounded up), ``retry-after-ms``, and
  no hint at all;
- a reply latency (``latency_s``: 0, 50 ms, 500 ms ...) on every admitted request;
- faults drawn from a seeded generator in arrival order: ``fault_rate`` of admitted requests answer
  500 / 503, drop the connection or send a truncated JSON 200 (equal shares), and ``stall_rate`` are
  held ``stall_s`` (5-8 s) and then answered 504.

It counts what a bill would: ``ok`` replies sent, per request body (``paid_twice``: the bodies
answered more than once). In tests: ``with HeaderlessServer(latency_s=0.05) as srv: srv.base_url``;
the bench runs it in a process of its own (``bench.sim_process.ServerProcess``).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from email.utils import formatdate
from typing import Any

from aiohttp import web

from shp_ray.providers.app_thread import AppThread

HINT_STYLES = ("seconds", "http-date", "ms", "none")
FAULT_KINDS = ("500", "503", "drop", "truncated")


@dataclass(frozen=True)
class HeaderlessOptions:
    limit: int = 40  # requests admitted per window
    window_s: float = 5.0  # the sliding window
    latency_s: float = 0.0  # every admitted request's reply waits this long
    fault_rate: float = 0.04  # 500 / 503 / dropped connection / truncated JSON 200
    stall_rate: float = 0.01  # held stall_s, then a 504
    stall_s: tuple[float, float] = (5.0, 8.0)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.limit < 1 or not self.window_s > 0 or self.latency_s < 0:
            raise ValueError(f"HeaderlessOptions{self}: need limit >= 1, window_s > 0, latency_s >= 0")
        if min(self.fault_rate, self.stall_rate) < 0 or self.fault_rate + self.stall_rate > 1:
            raise ValueError(f"HeaderlessOptions{self}: fault_rate and stall_rate are shares summing to <= 1")

    @property
    def capacity_rps(self) -> float:
        return self.limit / self.window_s


class HeaderlessApp:
    """The routes and the counts (one event loop)."""

    def __init__(self, options: HeaderlessOptions) -> None:
        self.o = options
        self.rng = random.Random(options.seed)
        self.window: collections.deque[float] = collections.deque()  # arrival times of admitted requests
        self.refusals = 0
        self.counts: collections.Counter[str] = collections.Counter()
        self.ok_by_body: collections.Counter[str] = collections.Counter()
        self.events: list[tuple[float, str]] = []  # (seconds since the first request, what happened)
        self._t0: float | None = None
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.chat)

    def stats(self) -> dict[str, Any]:
        paid_twice = sum(n - 1 for n in self.ok_by_body.values() if n > 1)
        return {
            "simulated": True,
            "server": "headerless",
            **asdict(self.o),
            **{k: self.counts[k] for k in ("requests", "admitted", "http_429", "ok", "stalls")},
            "faults": {k: self.counts[k] for k in FAULT_KINDS},
            "hints": {k: self.counts[f"hint_{k}"] for k in HINT_STYLES},
            "paid_twice": paid_twice,
            "events": [(round(t, 3), what) for t, what in self.events],
        }

    def _log(self, now: float, what: str) -> None:
        self._t0 = now if self._t0 is None else self._t0
        self.events.append((now - self._t0, what))

    def _hint(self, wait: float) -> dict[str, str]:
        style = HINT_STYLES[self.refusals % len(HINT_STYLES)]
        self.refusals += 1
        self.counts[f"hint_{style}"] += 1
        if style == "seconds":
            return {"Retry-After": str(max(1, math.ceil(wait)))}
        if style == "http-date":
            return {"Retry-After": formatdate(math.ceil(time.time() + wait), usegmt=True)}
        if style == "ms":
            return {"retry-after-ms": str(max(1, math.ceil(wait * 1000.0)))}
        return {}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.counts["requests"] += 1
        raw = await request.read()
        try:
            body = json.loads(raw)
            model = str(body["model"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "bad request body")
        now = time.monotonic()
        while self.window and self.window[0] <= now - self.o.window_s:
            self.window.popleft()
        if len(self.window) >= self.o.limit:
            self.counts["http_429"] += 1
            self._log(now, "429")
            return _error(429, "Rate limit reached for requests", self._hint(self.window[0] + self.o.window_s - now))
        self.window.append(now)
        self.counts["admitted"] += 1
        draw = self.rng.random()
        if draw < self.o.stall_rate:
            self.counts["stalls"] += 1
            self._log(now, "stall")
            await asyncio.sleep(self.rng.uniform(*self.o.stall_s))
            return _error(504, "upstream timed out")
        fault = (
            FAULT_KINDS[self.rng.randrange(len(FAULT_KINDS))] if draw < self.o.stall_rate + self.o.fault_rate else None
        )
        if self.o.latency_s > 0:
            await asyncio.sleep(self.o.latency_s)
        self._log(now, fault or "ok")
        if fault is not None:
            self.counts[fault] += 1
        if fault in ("500", "503"):
            return _error(int(fault), "internal error")
        if fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if fault == "truncated":
            return web.Response(
                status=200, text='{"id": "chatcmpl-x", "choices": [{"mes', content_type="application/json"
            )
        self.counts["ok"] += 1
        self.ok_by_body[hashlib.sha256(raw).hexdigest()] += 1
        return web.json_response(_completion(model, self.counts["ok"]))


def _completion(model: str, n: int) -> dict[str, Any]:
    text = f"Reply {n} of a header-less test double (no model)."
    return {
        "id": f"chatcmpl-headerless-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
    }


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": "error", "code": status}}
    return web.json_response(body, status=status, headers=headers)


class HeaderlessServer:
    """The double on 127.0.0.1 (a free port), in a background thread: ``with HeaderlessServer(...) as srv``."""

    def __init__(self, **options: Any) -> None:
        self.options = HeaderlessOptions(**options)
        self.app = HeaderlessApp(self.options)
        self._host = AppThread(self.app.app, name="shp-headerless-server")

    @property
    def port(self) -> int:
        return self._host.port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def stats(self) -> dict[str, Any]:
        return self.app.stats()

    def __enter__(self) -> HeaderlessServer:
        self._host.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._host.stop()
