"""``shp-serve``: a SIMULATED OpenAI-compatible server (aiohttp), a test double of the protocol.

It serves ``/v1/chat/completions`` and ``/v1/models`` with deterministic replies (see
``sim_replies``), real token counts, optional latency, RPM/TPM limits enforced over a SHORT
sliding window (``rpm * window_s / 60`` requests per ``window_s`` seconds, so bursts of a whole
minute's quota are refused as real providers do) answered with 429 + ``Retry-After`` /
``retry-after-ms`` / ``x-ratelimit-*``, and injected faults (500, 503, slow reply, dropped
connection, malformed JSON 200 body; by name, a 200 with no text or a request never answered) at
a rate, and optionally *slow faults* (held 5-8 s, then a 504). Faults are deterministic: the n-th
arrival of a given request body faults or not as a function of (seed, body, n), so a retry can
succeed.

It also serves the Batch API (``/v1/files``, ``/v1/batches``; :mod:`sim_batch`): each line is
answered exactly as ``/v1/chat/completions`` would answer its body, on the batch's own pace
(``batch_delay_s``, ``batch_lines_per_s``) and never against the live RPM/TPM windows, with
seeded per-line faults, malformed output lines, expiry and cancellation. Its counters are
``sim.stats["batch"]``.

In tests: ``with SimServer(rpm=600, fault_rate=0.05) as sim: sim.base_url, sim.stats``.

This module holds the options, the in-process runner (:class:`SimServer`) and the ``shp-serve``
command; the routes are in :mod:`sim_app`, the limits in :mod:`sim_limits`, the faults in
:mod:`sim_faults`, the Batch API in :mod:`sim_batch`.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from shp_ray.providers.batch_files import MAX_BYTES, MAX_LINES
from shp_ray.providers.sim_app import SimApp
from shp_ray.providers.sim_faults import ALL_FAULT_KINDS, FAULT_KINDS, parse_range, parse_share
from shp_ray.providers.sim_limits import RETRY_AFTER_STYLES


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
    retry_after: str = "seconds"  # seconds (+ retry-after-ms) | http-date | ms | none
    ratelimit_headers: bool = True  # send x-ratelimit-{limit,remaining,reset}-{requests,tokens}
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

    @property
    def received(self) -> list[list[tuple[str, str]]]:
        """The (role, content) messages of the last ``keep_requests`` chat requests, oldest first."""
        return list(self.sim.received)

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
        "replies, real token counts, RPM/TPM limits over a short window, injected faults, and the Batch API "
        "(/v1/files, /v1/batches) answering each line as /v1/chat/completions would.",
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
    p.add_argument("--faults", default=",".join(FAULT_KINDS), help=f"comma list of {','.join(ALL_FAULT_KINDS)}")
    p.add_argument("--faults-after", type=int, default=0, help="the first N chat requests are never faulted")
    p.add_argument("--slow", type=float, default=1.5, help="extra seconds of a 'slow' fault")
    p.add_argument("--slow-fault-rate", type=parse_share, default=0.0, help="share (0.01 or 1/120) held, then 504")
    p.add_argument("--slow-fault-s", type=parse_range, default=(5.0, 8.0), help="a slow fault's hold: LOW,HIGH s")
    p.add_argument("--retry-after", default="seconds", choices=RETRY_AFTER_STYLES)
    p.add_argument("--no-ratelimit-headers", action="store_true", help="send no x-ratelimit-* headers")
    p.add_argument("--api-key-env", default="", help="require 'Bearer $VAR' (the NAME of an env var)")
    p.add_argument("--approve-rate", type=float, default=0.3)
    b = p.add_argument_group("Batch API", "/v1/files and /v1/batches: their own pace and faults, not the live limits")
    b.add_argument(
        "--batch-delay", type=float, default=0.0, help="seconds each of validating, in_progress, finalizing lasts"
    )
    b.add_argument(
        "--batch-lines-per-s", type=float, default=None, help="lines answered per second per batch (default: no cap)"
    )
    b.add_argument("--batch-expiry", type=float, default=86_400.0, help="seconds after creation a batch expires (24 h)")
    b.add_argument("--batch-fault-rate", type=parse_share, default=0.0, help="share of lines answered with a 500")
    b.add_argument(
        "--batch-malformed-rate", type=parse_share, default=0.0, help="share of output lines written as broken JSON"
    )
    b.add_argument("--batch-max-lines", type=int, default=MAX_LINES, help="requests per input file")
    b.add_argument("--batch-max-bytes", type=int, default=MAX_BYTES, help="bytes per input file")
    b.add_argument("--batch-enqueued-tokens", type=int, default=None, help="prompt tokens of running batches per model")
    return p


def options_from_args(args: argparse.Namespace) -> SimOptions:
    return SimOptions(
        host=args.host, port=args.port, seed=args.seed, latency_s=args.latency, jitter_s=args.jitter,
        rpm=args.rpm, tpm=args.tpm, window_s=args.window,
        window_kind=args.window_kind, count_rejected=args.count_rejected, fault_rate=args.fault_rate,
        faults=tuple(f for f in args.faults.split(",") if f), faults_after=args.faults_after, slow_s=args.slow,
        retry_after=args.retry_after,
        slow_fault_rate=args.slow_fault_rate, slow_fault_s=args.slow_fault_s,
        ratelimit_headers=not args.no_ratelimit_headers,
        api_key_env=args.api_key_env, approve_rate=args.approve_rate,
        batch_delay_s=args.batch_delay, batch_lines_per_s=args.batch_lines_per_s, batch_expiry_s=args.batch_expiry,
        batch_fault_rate=args.batch_fault_rate, batch_malformed_rate=args.batch_malformed_rate,
        batch_max_lines=args.batch_max_lines, batch_max_bytes=args.batch_max_bytes,
        batch_enqueued_tokens=args.batch_enqueued_tokens,
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
