"""``shp-bench batch [--scenarios 200 --rounds 6 ...]``: the same generation live and in batch mode.

Both runs go against the simulated server (``shp-serve``, a test double, not a model): live at a
told rate limit (``--rpm``, the bound R / RPM), batch through its Batch API with ``--batch-delay``
seconds in each of validating / in_progress / finalizing. Printed, per mode: wall time, the HTTP
requests the client made, the batches, the tokens, and what they cost in dollars at the price
table's entry for ``--price-model`` (live price vs batch price). One JSON line, printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def _tokens(root: Path) -> dict[str, int]:
    from storage.parts import Store

    rounds = Store(root).read("rounds")
    cols = ("writer_prompt_tokens", "writer_completion_tokens", "critic_prompt_tokens", "critic_completion_tokens")
    total = {c: int(sum(v or 0 for v in rounds[c].to_pylist())) for c in cols}
    return {
        "prompt_tokens": total["writer_prompt_tokens"] + total["critic_prompt_tokens"],
        "completion_tokens": total["writer_completion_tokens"] + total["critic_completion_tokens"],
    }


def _run(a: argparse.Namespace, batch: bool, root: Path) -> dict[str, Any]:
    from shp_ray.generation.datasets import load_scenarios
    from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
    from shp_ray.providers.base import ProviderSpec
    from shp_ray.providers.sim.server import SimServer
    from storage.parts import Store

    scenarios = load_scenarios("hotpotqa", limit=a.scenarios)
    cfg = GenerationConfig(max_rounds=a.rounds, embedder="fake-hash", workers=2, concurrency=a.concurrency)
    server = {"batch_delay_s": a.batch_delay} if batch else {"rpm": a.rpm, "latency_s": a.latency_s}
    with SimServer(**server) as sim:
        spec = ProviderSpec(
            kind="sim", base_url=sim.base_url, model="sim-model", rpm=None if batch else a.rpm,
            batch=batch, batch_poll_s=a.poll_s,
        )  # fmt: skip
        t0 = time.perf_counter()
        summary = generate(scenarios, cfg, Store(root), spec, RunOptions(progress=False))
        wall = time.perf_counter() - t0
        stats = sim.stats
    b: dict[str, Any] = summary.batch  # the lockstep's counters
    if batch:  # upload + create per batch, every poll, output + error file downloads per batch
        http = 2 * int(b["batches_created"]) + int(b["polls"]) + 2 * int(b["steps"]) + int(b["live_fallbacks"])
    else:
        http = int(stats["requests"])
    return {
        "mode": "batch" if batch else "live",
        "generated": summary.generated,
        "wall_s": round(wall, 2),
        "generation_s": round(summary.generation_s, 2),
        "http_requests": http,
        "chat_requests_at_server": int(stats["requests"]),
        "batches": int(b.get("batches_created", 0)),
        "batch_lines": int(stats["batch"]["lines_processed"]),
        "live_fallbacks": int(b.get("live_fallbacks", 0)),
        **_tokens(root),
    }


def _dollars(run: dict[str, Any], kind: str, model: str) -> dict[str, Any]:
    """What the run's tokens cost at the shipped price table's entry for (kind, model), as paid."""
    from shp_ray.providers.prices import default_prices

    price = default_prices().lookup(kind, model)
    if price is None:
        return {"usd": None}
    live = (
        int(run["prompt_tokens"]) * price.input_per_mtok + int(run["completion_tokens"]) * price.output_per_mtok
    ) / 1e6
    paid = live * (1 - price.batch_discount) if run["mode"] == "batch" else live
    return {"usd": round(paid, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shp-bench batch", description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--rpm", type=float, default=1200.0, help="the live run's told (and enforced) rate limit")
    ap.add_argument("--latency-s", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--batch-delay", type=float, default=2.0, help="seconds per batch status phase")
    ap.add_argument("--poll-s", type=float, default=0.5)
    ap.add_argument("--price-model", default="gpt-4o-mini", help="price the tokens as this openai model's")
    a = ap.parse_args(argv)
    from shp_ray.generation.generate import start_ray

    started = start_ray()
    tmp = Path(tempfile.mkdtemp(prefix="shp-bench-batch-"))
    try:
        runs = [_run(a, False, tmp / "live"), _run(a, True, tmp / "batch")]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if started:
            import ray

            ray.shutdown()
    for run in runs:
        run.update(_dollars(run, "openai", a.price_model))
    live, batch = runs
    out = {
        "bench": "batch",
        "server": "shp-serve (simulated test double, not a model)",
        "scenarios": a.scenarios,
        "rounds": a.rounds,
        "runs": runs,
        "http_requests_ratio": round(batch["http_requests"] / max(1, live["http_requests"]), 4),
        "wall_ratio": round(batch["wall_s"] / max(1e-9, live["wall_s"]), 3),
        "priced_as": f"openai/{a.price_model} (shipped price table; the simulated server itself costs $0)",
        "usd_ratio": None if live["usd"] is None else round(batch["usd"] / max(1e-12, live["usd"]), 3),
        "same_tokens": (live["prompt_tokens"], live["completion_tokens"])
        == (batch["prompt_tokens"], batch["completion_tokens"]),
    }
    print(json.dumps(out))
    return 0
