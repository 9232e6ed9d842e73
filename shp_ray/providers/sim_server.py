"""``shp-serve``: a SIMULATED OpenAI-compatible server (aiohttp), a test double of the protocol.

It serves ``/v1/chat/completions`` and ``/v1/models`` with deterministic replies (see
``sim_replies``), real token counts, optional latency, RPM/TPM limits enforced over a SHORT
sliding window (``rpm * window_s / 60`` requests per ``window_s`` seconds, so bursts of a whole
minute's quota are refused as real providers do) answered with 429 + ``Retry-After`` /
``retry-after-ms`` / ``x-ratelimit-*``, and injected faults (500, 503, slow reply, dropped
connection, malformed JSON 200 body) at a rate. Faults are deterministic: the n-th arrival of a
given request body faults or not as a function of (seed, body, n), so a retry can succeed.

In tests: ``with SimServer(rpm=600, fault_rate=0.05) as sim: sim.base_url, sim.stats``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from aiohttp import web

from shp_ray.providers.sim_replies import ReplyOptions, count_tokens, prompt_tokens, reply_text, truncate_tokens

FAULT_KINDS = ("500", "503", "slow", "drop", "malformed")
RETRY_AFTER_STYLES = ("seconds", "http-date", "ms", "none")
SIM_OWNER = "shp-serve (simulated test double)"


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
    faults: tuple[str, ...] = FAULT_KINDS
    slow_s: float = 1.5  # extra delay of a "slow" fault
    retry_after: str = "seconds"  # seconds (+ retry-after-ms) | http-date | ms | none
    ratelimit_headers: bool = True  # send x-ratelimit-{limit,remaining,reset}-{requests,tokens}
    api_key_env: str = ""  # if set, requests must carry "Bearer $value-of-that-env-var" (else 401)
    models: tuple[str, ...] = ()  # if set, other models get 404; empty = any model is served
    approve_rate: float = 0.3

    def __post_init__(self) -> None:
        bad = [f for f in self.faults if f not in FAULT_KINDS]
        if bad:
            raise ValueError(f"SimOptions.faults: unknown kind(s) {bad}; choose from {FAULT_KINDS}")
        if self.retry_after not in RETRY_AFTER_STYLES:
            raise ValueError(f"SimOptions.retry_after={self.retry_after!r}; choose from {RETRY_AFTER_STYLES}")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError(f"SimOptions.fault_rate={self.fault_rate} is not in [0, 1]")
        if self.window_kind not in ("sliding", "fixed"):
            raise ValueError(f"SimOptions.window_kind={self.window_kind!r}; choose sliding or fixed")
        if self.window_s <= 0:
            raise ValueError(f"SimOptions.window_s={self.window_s} must be > 0")


@dataclass
class SimStats:
    requests: int = 0
    ok: int = 0
    http_429: int = 0
    http_4xx: int = 0
    tokens: int = 0
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 0))

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "ok": self.ok,
            "http_429": self.http_429,
            "http_4xx": self.http_4xx,
            "tokens": self.tokens,
            "faults": dict(self.faults),
            "faults_total": sum(self.faults.values()),
        }


class _Window:
    """Sliding-window log of (time, amount); what was used in the last ``window_s`` seconds."""

    def __init__(self, cap: float, window_s: float) -> None:
        self.cap, self.window_s = cap, window_s
        self.log: collections.deque[tuple[float, float]] = collections.deque()
        self.used = 0.0

    def _expire(self, now: float) -> None:
        while self.log and self.log[0][0] <= now - self.window_s:
            self.used -= self.log.popleft()[1]

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` fits (0 = now). A request larger than the cap fits an empty window."""
        self._expire(now)
        if self.used + amount <= self.cap or not self.log:
            return 0.0
        need, freed = self.used + amount - self.cap, 0.0
        for t, a in self.log:
            freed += a
            if freed >= need:
                return max(0.001, t + self.window_s - now)
        return max(0.001, self.log[-1][0] + self.window_s - now)

    def add(self, amount: float, now: float) -> None:
        self.log.append((now, amount))
        self.used += amount

    def remaining(self, now: float) -> int:
        self._expire(now)
        return max(0, int(self.cap - self.used))

    def reset_in(self, now: float) -> float:
        self._expire(now)
        return max(0.0, self.log[0][0] + self.window_s - now) if self.log else 0.0


