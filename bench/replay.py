"""``shp-bench replay``: DuckDB replay of every policy vs the per-trajectory Python loop.

Writes a SYNTHETIC store (real schemas, made-up numbers) of N trajectories x R rounds with its
signals (as a generation writes them), or takes one (``--store``), then measures in a FRESH
process (``--drop-caches`` also empties the OS page cache first, as root), as a new
``shp-query`` or sweep job would open it:

- ``scan_s``: analysis.connect() -- reads the store's per-round signals (scalar columns, no
  embedding), joins IS_t, builds the per-trajectory lists, materialised; or, where the store's writer stored each
  trajectory's replay inputs (``trajectory_inputs``, :mod:`analysis.replay.stored_inputs`), reads those. Opening a store
  keeps what it computed per part set (:mod:`analysis.replay.derived`), so a store opened for the first time is measured
  twice: ``first_open`` (computes and keeps it), then the headline, a later open (reads it in place);
- ``sql_s``: ONE query replaying every standard policy (the 7 ablation cells included) and a
  10 x 5 eps x k grid over every trajectory, with the cost columns, streamed to Arrow record batches
  (never held whole: 65 rows per trajectory), ``--batch-rows`` rows at a time; ``--batch-rate`` makes a share
  of the synthetic calls batch calls (the replay then builds the batch calls' token lists too);
- ``python_s``: the paper's way, a Python loop over trajectories calling
  :func:`shp_ray.policy.reference.replay` (decide() round by round) on the SAME per-round
  signals; measured on a subsample and extrapolated linearly (said so in the JSON).

The SQL rows of the subsample are compared with the Python outcomes; any difference fails the
benchmark. The Python loop runs in a process of its own, over the subsample the measuring process wrote, so
``peak_rss_mb`` (the measuring process's VmHWM: its own peak, from its exec on) counts neither the loop's data nor
the store's creation. Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the measuring process, not by the CLI
    import duckdb

from bench.measure import peak_rss_mb, replay_policies

# Rows per Arrow record batch the timed query streams (DuckDB converts a streamed result to Arrow on the
# consuming thread). Measured side by side (BENCHMARKS.md): at 100k trajectories 256k-row batches stream as fast
# as 64k ones and 0.3 s faster than 1M ones; at 1M trajectories as fast as 1M ones and 1 s faster than 64k ones.
BATCH_ROWS = 1 << 18


def _same(a: float | None, b: float) -> bool:
    a = math.nan if a is None else a
    return a == b or (math.isnan(a) and math.isnan(b))


@dataclass(frozen=True)
class Settings:
    """What one run measures: the synthetic store's shape (``n`` trajectories of ``rounds`` rounds, embeddings of
    ``dim``, over ``generations`` generations, ``batch_rate`` of the calls paid in batch mode, from ``seed``), the
    Python loop's ``sample``, and how the replay reads it (``memory_limit``, ``slices``, ``batch_rows``;
    ``drop_caches``: cold from disk)."""

    n: int = 100_000
    rounds: int = 6
    dim: int = 384
    sample: int = 5_000
    seed: int = 0
    generations: int = 1
    batch_rate: float = 0.0
    memory_limit: str | None = None
    slices: int = 1
    batch_rows: int = BATCH_ROWS
    drop_caches: bool = False


def measure(store: Path, settings: Settings, sample_file: Path | None = None) -> dict[str, Any]:
    """The timed part, in this (fresh) process: open the store, replay every cell (slice by slice when
    ``slices`` > 1: each a whole set of trajectories, opened, replayed and closed before the next); then write a
    subsample (of the first slice: its SQL rows and its signals) to ``sample_file`` for :func:`compare`, which runs
    the Python loop in a process of its own (none given: compared here, after the peak memory is read)."""
    t0 = time.perf_counter()
    import analysis
    from analysis import sql
    from analysis.replay.db import SIGNAL_SELECT

    import_s = time.perf_counter() - t0
    policies = replay_policies(settings.rounds)
    con, n, rows, scan_s, sql_s = _replay_slices(store, settings, policies)
    peak = peak_rss_mb()
    if rows != n * len(policies):
        raise AssertionError(f"replay returned {rows} rows, expected {n * len(policies)}")
    keys = con.execute(sql.query("bench_trajectory_keys")).fetchall()
    step = max(1, len(keys) // min(settings.sample, len(keys)))
    picked = keys[::step][: settings.sample]
    con.execute(sql.query("bench_keys_create"))
    con.executemany(sql.query("bench_keys_insert"), picked)
    drawn = {
        "rounds": settings.rounds,
        "signals": con.execute(sql.query("bench_signals", columns=SIGNAL_SELECT)).fetchall(),
        "sql": con.execute(sql.query("bench_replay_sample")).fetchall(),
    }
    if sample_file is not None:
        sample_file.write_bytes(pickle.dumps(drawn))
    setup = analysis.setup_of(con)
    con.close()
    gens = sorted({g for g, _ in keys})
    narrowed = _one_generation(store, settings, policies, gens) if len(gens) > 1 else {}
    compared_here = {} if sample_file is not None else compare(drawn, n)
    if compared_here:
        python_s = float(compared_here["python_s"])
        compared_here |= {
            "speedup": round(python_s / sql_s, 1),
            "speedup_end_to_end": round(python_s / (scan_s + sql_s), 1),
        }
    return {
        "trajectories": n,
        "rounds": settings.rounds,
        "cells": len(policies),
        "replay_rows": rows,
        "sql_s": round(sql_s, 3),
        "scan_s": round(scan_s, 3),
        "end_to_end_s": round(scan_s + sql_s, 3),
        "import_s": round(import_s, 3),
        **compared_here,
        "peak_rss_mb": round(peak, 1),
        "signals": setup.signals,
        "replay_inputs": setup.inputs,  # "built" now, or "stored": read back from what an earlier open kept
        "batch_calls": setup.batch,  # the replay built the batch calls' token lists
        "memory_limit": settings.memory_limit or "DuckDB default (80% of RAM)",
        "slices": settings.slices,
        "batch_rows": settings.batch_rows,
        **narrowed,
    }


def _replay_slices(
    store: Path, settings: Settings, policies: list
) -> tuple[duckdb.DuckDBPyConnection, int, int, float, float]:
    """Open and replay the store slice by slice: (the first slice's connection, trajectories, replay rows,
    seconds opening, seconds replaying)."""
    import analysis
    from analysis import sql
    from storage.parts import Store

    scan_s = sql_s = 0.0
    rows = n = 0
    con: duckdb.DuckDBPyConnection | None = None
    for i in range(settings.slices):
        ids = analysis.ScenarioSlice(i, settings.slices) if settings.slices > 1 else None
        scope = analysis.ReplayScope(
            Store(store), policies=policies, scenario_ids=ids, memory_limit=settings.memory_limit
        )
        t0 = time.perf_counter()
        part = analysis.connect(scope)
        scan_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        batches = part.sql(sql.query("bench_replay")).to_arrow_reader(batch_size=settings.batch_rows)
        rows += sum(b.num_rows for b in batches)
        sql_s += time.perf_counter() - t0
        n += part.execute(sql.query("replay_inputs_count")).fetchall()[0][0]
        if i == 0:
            con = part  # kept for the comparison
        else:
            part.close()
    if con is None:
        raise ValueError("settings.slices must be at least 1")
    return con, n, rows, scan_s, sql_s


def _one_generation(store: Path, settings: Settings, policies: list, gens: list[str]) -> dict[str, Any]:
    """A sweep job replays one generation: it opens that generation's folder only."""
    import analysis
    from analysis import sql
    from storage.parts import Store

    st = Store(store)
    t0 = time.perf_counter()
    one = analysis.connect(
        analysis.ReplayScope(st, policies=policies, gen_id=gens[0], memory_limit=settings.memory_limit)
    )
    batches = one.sql(sql.query("bench_replay")).to_arrow_reader(batch_size=settings.batch_rows)
    one_rows = sum(b.num_rows for b in batches)
    out = {
        "generations": len(gens),
        "one_generation_end_to_end_s": round(time.perf_counter() - t0, 3),
        "one_generation_rows": one_rows,
        "rounds_parts": len(st.parts("rounds")),
        "rounds_parts_opened_for_one": len(st.parts("rounds", gens[0])),
    }
    one.close()
    return out


