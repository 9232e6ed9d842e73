"""``shp-bench generation {embed|ratelimit|memory|cluster} [options]``: one JSON line printed last.

- ``embed``: the same texts through bare sentence-transformers (one batched
  ``encode``), through the torch-only encoder of the same weights, and through
  the pipeline's embedding actor (one Ray call per draft, as the trajectory
  workers make them, micro-batched inside the actor); and each route's cold
  start in a fresh process. Target: pipeline >= 80% of bare texts/s.
- ``ratelimit``: a generation against the simulated server (``shp-serve``,
  a test double) enforcing a known RPM; R requests cannot finish before
  R / RPM minutes. Target: generation time <= 1.15 x that bound.
- ``memory``: peak RSS summed over the driver and every Ray process while
  generating N streamed scenarios (sim server, lexical judge, and by default
  the ``fake-hash`` embedder -- NOT a language model, so that the run measures
  the pipeline's memory, not the model's). Target: no growth with N.
- ``cluster``: 1 vs 2 vs 3 nodes of a local Ray cluster (:mod:`bench.cluster`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any

from bench import cluster
from bench.sim_process import SIM, ServerProcess, stream

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _texts(n: int) -> list[str]:
    """n distinct draft-like paragraphs (the sim server's Writer replies to real HotpotQA questions)."""
    from shp_ray.generation.datasets import load_scenarios
    from shp_ray.providers.sim.replies import ReplyOptions, writer_draft

    qs = [s.question for s in load_scenarios("hotpotqa", limit=max(1, n // 6 + 1))]
    out = [writer_draft(ReplyOptions(seed=0), q, t) for q in qs for t in range(1, 7)]
    return list(dict.fromkeys(out))[:n]


def bench_embed(a: argparse.Namespace) -> dict[str, Any]:
    import ray

    from shp_ray.generation.actors import EmbedActor
    from shp_ray.generation.embedder import Embedder, resolve_model
    from shp_ray.generation.generate import start_ray

    texts = _texts(a.texts)
    path = resolve_model(a.model)
    # Cold start, each in a fresh process: imports, weights, the first text (what every embedding actor pays).
    cold = {name: _cold_start(name, path) for name in ("sentence_transformers", "torch_only")}
    # Bare: the model in this process, both threads, one batched encode of every text, by both routes.
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from shp_ray.generation.bert_encoder import BertEncoder, fits

    torch.set_num_threads(2)
    model = SentenceTransformer(path, device="cpu")
    model.encode(texts[:8], batch_size=a.batch_size)
    t = time.perf_counter()
    ref = model.encode(texts, batch_size=a.batch_size, convert_to_numpy=True, show_progress_bar=False)
    bare_s = time.perf_counter() - t
    del model
    own_s, own_diff = None, None
    if fits(path):
        own = BertEncoder(path)
        own.encode(texts[:8], a.batch_size)
        t = time.perf_counter()
        got = own.encode(texts, a.batch_size)
        own_s = time.perf_counter() - t
        unit = got / np.linalg.norm(got, axis=1, keepdims=True)
        own_diff = float(np.abs(unit - ref / np.linalg.norm(ref, axis=1, keepdims=True)).max())
        del own
    started = start_ray(None)
    try:
        actor = EmbedActor.options(num_cpus=2, max_concurrency=10_000).remote(a.model, a.batch_size, 2)  # type: ignore[attr-defined]  # a Ray ActorClass
        info = ray.get(actor.info.remote())
        t = time.perf_counter()
        ray.get([actor.embed.remote(x) for x in texts])  # one call per draft, all in flight
        pipe_s = time.perf_counter() - t
        after = ray.get(actor.info.remote())
        ray.get([actor.embed.remote(x) for x in texts[:50]])  # cached: must not encode again
        again = ray.get(actor.info.remote())
    finally:
        if started:
            ray.shutdown()
    return {
        "bench": "generation.embed",
        "model": Embedder(a.model).name,
        "texts": len(texts),
        "bare_texts_per_s": round(len(texts) / bare_s, 2),
        "torch_only_texts_per_s": None if own_s is None else round(len(texts) / own_s, 2),
        "torch_only_max_abs_diff": own_diff,  # against sentence-transformers, unit vectors
        "cold_start_s": cold,
        "pipeline_texts_per_s": round(len(texts) / pipe_s, 2),
        "ratio": round(bare_s / pipe_s, 3),
        "pipeline_batches": int(after["batches"]) - int(info["batches"]),
        "encoded": int(after["encoded"]) - int(info["encoded"]),
        "re_encoded_on_repeat": int(again["encoded"]) - int(after["encoded"]),
    }


def _cold_start(route: str, path: str) -> float:
    """Seconds from a fresh interpreter to the first embedded text, loading the model by ``route``."""
    import subprocess
    import sys

    load = {
        "sentence_transformers": "from sentence_transformers import SentenceTransformer as M; "
        "M(p, device='cpu').encode(['warm-up'])",
        "torch_only": "from shp_ray.generation.bert_encoder import BertEncoder as M; M(p).encode(['warm-up'])",
    }[route]
    code = f"import time; t = time.perf_counter(); p = {path!r}; {load}; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return round(float(done.stdout.strip().splitlines()[-1]), 2)


def _run(
    a: argparse.Namespace, sim_opts: dict[str, Any], n: int, embedder: str
) -> tuple[dict, dict, float, dict[str, float]]:
    from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
    from shp_ray.providers.base import ProviderSpec
    from storage.parts import Store

    root = tempfile.mkdtemp(prefix="shp-bench-gen-")
    try:
        cfg = GenerationConfig(
            max_rounds=a.rounds, embedder=embedder, judge="lexical", workers=a.workers, concurrency=a.concurrency,
            flush_every=a.flush_every,
        )  # fmt: skip
        with ServerProcess(SIM, sim_opts) as sim:
            spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-model", rpm=sim_opts.get("rpm"))
            peak = _PeakRss(exclude=sim.proc.pid)
            with peak:
                s = generate(stream(n), cfg, Store(root), spec, RunOptions(total=n, progress=False))
            stats = sim.finish()
        return s.to_dict(), stats, peak.peak_mb, peak.at_peak
    finally:
        shutil.rmtree(root, ignore_errors=True)


class _PeakRss:
    """Peak of the summed RSS of this process and all its descendants (Ray's included), sampled.

    The simulated server's process is excluded: it is the "provider", not the pipeline.
    """

    def __init__(self, every_s: float = 0.25, exclude: int | None = None) -> None:
        self.every_s, self.peak_mb, self.exclude = every_s, 0.0, exclude
        self.at_peak: dict[str, float] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            parts: dict[str, float] = {}
            for p in [me, *me.children(recursive=True)]:
                if p.pid == self.exclude:
                    continue
                with contextlib.suppress(psutil.Error):
                    rss = p.memory_info().rss
                    total += rss
                    name = p.name() if p.pid != me.pid else "driver"
                    parts[name] = parts.get(name, 0.0) + rss / 2**20
            if total / 2**20 > self.peak_mb:
                self.peak_mb = total / 2**20
                self.at_peak = {k: round(v, 1) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:8]}
            self._stop.wait(self.every_s)

    def __enter__(self) -> _PeakRss:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def bench_ratelimit(a: argparse.Namespace) -> dict[str, Any]:
    summary, stats, _, _ = _run(
        a, {"rpm": a.rpm, "window_s": a.window_s, "latency_s": a.latency_s}, a.scenarios, a.model
    )
    requests = a.scenarios * (2 * a.rounds - 1)  # writer every round, critic all but the last
    bound_s = requests / a.rpm * 60.0
    return {
        "bench": "generation.ratelimit",
        "scenarios": a.scenarios,
        "rounds": a.rounds,
        "requests": requests,
        "rpm": a.rpm,
        "bound_s": round(bound_s, 2),
        "generation_s": round(float(summary["generation_s"]), 2),
        "elapsed_s": round(float(summary["elapsed_s"]), 2),
        "ratio": round(float(summary["generation_s"]) / bound_s, 3),
        "server_ok": stats["ok"],
        "server_429": stats["http_429"],
        **_timeline(stats["timeline"]),
        "failed": summary["failed"],
        "embedder": summary["embedder"],
    }


def _timeline(timeline: list[list[int]]) -> dict[str, Any]:
    """Where the time goes, from the server's per-second counts: the ramp, the steady state, the tail."""
    # the preflight call comes first, then nothing while Ray starts: the generation's seconds follow
    start = 0
    if len(timeline) > 1 and timeline[1][0] == 0:
        start = next((i for i, (a, _) in enumerate(timeline) if i > 0 and a > 0), len(timeline))
    admitted = [a for a, _ in timeline[start:]]
    mid = admitted[10:-10] or admitted
    return {
        "admitted_per_s": admitted,
        "refused_per_s": [r for _, r in timeline[start:]],
        "first_10s_rps": round(sum(admitted[:10]) / max(1, len(admitted[:10])), 2),
        "steady_rps": round(sum(mid) / len(mid), 2) if mid else 0.0,
    }


def bench_memory(a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"bench": "generation.memory", "rounds": a.rounds, "embedder": None, "runs": []}
    for n in a.sizes:
        summary, stats, peak, at_peak = _run(a, {"latency_s": a.latency_s}, n, a.model)
        out["embedder"] = summary["embedder"]
        out["runs"].append(
            {
                "scenarios": n,
                "generated": summary["generated"],
                "requests": stats["ok"],
                "peak_rss_mb": round(peak, 1),
                "generation_s": round(float(summary["generation_s"]), 1),
                "rss_mb_at_peak": at_peak,
            }
        )
    runs = out["runs"]
    out["growth"] = round(runs[-1]["peak_rss_mb"] / runs[0]["peak_rss_mb"], 3) if len(runs) > 1 else None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="shp-bench generation")
    sub = p.add_subparsers(dest="mode", required=True)
    e = sub.add_parser("embed", help="embedding throughput and cold start: sentence-transformers, torch only, pipeline")
    e.add_argument("--texts", type=int, default=600)
    e.add_argument("--model", default="default")
    e.add_argument("--batch-size", type=int, default=64)
    for name, helptext in (("ratelimit", "generation time vs R/RPM"), ("memory", "peak RSS at several sizes")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("--rounds", type=int, default=6 if name == "ratelimit" else 3)
        s.add_argument("--workers", type=int, default=2)
        s.add_argument("--concurrency", type=int, default=32)
        s.add_argument("--flush-every", type=int, default=64)
        s.add_argument("--latency-s", type=float, default=0.05 if name == "ratelimit" else 0.0)
        s.add_argument("--model", default="default" if name == "ratelimit" else "fake-hash")
    r = sub.choices["ratelimit"]
    r.add_argument("--scenarios", type=int, default=200)
    r.add_argument("--rpm", type=float, default=1200.0)
    r.add_argument("--window-s", type=float, default=2.0)
    sub.choices["memory"].add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    cluster.add_parser(sub)
    a = p.parse_args(argv)
    modes = {"embed": bench_embed, "ratelimit": bench_ratelimit, "memory": bench_memory}
    result = modes.get(a.mode, cluster.bench_cluster)(a)
    print(json.dumps(result, sort_keys=True))
    return 0