class _FixedWindow:
    """Fixed windows [k*W, (k+1)*W): the quota resets at each boundary (bursts at the edges pass)."""

    def __init__(self, cap: float, window_s: float) -> None:
        self.cap, self.window_s = cap, window_s
        self.index, self.used = -1, 0.0

    def _roll(self, now: float) -> None:
        index = int(now // self.window_s)
        if index != self.index:
            self.index, self.used = index, 0.0

    def wait_for(self, amount: float, now: float) -> float:
        self._roll(now)
        if self.used + amount <= self.cap or self.used == 0:
            return 0.0
        return max(0.001, self.reset_in(now))

    def add(self, amount: float, now: float) -> None:
        self._roll(now)
        self.used += amount

    def remaining(self, now: float) -> int:
        self._roll(now)
        return max(0, int(self.cap - self.used))

    def reset_in(self, now: float) -> float:
        return (int(now // self.window_s) + 1) * self.window_s - now


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.json_response(body, status=status, headers=headers)


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.3f}s"


class SimApp:
    """The aiohttp application plus its limit windows, fault counters and stats."""

    def __init__(self, options: SimOptions) -> None:
        self.o = options
        self.replies = ReplyOptions(seed=options.seed, approve_rate=options.approve_rate)
        per_window = options.window_s / 60.0
        window = _FixedWindow if options.window_kind == "fixed" else _Window
        self.req_win = window(max(1.0, options.rpm * per_window), options.window_s) if options.rpm else None
        self.tok_win = window(max(1.0, options.tpm * per_window), options.window_s) if options.tpm else None
        self.seen: collections.Counter[str] = collections.Counter()
        self.stats = SimStats()
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.chat)
        self.app.router.add_get("/v1/models", self.models)

    def _limit_headers(self, now: float) -> dict[str, str]:
        h: dict[str, str] = {}
        if not self.o.ratelimit_headers:
            return h
        for name, win, per_min in (("requests", self.req_win, self.o.rpm), ("tokens", self.tok_win, self.o.tpm)):
            if win is None:
                continue
            h[f"x-ratelimit-limit-{name}"] = str(int(per_min or 0))
            h[f"x-ratelimit-remaining-{name}"] = str(win.remaining(now))
            h[f"x-ratelimit-reset-{name}"] = _duration(win.reset_in(now))
        return h

    def _retry_headers(self, wait: float) -> dict[str, str]:
        style = self.o.retry_after
        if style == "seconds":
            return {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(math.ceil(wait * 1000))}
        if style == "http-date":  # 1 s resolution: round up to the next whole second
            return {"Retry-After": formatdate(math.ceil(time.time() + wait), usegmt=True)}
        if style == "ms":
            return {"retry-after-ms": str(math.ceil(wait * 1000))}
        return {}

    async def models(self, request: web.Request) -> web.Response:
        names = self.o.models or ("sim-1",)
        data = [{"id": m, "object": "model", "created": 0, "owned_by": SIM_OWNER} for m in names]
        return web.json_response({"object": "list", "data": data})

    def _authorised(self, request: web.Request) -> bool:
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
            body = json.loads(raw)
            messages = [(str(m["role"]), str(m.get("content") or "")) for m in body["messages"]]
            model = str(body["model"])
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        except (ValueError, KeyError, TypeError) as exc:
            self.stats.http_4xx += 1
            return _error(400, f"bad request body: {type(exc).__name__}", "invalid_request_error")
        if body.get("stream"):
            self.stats.http_4xx += 1
            return _error(400, "the simulated server does not stream", "invalid_request_error")
        if self.o.models and model not in self.o.models:
            self.stats.http_4xx += 1
            return _error(404, f"model {model!r} not found", "not_found_error")

        n_prompt = prompt_tokens(messages)
        now = time.monotonic()
        wait = 0.0
        if self.req_win is not None:
            wait = max(wait, self.req_win.wait_for(1, now))
        if self.tok_win is not None:
            wait = max(wait, self.tok_win.wait_for(n_prompt, now))
        if wait > 0:
            self.stats.http_429 += 1
            if self.o.count_rejected and self.req_win is not None:
                self.req_win.add(1, now)
            headers = {**self._retry_headers(wait), **self._limit_headers(now)}
            return _error(429, "rate limit reached (simulated)", "rate_limit_error", headers)

        text, cut = truncate_tokens(reply_text(self.replies, messages), max_tokens)
        n_completion = count_tokens(text)
        if self.req_win is not None:
            self.req_win.add(1, now)
        if self.tok_win is not None:
            self.tok_win.add(n_prompt + n_completion, now)
        self.stats.tokens += n_prompt + n_completion

        digest = hashlib.sha256(raw).hexdigest()
        nth = self.seen[digest]
        self.seen[digest] += 1
        fault = self._fault(digest, nth)
        delay = self.o.latency_s + self.o.jitter_s * _unit(self.o.seed, "jitter", digest, nth)
        if fault == "slow":
            delay += self.o.slow_s
        if delay > 0:
            await asyncio.sleep(delay)
        headers = self._limit_headers(time.monotonic())
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
        self.stats.ok += 1
        reply = {
            "id": f"chatcmpl-sim-{digest[:16]}-{nth}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "shp-serve-simulated",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if cut else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_completion,
                "total_tokens": n_prompt + n_completion,
            },
        }
        return web.json_response(reply, headers=headers)

    def _fault(self, digest: str, nth: int) -> str | None:
        if not self.o.faults or self.o.fault_rate <= 0:
            return None
        if _unit(self.o.seed, "fault?", digest, nth) >= self.o.fault_rate:
            return None
        kind = self.o.faults[int(_unit(self.o.seed, "fault-kind", digest, nth) * len(self.o.faults))]
        self.stats.faults[kind] += 1
        return kind