def compare(drawn: dict[str, Any], n: int) -> dict[str, Any]:
    """The Python loop (the paper's way) over the subsample's signals, field by field against its SQL rows; its
    time extrapolated linearly to ``n`` trajectories."""
    from analysis.replay.db import trajectories_from_signals
    from shp_ray.policy.reference import replay

    policies = replay_policies(int(drawn["rounds"]))
    trajs = trajectories_from_signals(drawn["signals"])
    t0 = time.perf_counter()
    python = {(p.name, t.gen_id, t.scenario_id): replay(p, t) for t in trajs for p in policies}
    python_measured_s = time.perf_counter() - t0
    compared = mismatched = 0
    for name, g, s, tau, reason, op, ev, fin in drawn["sql"]:
        ref = python[(name, g, s)]
        compared += 1
        same = (tau, reason, op, ev) == (ref.stop_round, ref.reason, ref.operational_tokens, ref.evaluation_tokens)
        mismatched += not (same and _same(fin, ref.final_is))
    return {
        "python_s": round(python_measured_s * n / max(1, len(trajs)), 3),
        "python_measured_trajectories": len(trajs),
        "python_measured_s": round(python_measured_s, 3),
        "python_extrapolated": len(trajs) < n,
        "identical": mismatched == 0 and compared == len(trajs) * len(policies),
        "compared_rows": compared,
        "mismatched_rows": mismatched,
    }


