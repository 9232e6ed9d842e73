"""Time the correctness views (pass_at_stop, the oracle, McNemar, break rates) on an imported code store.

shp-bench correctness --trajectories 10000 --rounds 4 [--keep DIR | --store DIR]

Writes a SYNTHETIC code store through ``shp-import`` (random 8-d embeddings, a ``hidden_pass`` and a
``visible_pass`` per round, the dev/test split 1:3; drafts are placeholders), or takes one (``--store``), then, in
a fresh process as a new ``shp-query`` would: ``connect_s`` (analysis.connect with every standard and family
policy, the verifier reading the visible tests), ``replay_s`` (the replay's rows at every score: what the views
read, for scale), ``summary_s`` (``correctness_summary`` read whole),
``compare_s`` (analysis.stats.correctness.compare_pass: the same with the McNemar and interval tests in Python),
``by_round_s`` and ``break_rate_s``. Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_store(folder: Path, trajectories: int, rounds: int, seed: int = 0) -> Path:
    """A synthetic code store of ``trajectories`` x ``rounds`` (through the importer, as a user's traces are)."""
    from shp_ray.importer.cli import main as shp_import

    rng = np.random.default_rng(seed)
    path = folder / "synthetic-code-traces.jsonl"
    with path.open("w") as fh:
        for i in range(trajectories):
            passes = rng.random() < 0.6
            out = []
            for t in range(1, rounds + 1):
                passes = passes if rng.random() < 0.8 else not passes
                visible = 1.0 if passes or rng.random() < 0.2 else float(rng.integers(0, 3)) / 3
                out.append({"draft": f"def f{i}(): return {t}  # synthetic", "feedback": "" if t == rounds else "Fix.",
                            "scores": {"hidden_pass": float(passes), "visible_pass": visible},
                            "embedding": [round(float(x), 5) for x in rng.normal(size=8)]})  # fmt: skip
            fh.write(json.dumps({"id": f"syn-{i}", "split": "dev" if i % 4 == 0 else "test", "rounds": out}) + "\n")
    store = folder / "store"
    if shp_import([str(path), "--store", str(store)]) != 0:
        raise RuntimeError("the synthetic import failed")
    return store


def measure(store: Path, rounds: int) -> dict[str, object]:
    """The timed part, in this (fresh) process."""
    import analysis
    from analysis import sql
    from analysis.sql.rows import fetch_dicts
    from analysis.stats import correctness
    from analysis.stats.correctness import code_policies
    from shp_ray.policy.families.registry import needs_logprobs

    pols = [p for p in code_policies(rounds) if not (p.family and needs_logprobs(p.kind))]  # an import has none
    out: dict[str, object] = {"policies": len(pols)}
    t0 = time.perf_counter()
    con = analysis.connect(store, policies=pols)
    out["connect_s"] = round(time.perf_counter() - t0, 3)
    for name, run in (
        ("replay", lambda: con.execute(sql.query("replay_scores_count")).fetchall()),  # what every view reads
        (
            "summary",
            lambda: fetch_dicts(con, sql.query("correctness_rows", relation="correctness_summary"), ["hidden_pass"]),
        ),  # fmt: skip
        ("compare", lambda: correctness.compare_pass(con)),
        ("by_round", lambda: correctness.by_round(con, "hidden_pass")),
        ("break_rate", lambda: correctness.break_rates(con, "hidden_pass")),
    ):
        t0 = time.perf_counter()
        rows = run()
        out[f"{name}_s"] = round(time.perf_counter() - t0, 3)
        out[f"{name}_rows"] = len(rows)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shp-bench correctness", description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--store", type=Path, help="an existing code store (skips writing one)")
    ap.add_argument("--keep", type=Path, help="write the synthetic store here and keep it")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the fresh process
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.rounds)))
        return 0
    with tempfile.TemporaryDirectory(prefix="shp-bench-correctness-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        store = args.store or write_store(folder, args.trajectories, args.rounds)
        written = round(time.perf_counter() - t0, 3)
        cmd = [sys.executable, "-m", "bench.correctness", "--measure", str(store), "--rounds", str(args.rounds)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(
                f"shp-bench correctness: the measuring process failed: {proc.stderr.strip()[-2000:]}", file=sys.stderr
            )
            return 1
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps({"bench": "correctness", "trajectories": args.trajectories if not args.store else None,
                          "rounds": args.rounds, "write_s": None if args.store else written, **result}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