def _unit(*parts: object) -> float:
    blob = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2**64


class SimServer:
    """Run the simulated server on 127.0.0.1 (a free port) in a background thread.

    ``with SimServer(rpm=600) as sim: ... sim.base_url ... sim.stats``
    """

    def __init__(self, **options: Any) -> None:
        self.options = SimOptions(**options)
        self.sim = SimApp(self.options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.options.host}:{self.port}/v1"

    @property
    def stats(self) -> dict[str, Any]:
        return self.sim.stats.as_dict()

    def start(self) -> SimServer:
        self._thread = threading.Thread(target=self._run, name="shp-sim-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10.0):
            raise RuntimeError("simulated server did not start within 10 s")
        if self._error is not None:
            raise RuntimeError(f"simulated server failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._runner = web.AppRunner(self.sim.app, access_log=None, shutdown_timeout=0.5)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.options.host, self.options.port)
            loop.run_until_complete(site.start())
            self.port = self._runner.addresses[0][1]
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shp-serve",
        description="A SIMULATED OpenAI-compatible server (test double of the protocol): deterministic "
        "replies, real token counts, RPM/TPM limits over a short window, injected faults.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0, help="fixed latency per reply, seconds")
    p.add_argument("--jitter", type=float, default=0.0, help="extra uniform latency in [0, J) seconds")
    p.add_argument("--rpm", type=float, default=None, help="requests per minute (enforced per --window)")
    p.add_argument("--tpm", type=float, default=None, help="tokens per minute (enforced per --window)")
    p.add_argument("--window", type=float, default=2.0, help="limit window in seconds")
    p.add_argument("--window-kind", default="sliding", choices=("sliding", "fixed"))
    p.add_argument("--count-rejected", action="store_true", help="429'd requests use quota too")
    p.add_argument("--fault-rate", type=float, default=0.0, help="share of requests that get a fault")
    p.add_argument("--faults", default=",".join(FAULT_KINDS), help=f"comma list of {','.join(FAULT_KINDS)}")
    p.add_argument("--slow", type=float, default=1.5, help="extra seconds of a 'slow' fault")
    p.add_argument("--retry-after", default="seconds", choices=RETRY_AFTER_STYLES)
    p.add_argument("--no-ratelimit-headers", action="store_true", help="send no x-ratelimit-* headers")
    p.add_argument("--api-key-env", default="", help="require 'Bearer $VAR' (the NAME of an env var)")
    p.add_argument("--approve-rate", type=float, default=0.3)
    return p


def options_from_args(args: argparse.Namespace) -> SimOptions:
    return SimOptions(
        host=args.host, port=args.port, seed=args.seed, latency_s=args.latency, jitter_s=args.jitter,
        rpm=args.rpm, tpm=args.tpm, window_s=args.window,
        window_kind=args.window_kind, count_rejected=args.count_rejected, fault_rate=args.fault_rate,
        faults=tuple(f for f in args.faults.split(",") if f), slow_s=args.slow, retry_after=args.retry_after,
        ratelimit_headers=not args.no_ratelimit_headers,
        api_key_env=args.api_key_env, approve_rate=args.approve_rate,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        options = options_from_args(args)
    except ValueError as exc:
        print(f"shp-serve: {exc}", flush=True)
        return 2
    sim = SimApp(options)
    print(f"shp-serve: SIMULATED OpenAI-compatible server on http://{options.host}:{options.port}/v1", flush=True)
    web.run_app(sim.app, host=options.host, port=options.port, access_log=None, print=None)
    return 0


def entry() -> None:
    raise SystemExit(main())