def _drop_caches() -> bool:
    """Empty the OS page cache (root only), so the store is read from disk: a cold start."""
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _fresh_process(cmd: list[str], drop_caches: bool) -> tuple[bool, dict[str, Any]]:
    """Run the measuring process (after emptying the page cache when asked): (cache dropped, its JSON line)."""
    cold = _drop_caches() if drop_caches else False
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the measuring process failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return cold, json.loads(proc.stdout.strip().splitlines()[-1])


def _measured(cmd: list[str], drop_caches: bool) -> tuple[bool, dict[str, Any]]:
    """One measurement: open and replay in a fresh process (``cmd``), then the Python loop over its subsample in
    another one, so neither's memory is counted in the other's peak."""
    with tempfile.TemporaryDirectory(prefix="shp-bench-sample-") as tmp:
        drawn = Path(tmp) / "sample.pickle"
        cold, out = _fresh_process([*cmd, "--sample-file", str(drawn)], drop_caches)
        n = str(out["trajectories"])
        _, loop = _fresh_process([sys.executable, "-m", "bench.replay", "--compare", str(drawn), "-n", n], False)
    python_s = float(loop["python_s"])
    ratios = {
        "speedup": round(python_s / out["sql_s"], 1),
        "speedup_end_to_end": round(python_s / out["end_to_end_s"], 1),
    }
    return cold, {**out, **loop, **ratios, "python_process": "its own (fresh)"}


def _du_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6, 1)


