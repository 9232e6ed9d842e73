"""``shp-bench <name> [args]``: benchmarks that print ONE JSON line last.

Each benchmark is a module ``bench.<name>`` with ``main(argv) -> int``,
imported only when asked for (torch, Ray and DuckDB are slow to import).
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "ratelimit": "the rate-limit-aware client against an OpenAI-compatible server",
    "replay": "DuckDB replay of every policy vs the per-trajectory Python loop",
    "generate": "the embedded model's real sweep (calls/hour, tokens/s) vs llama.cpp's own benchmark (--reference)",
    "generation": "generation on Ray into the store (throughput, embedding, memory)",
    "batch": "the same generation live and through the Batch API (requests, batches, wall time, dollars)",
    "objectstore": "the store on S3 (moto on 127.0.0.1): DuckDB via registered datasets vs fsspec vs local disk",
    "report": "the HTML report's open time in headless Chromium (N trajectories, the browser on demand)",
    "sandbox": "one sandbox run's wall time: bare interpreter, with and without namespaces, run_check, run_examples",
    "correctness": "the correctness views (pass_at_stop, oracle, McNemar, break rates) on a synthetic code store",
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in BENCHMARKS:
        lines = [f"  {name:<11} {what}" for name, what in BENCHMARKS.items()]
        print("usage: shp-bench {" + "|".join(BENCHMARKS) + "} [args]\n" + "\n".join(lines), file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        module = importlib.import_module(f"bench.{args[0]}")
    except ModuleNotFoundError as exc:
        if exc.name != f"bench.{args[0]}":
            raise
        print(f"shp-bench {args[0]}: not built yet.", file=sys.stderr)
        return 2
    return int(module.main(args[1:]) or 0)


def entry() -> None:
    raise SystemExit(main())
