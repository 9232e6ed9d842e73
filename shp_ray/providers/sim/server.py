"""``shp-serve``: a SIMULATED OpenAI-compatible server (aiohttp), a test double of the protocol.

It serves ``/v1/chat/completions`` and ``/v1/models`` with deterministic replies (see
:mod:`replies`), real token counts, optional latency, RPM/TPM limits enforced over a SHORT
sliding window (``rpm * window_s / 60`` requests per ``window_s`` seconds, so bursts of a whole
minute's quota are refused as real providers do) answered with 429 + ``Retry-After`` /
``retry-after-ms`` / ``x-ratelimit-*``, and injected faults (500, 503, slow reply, dropped
connection, malformed JSON 200 body; by name, a 200 with no text or a request never answered) at
a rate, and optionally *slow faults* (held 5-8 s, then a 504). Faults are deterministic: the n-th
arrival of a given request body faults or not as a function of (seed, body, n), so a retry can
succeed.

It also serves the Batch API (``/v1/files``, ``/v1/batches``; :mod:`batch`): each line is
answered exactly as ``/v1/chat/completions`` would answer its body, on the batch's own pace
(``batch_delay_s``, ``batch_lines_per_s``) and never against the live RPM/TPM windows, with
seeded per-line faults, malformed output lines, expiry and cancellation. Its counters are
``sim.stats["batch"]``.

In tests: ``with SimServer(rpm=600, fault_rate=0.05) as sim: sim.base_url, sim.stats``.

This module holds the in-process runner (:class:`SimServer`) and the ``shp-serve`` command; the
options are in :mod:`options` (no aiohttp: the config imports them), the routes in :mod:`app`,
the limits in :mod:`limits`, the faults in :mod:`faults`, the Batch API in :mod:`batch`.
"""

from __future__ import annotations

import argparse
from typing import Any

from aiohttp import web

from shp_ray.providers.app_thread import AppThread
from shp_ray.providers.batch_files import MAX_BYTES, MAX_LINES
from shp_ray.providers.sim.app import SimApp
from shp_ray.providers.sim.faults import ALL_FAULT_KINDS, FAULT_KINDS, parse_range, parse_share
from shp_ray.providers.sim.limits import RATELIMIT_DIALECTS, RETRY_AFTER_STYLES
from shp_ray.providers.sim.options import SimOptions


class SimServer:
    """Run the simulated server on 127.0.0.1 (a free port) in a background thread.

    ``with SimServer(rpm=600) as sim: ... sim.base_url ... sim.stats``
    """

    def __init__(self, **options: Any) -> None:
        self.options = SimOptions(**options)
        self.sim = SimApp(self.options)
        self._host = AppThread(self.sim.app, host=self.options.host, port=self.options.port, name="shp-sim-server")

    @property
    def port(self) -> int:
        return self._host.port

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
        self._host.start()
        return self

    def stop(self) -> None:
        self._host.stop()

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
    p.add_argument("--no-ratelimit-headers", action="store_true", help="send no rate-limit headers")
    p.add_argument("--ratelimit-dialect", default="openai", choices=RATELIMIT_DIALECTS, help="whose header names")
    p.add_argument(
        "--fault-quota", default="charged", choices=("charged", "refunded"), help="do 5xx faults and drops use quota"
    )
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
        ratelimit_headers=not args.no_ratelimit_headers, ratelimit_dialect=args.ratelimit_dialect,
        fault_quota=args.fault_quota,
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