def run(settings: Settings, workdir: Path, *, store: Path | None = None) -> dict[str, Any]:
    """Write the synthetic store into ``workdir`` (unless ``store`` is given), then measure it in a fresh process:
    a new store twice (its first open, then a later one), a given store once, unless that open computed what
    later opens read back (``built``: then a later open too)."""
    from analysis.replay import signals_store
    from storage.parts import Store
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    made: dict[str, Any] = {}
    n, generations = settings.n, settings.generations
    new = store is None
    if store is None:
        store = workdir
        t0 = time.perf_counter()
        for g in range(generations):  # the same questions, G generations (a sweep over G configs)
            share = n // generations + (1 if g < n % generations else 0)
            gen = "synthetic-gen" if generations == 1 else f"synthetic-gen-{g:02d}"
            spec = SyntheticSpec(
                n_trajectories=share, rounds=settings.rounds, dim=settings.dim, seed=settings.seed + g, gen_id=gen,
                batch_rate=settings.batch_rate,
            )  # fmt: skip
            write_synthetic_store(store, spec)
        made["synth_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        signals_store.build(Store(store))  # what the generation writes beside its rounds
        made["signals_build_s"] = round(time.perf_counter() - t0, 1)
        made["dim"] = settings.dim
    cmd = [sys.executable, "-m", "bench.replay", "--measure", str(store)]
    cmd += ["--rounds", str(settings.rounds), "--python-sample", str(settings.sample)]
    cmd += ["--memory-limit", settings.memory_limit] if settings.memory_limit else []
    cmd += ["--slices", str(settings.slices), "--batch-rows", str(settings.batch_rows)]
    cold, out = _measured(cmd, settings.drop_caches)
    first: dict[str, Any] | None = None
    if new or out["replay_inputs"] == "built":  # a first open (of a new store, or one that computed what is kept)
        first = {k: out[k] for k in ("scan_s", "sql_s", "end_to_end_s", "peak_rss_mb", "replay_inputs", "identical")}
        cold, out = _measured(cmd, settings.drop_caches)  # ... so measure a later open too: the headline
    return {
        **out,
        "page_cache": "dropped (cold from disk)" if cold else "warm (not dropped)",
        "first_open": first,  # None: the store had been opened before (its replay inputs were kept)
        "store_mb": _du_mb(store),
        **made,
        "process": "fresh (connect + replay timed in a new interpreter)",
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
    ap.add_argument("--store", type=Path, default=None, help="measure this store (e.g. one --keep wrote)")
    ap.add_argument("--drop-caches", action="store_true", help="empty the OS page cache first (root only)")
    ap.add_argument("--generations", type=int, default=1, help="split the trajectories over this many generations")
    ap.add_argument("--slices", type=int, default=1, help="replay slice by slice (analysis.ScenarioSlice)")
    ap.add_argument("--memory-limit", default=None, help="DuckDB's memory bound, e.g. 1.5GB (it spills past it)")
    ap.add_argument("--batch-rows", type=int, default=BATCH_ROWS, help="rows per Arrow batch the replay streams")
    ap.add_argument("--batch-rate", type=float, default=0.0, help="share of synthetic calls paid in batch mode")
    ap.add_argument("--ray-nodes", default=None, help="e.g. 1,3: one node vs local Ray clusters (bench.replay_ray)")
    ap.add_argument("--buckets", type=int, default=16, help="with --ray-nodes: the store's scenario-hash buckets")
    ap.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)  # the fresh process
    ap.add_argument("--sample-file", type=Path, default=None, help=argparse.SUPPRESS)  # ... writes its subsample
    ap.add_argument("--compare", type=Path, default=None, help=argparse.SUPPRESS)  # the Python loop's process
    args = ap.parse_args(argv)
    if min(args.trajectories, args.rounds, args.python_sample, args.generations, args.slices, args.batch_rows) < 1:
        ap.error("--trajectories, --rounds, --python-sample, --generations, --slices and --batch-rows must be >= 1")
    if args.generations > args.trajectories:
        ap.error("--generations cannot exceed --trajectories")
    settings = Settings(
        n=args.trajectories, rounds=args.rounds, dim=args.dim, sample=args.python_sample, seed=args.seed,
        generations=args.generations, batch_rate=args.batch_rate, memory_limit=args.memory_limit,
        slices=args.slices, batch_rows=args.batch_rows, drop_caches=args.drop_caches,
    )  # fmt: skip
    if args.measure is not None:
        print(json.dumps(measure(args.measure, settings, args.sample_file)), flush=True)
        return 0
    if args.compare is not None:
        print(json.dumps(compare(pickle.loads(args.compare.read_bytes()), args.trajectories)), flush=True)
        return 0
    if args.ray_nodes is not None:
        return _on_ray(args, ap)
    if args.store is not None:
        if not args.store.is_dir():
            ap.error(f"--store {args.store}: no such folder")
        out = run(replace(settings, n=0), args.store, store=args.store)
    elif args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            ap.error(f"--keep {args.keep} is not empty; give a new folder")
        out = run(settings, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="shp-bench-replay-") as tmp:
            out = run(settings, Path(tmp))
    print(json.dumps(out), flush=True)
    return 0 if out["identical"] else 1


def _on_ray(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    from bench import replay_ray
    from storage.synthetic import SyntheticSpec

    nodes = [int(k) for k in args.ray_nodes.split(",") if k.strip().isdigit() and int(k) >= 1]
    store = args.store or args.keep
    if not nodes or store is None:
        ap.error("--ray-nodes takes node counts >= 1 (e.g. 1,3) and a --store or --keep folder")
    spec = SyntheticSpec(n_trajectories=args.trajectories, rounds=args.rounds, dim=args.dim, seed=args.seed)
    out = replay_ray.run(store, args.rounds, nodes, replay_ray.bucketed(store, spec, args.buckets))
    print(json.dumps(out), flush=True)
    return 0 if out["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
