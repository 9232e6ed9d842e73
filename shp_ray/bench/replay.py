"""``shp-bench replay``: DuckDB replay of every policy vs the per-trajectory Python loop.

Writes a SYNTHETIC store (real schemas, made-up numbers) of N trajectories x
R rounds, then:

- ``scan_s``: analysis.connect() -- one scan of the Parquet store computing
  d_t (DuckDB array cosine distance), IS_t and tokens per round, materialised;
- ``sql_s``: ONE query replaying every standard policy (the 7 ablation cells
  included) and a 10 x 5 eps x k grid over every trajectory, fetched to Arrow;
- ``python_s``: the paper's way, a Python loop over trajectories calling
  :func:`shp_ray.policy.reference.replay` (decide() round by round) on the SAME
  per-round signals; measured on a subsample and extrapolated linearly when
  the subsample is smaller than N (said so in the JSON).

The SQL rows of the subsample are compared with the Python outcomes; any
difference fails the benchmark. Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _trajectories(con, keys: list[tuple[str, str]]):  # noqa: ANN001, ANN202
    from analysis import sql
    from analysis.db import SIGNAL_SELECT, trajectories_from_signals

    con.execute(sql.query("bench_keys_create"))
    con.executemany(sql.query("bench_keys_insert"), keys)
    rows = con.execute(sql.query("bench_signals", columns=SIGNAL_SELECT)).fetchall()
    return trajectories_from_signals(rows)


def _same(a: float | None, b: float) -> bool:
    a = math.nan if a is None else a
    return a == b or (math.isnan(a) and math.isnan(b))


def run(n: int, rounds: int, dim: int, sample: int, seed: int, workdir: Path) -> dict[str, object]:
    import analysis
    from analysis import signals_store, sql
    from analysis.policy_table import default_policies, grid_policies
    from shp_ray.policy.reference import replay
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    t0 = time.perf_counter()
    write_synthetic_store(workdir, SyntheticSpec(n_trajectories=n, rounds=rounds, dim=dim, seed=seed))
    synth_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    signals_store.build(workdir)  # what the generation writes beside its rounds
    signals_s = time.perf_counter() - t0
    eps_grid = [round(float(e), 4) for e in np.linspace(0.02, 0.2, 10)]
    policies = default_policies() + grid_policies(eps_grid, [1, 2, 3, 4, 5], max_rounds=(rounds,))

    t0 = time.perf_counter()
    con = analysis.connect(workdir, policies=policies)
    scan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = con.sql(sql.query("bench_replay")).to_arrow_table()
    sql_s = time.perf_counter() - t0
    if result.num_rows != n * len(policies):
        raise AssertionError(f"replay returned {result.num_rows} rows, expected {n * len(policies)}")

    keys = con.execute(sql.query("bench_trajectory_keys")).fetchall()
    step = max(1, len(keys) // min(sample, len(keys)))
    picked = keys[::step][:sample]
    trajs = _trajectories(con, picked)
    t0 = time.perf_counter()
    python = {(p.name, t.gen_id, t.scenario_id): replay(p, t) for t in trajs for p in policies}
    python_measured_s = time.perf_counter() - t0
    python_s = python_measured_s * n / len(trajs)

    wanted = {(g, s) for g, s in picked}
    cols = [result.column(c).to_pylist() for c in result.column_names]
    compared = mismatched = 0
    for name, g, s, tau, reason, op, ev, fin in zip(*cols, strict=True):
        if (g, s) not in wanted:
            continue
        ref = python[(name, g, s)]
        compared += 1
        same = (tau, reason, op, ev) == (ref.stop_round, ref.reason, ref.operational_tokens, ref.evaluation_tokens)
        mismatched += not (same and _same(fin, ref.final_is))
    con.close()
    return {
        "trajectories": n,
        "rounds": rounds,
        "cells": len(policies),
        "sql_s": round(sql_s, 3),
        "scan_s": round(scan_s, 3),
        "end_to_end_s": round(scan_s + sql_s, 3),
        "python_s": round(python_s, 3),
        "python_measured_trajectories": len(trajs),
        "python_measured_s": round(python_measured_s, 3),
        "python_extrapolated": len(trajs) < n,
        "speedup": round(python_s / sql_s, 1),
        "speedup_end_to_end": round(python_s / (scan_s + sql_s), 1),
        "identical": mismatched == 0,
        "compared_rows": compared,
        "mismatched_rows": mismatched,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "synth_s": round(synth_s, 1),
        "signals_build_s": round(signals_s, 1),
        "dim": dim,
        "data": "synthetic (storage.synthetic: random-walk embeddings, random metrics; not a model's output)",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shp-bench replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories", "-n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--dim", type=int, default=384, help="embedding size (384 = all-MiniLM-L6-v2)")
    ap.add_argument("--python-sample", type=int, default=5_000, help="trajectories the Python loop runs on")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="write the synthetic store here and keep it")
    args = ap.parse_args(argv)
    if args.trajectories < 1 or args.rounds < 1 or args.python_sample < 1:
        ap.error("--trajectories, --rounds and --python-sample must be >= 1")
    if args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            ap.error(f"--keep {args.keep} is not empty; give a new folder")
        out = run(args.trajectories, args.rounds, args.dim, args.python_sample, args.seed, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="shp-bench-replay-") as tmp:
            out = run(args.trajectories, args.rounds, args.dim, args.python_sample, args.seed, Path(tmp))
    print(json.dumps(out), flush=True)
    return 0 if out["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
