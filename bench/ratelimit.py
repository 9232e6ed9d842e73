"""``shp-bench ratelimit``: N chat calls through the rate-limit-aware client (or ``--naive``:
plain AsyncOpenAI + a semaphore with the SDK's default retries). Prints ONE JSON line last:
{"requests", "ok", "failed", "elapsed_s", "throughput_rps", "http_429", "retries", ...}.

``--serve`` starts the SIMULATED server (``shp-serve``'s test double) in-process with a
short-window limit and injected faults, so capacity is known and the server's own counts
(requests admitted, 429s, faults) are reported next to the client's; ``--side-by-side`` runs the
naive baseline and the client one after the other against identical fresh servers.

``--hostile`` is the server of issue 30: 40 requests per 5 s window (480 rpm), 5 % faults (4 % of
500 / 503 / dropped / malformed 200, 1 % held 5-8 s then a 504), Retry-After styles in turn, 5xx
and drops not counted against the quota, 240 requests. ``--peers`` runs, against identical fresh
servers in the same process, the client told the limit (rpm and window), the client not told, and the
peers (:mod:`ratelimit_peers`: LiteLLM's Router, the openai SDK + aiolimiter; the ``bench`` extra),
and prints them side by side in one line.

``--server headerless --latency-ms N`` runs against a server that is not ours instead
(:mod:`headerless`, a test double of its own: 40 requests per 5 s sliding window, no ``x-ratelimit-*``
headers, every Retry-After style in turn, 5 % faults with 5-8 s stalls, replies after N ms); with
``--peers`` or alone, told or not (``--rpm 480 --rate-window 5``). Its counts include ``paid_twice``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import Counter
from typing import Any

from bench.ratelimit_calls import bench_request, fire, summary
from shp_ray.providers.base import ProviderError, ProviderSpec
from shp_ray.providers.sim.faults import parse_range, parse_share


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shp-bench ratelimit", description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default="", help="OpenAI-compatible base URL (…/v1); omit with --serve")
    p.add_argument("--model", default="sim-1")
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--rpm", type=float, default=None, help="tell the client the requests/min limit")
    p.add_argument("--tpm", type=float, default=None, help="tell the client the tokens/min limit")
    p.add_argument("--rate-window", type=float, default=None, help="tell the client the window the rpm applies over")
    p.add_argument("--concurrency", type=int, default=64, help="max calls in flight (a cap; pacing sets the rate)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--max-retries", type=int, default=8)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--api-key-env", default="", help="NAME of the env var holding the key")
    p.add_argument(
        "--deadline",
        default="adaptive",
        choices=("adaptive", "off"),
        help="hedging asked for: hedge, abandon and retry stuck attempts",
    )
    p.add_argument("--naive", action="store_true", help="baseline: AsyncOpenAI + semaphore, default retries")
    p.add_argument("--side-by-side", action="store_true", help="run --naive first, then the client (needs --serve)")
    p.add_argument("--hostile", action="store_true", help="the hostile server of issue 30 (implies --serve)")
    p.add_argument("--peers", action="store_true", help="told, untold, LiteLLM Router, openai+aiolimiter (--serve)")
    p.add_argument(
        "--server", default="sim", choices=("sim", "headerless"), help="headerless: the terse double (implies --serve)"
    )
    p.add_argument("--latency-ms", type=float, default=None, help="--server headerless: every reply's latency")
    g = p.add_argument_group("--serve: an in-process SIMULATED server (test double)")
    g.add_argument("--serve", action="store_true")
    g.add_argument("--serve-rpm", type=float, default=None, help="the server's true requests/min")
    g.add_argument("--serve-tpm", type=float, default=None)
    g.add_argument("--serve-window", type=float, default=2.0, help="seconds over which the limit is enforced")
    g.add_argument("--serve-fault-rate", type=float, default=0.0)
    g.add_argument("--serve-faults", default="", help="comma list of fault kinds (default: the server's mix)")
    g.add_argument("--serve-latency", type=float, default=0.0)
    g.add_argument("--serve-slow", type=float, default=1.0, help="seconds a 'slow' fault adds")
    g.add_argument("--serve-slow-fault-rate", type=parse_share, default=0.0, help="share held, then 504 (1/120)")
    g.add_argument("--serve-slow-fault-s", type=parse_range, default=(5.0, 8.0), help="a slow fault's hold: LOW,HIGH")
    g.add_argument("--serve-window-kind", default="sliding", help="sliding | fixed")
    g.add_argument("--serve-count-rejected", action="store_true", help="429'd requests use quota too")
    g.add_argument("--serve-retry-after", default="seconds", help="seconds | http-date | ms | none | rotate")
    g.add_argument("--serve-no-ratelimit-headers", action="store_true", help="a terse server: no rate-limit headers")
    g.add_argument("--serve-ratelimit-dialect", default="openai", help="openai (x-ratelimit-*) | anthropic")
    g.add_argument("--serve-fault-quota", default="charged", help="charged | refunded (5xx and drops use no quota)")
    g.add_argument("--seed", type=int, default=0)
    return p


async def run_client(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    from shp_ray.providers.registry import make_provider

    spec = ProviderSpec(
        kind="openai",
        base_url=base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        rpm=args.rpm,
        tpm=args.tpm,
        rate_window_s=args.rate_window,
        max_concurrency=args.concurrency,
        max_retries=args.max_retries,
        timeout_s=args.timeout,
        hedge=args.deadline == "adaptive",
    )
    provider = make_provider(spec)
    failed = 0
    t0 = time.monotonic()
    async with provider:  # type: ignore[attr-defined]  # an HTTP provider's
        results = await asyncio.gather(
            *(provider.complete(bench_request(i, args.model, args.max_tokens)) for i in range(args.requests)),
            return_exceptions=True,
        )
        elapsed = time.monotonic() - t0
        limiter = await provider.limiter_snapshot()  # type: ignore[attr-defined]  # an HTTP provider's
    errors = Counter(type(r).__name__ for r in results if isinstance(r, BaseException))
    failed = sum(errors.values())
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, ProviderError):
            raise r
    stats = provider.stats  # type: ignore[attr-defined]  # an HTTP provider's
    deadline = provider.deadline  # type: ignore[attr-defined]  # an HTTP provider's
    return summary("client", args.requests, failed, elapsed, stats.get("http_429", 0), stats.get("retries", 0)) | {
        "errors": dict(errors),
        "hedges": stats.get("hedges", 0),
        "abandoned": stats.get("abandoned", 0),
        "deadline": None if deadline is None else deadline.snapshot(),
        "limiter": {k: limiter.get(k) for k in _LIMITER_KEYS if k in limiter},
    }


# what the limiter learned and did: its lanes (the window it paces by), and how it got there
_LIMITER_KEYS: tuple[str, ...] = (
    "lanes",
    "lane_width_s",
    "window_learned",
    "window_narrowed",
    "window_shrunk",
    "margin_raised",
)
_LIMITER_KEYS += ("synced", "decreases", "rate_cuts", "learned_rps", "lanes_given_back", "refunds_distrusted")
_LIMITER_KEYS += ("lane_margin_s", "margin_eased", "window_probed")


async def run_naive(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    import httpx2
    from openai import AsyncOpenAI

    seen: Counter[str] = Counter()

    async def on_request(request: Any) -> None:
        seen["attempts"] += 1

    async def on_response(response: Any) -> None:
        if response.status_code == 429:
            seen["http_429"] += 1

    http = httpx2.AsyncClient(event_hooks={"request": [on_request], "response": [on_response]})
    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    client = AsyncOpenAI(base_url=base_url, api_key=key or "no-key", http_client=http, timeout=args.timeout)

    async def one(i: int) -> object:
        req = bench_request(i, args.model, args.max_tokens)
        return await client.chat.completions.create(
            model=req.model,
            messages=req.openai_messages(),
            max_tokens=req.max_tokens,
        )

    failed, elapsed = await fire(args.requests, args.concurrency, one)
    await client.close()
    retries = max(0, seen["attempts"] - args.requests)
    return summary("naive", args.requests, failed, elapsed, seen["http_429"], retries)


HOSTILE = {  # issue 30's server: 40 requests / 5 s, 5 % faults incl. 5-8 s holds, every Retry-After style
    "serve_rpm": 480.0,
    "serve_window": 5.0,
    "serve_fault_rate": 0.04,
    "serve_faults": "500,503,drop,malformed",
    "serve_slow_fault_rate": 0.01,
    "serve_slow_fault_s": (5.0, 8.0),
    "serve_retry_after": "rotate",
    "serve_fault_quota": "refunded",
    "requests": 240,
}


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "rpm": args.serve_rpm,
        "tpm": args.serve_tpm,
        "window_s": args.serve_window,
        "fault_rate": args.serve_fault_rate,
        "latency_s": args.serve_latency,
        "slow_s": args.serve_slow,
        "slow_fault_rate": args.serve_slow_fault_rate,
        "slow_fault_s": args.serve_slow_fault_s,
        "seed": args.seed,
        "retry_after": args.serve_retry_after,
        "window_kind": args.serve_window_kind,
        "count_rejected": args.serve_count_rejected,
        "ratelimit_headers": not args.serve_no_ratelimit_headers,
        "ratelimit_dialect": args.serve_ratelimit_dialect,
        "fault_quota": args.serve_fault_quota,
        **({"faults": tuple(f for f in args.serve_faults.split(",") if f)} if args.serve_faults else {}),
    }


def _measure(args: argparse.Namespace, runner: Any) -> dict[str, Any]:
    if not args.serve:
        return asyncio.run(runner(args, args.base_url))
    if args.server == "headerless":
        return _measure_headerless(args, runner)
    from bench.sim_process import SIM, ServerProcess

    options = server_options(args)
    # The server in its own process: its CPU does not slow the client measured (or time its arrivals).
    with ServerProcess(SIM, options) as sim:
        result = asyncio.run(runner(args, sim.base_url))
        stats = sim.finish()
    stats.pop("timeline")  # per second; the generation bench reads it, this line stays short
    stats.pop("batch")  # the Batch API's counters: this bench sends only live requests
    admitted = stats["requests"] - stats["http_429"]
    # A call is paid for when the server serves it, whether or not the client still reads the reply
    # (an abandoned or hedged attempt that completed anyway); the minimum is one per request.
    result["paid_calls"] = stats["ok"]
    if result["http_429"] < 0:  # a peer that does not count its own attempts: the server's counts
        result["http_429"], result["retries"] = stats["http_429"], stats["requests"] - args.requests
    result["paid_calls_wasted"] = stats["ok"] - result["ok"]
    result["server"] = {"simulated": True, **{k: v for k, v in options.items() if v is not None}, **stats}
    if args.serve_rpm:
        capacity = args.serve_rpm / 60.0
        result["capacity_rps"] = round(capacity, 3)
        # the share of the server's request budget the run used (faulted requests consume it too)
        result["utilisation"] = round(admitted / result["elapsed_s"] / capacity, 3)
        # the same for the answers the caller got: extra attempts (retries, hedges) cannot raise it
        result["goodput"] = round(result["ok"] / result["elapsed_s"] / capacity, 3)
        result["http_429_share"] = round(stats["http_429"] / args.requests, 3)
    return result


def _measure_headerless(args: argparse.Namespace, runner: Any) -> dict[str, Any]:
    from bench.sim_process import ServerProcess

    options = {"latency_s": (args.latency_ms or 0.0) / 1000.0, "seed": args.seed}
    with ServerProcess("bench.headerless:HeaderlessServer", options) as srv:
        result = asyncio.run(runner(args, srv.base_url))
        stats = srv.finish()
    events = stats.pop("events")  # every arrival; the line keeps the run's last ones
    stats["last_events"] = events[-12:]
    capacity = stats["limit"] / stats["window_s"]
    result["paid_calls"] = stats["ok"]
    result["paid_twice"] = stats["paid_twice"]
    if result["http_429"] < 0:  # a peer that does not count its own attempts: the server's counts
        result["http_429"], result["retries"] = stats["http_429"], stats["requests"] - args.requests
    result["capacity_rps"] = round(capacity, 3)
    result["utilisation"] = round(stats["admitted"] / result["elapsed_s"] / capacity, 3)
    result["goodput"] = round(result["ok"] / result["elapsed_s"] / capacity, 3)
    result["server"] = stats
    return result


def _peers(args: argparse.Namespace) -> dict[str, Any]:
    """Told, untold and the peers against identical fresh servers, one after the other: one line."""
    from bench import ratelimit_peers

    told_rpm, told_window = args.rpm or args.serve_rpm, args.rate_window or args.serve_window
    told = argparse.Namespace(**{**vars(args), "rpm": told_rpm, "rate_window": told_window})
    untold = argparse.Namespace(**{**vars(args), "rpm": None, "tpm": None, "rate_window": None})
    out: dict[str, Any] = {"bench": "ratelimit", "requests": args.requests}
    for name, run_args, runner in (("told", told, run_client), ("untold", untold, run_client)):
        out[name] = _measure(run_args, runner)
    for name, peer in ratelimit_peers.PEERS.items():
        missing = ratelimit_peers.missing(name)
        if missing:
            print(f"shp-bench ratelimit: {name} skipped: {missing}", file=sys.stderr, flush=True)
            out[name] = {"skipped": missing}
        else:
            out[name] = _measure(told, peer)
    keep = ("ok", "failed", "elapsed_s", "goodput", "utilisation", "http_429", "paid_calls", "paid_twice")
    out["side_by_side"] = {k: {f: v.get(f) for f in keep} for k, v in out.items() if isinstance(v, dict)}
    out["server"] = out["told"]["server"] | {"requests": None, "ok": None}  # the options; counts are per run
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.server == "headerless":  # its limit is fixed: 40 per 5 s (what --peers tells the told client)
        args.serve, args.serve_rpm, args.serve_window = True, 480.0, 5.0
        if "--requests" not in {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}:
            args.requests = HOSTILE["requests"]
    elif args.latency_ms is not None:
        print("shp-bench ratelimit: --latency-ms needs --server headerless", file=sys.stderr)
        return 2
    if args.hostile:
        given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}
        for key, value in HOSTILE.items():  # the preset, unless the flag was given
            if "--" + key.replace("_", "-") not in given:
                setattr(args, key, value)
        args.serve = True
    if not args.serve and not args.base_url:
        print("shp-bench ratelimit: give --base-url URL or --serve", file=sys.stderr)
        return 2
    if args.requests < 1:
        print("shp-bench ratelimit: --requests must be >= 1", file=sys.stderr)
        return 2
    if args.side_by_side and not args.serve:
        print("shp-bench ratelimit: --side-by-side needs --serve (two identical fresh servers)", file=sys.stderr)
        return 2
    if args.peers and not (args.serve and args.serve_rpm):
        print("shp-bench ratelimit: --peers needs --serve --serve-rpm N (or --hostile)", file=sys.stderr)
        return 2
    if args.peers:
        result = _peers(args)
    elif args.side_by_side:
        naive = _measure(args, run_naive)
        print(json.dumps(naive), flush=True)
        result = _measure(args, run_client) | {"naive": naive}
    else:
        result = _measure(args, run_naive if args.naive else run_client)
    print(json.dumps(result), flush=True)
    return 0
