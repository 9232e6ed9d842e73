"""Time the family replay (decisions computed column-wise in numpy) against the SHP replay on a synthetic store.

python -m bench.families --trajectories 100000 --rounds 6 [--keep DIR | --store DIR]

Writes a SYNTHETIC store with its stored signals (as a generation writes them), or takes one
(``--store``; ``--keep`` writes it there and keeps it), then measures each connection in a FRESH
process, as a new ``shp-query`` or sweep job would open it:

- ``standard.connect_s``: analysis.connect with the 15 standard policies;
- ``standard+families.connect_s``: the same with the 12 family policies added;
- ``family_rebuild_s``: in that second process, the family part alone again
  (:func:`analysis.replay.family_replay.refresh`: family_inputs read, every family's decisions computed,
  materialised) -- the figure ``family_rows_per_s`` divides by.

``family_rows_per_s_by_difference`` is the old figure (the two connects' difference). Prints ONE JSON
line last.
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
from typing import Any


def measure(store: Path, families: bool) -> dict[str, Any]:
    """The timed part, in this (fresh) process."""
    import analysis
    from analysis import sql
    from analysis.replay import family_replay
    from analysis.sql.rows import fetch_row
    from shp_ray.policy.table import family_policies, standard_policies

    pols = standard_policies() + (family_policies() if families else [])
    t0 = time.perf_counter()
    con = analysis.connect(store, policies=pols)
    out: dict[str, Any] = {"policies": len(pols), "connect_s": round(time.perf_counter() - t0, 3)}
    t0 = time.perf_counter()
    out["rows"] = fetch_row(con, sql.query("replay_count"))[0]
    out["replay_query_s"] = round(time.perf_counter() - t0, 3)
    if families:
        t0 = time.perf_counter()
        family_replay.refresh(con, pols)
        out["family_rebuild_s"] = round(time.perf_counter() - t0, 3)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    con.close()
    return out


def _fresh(store: Path, families: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.families", "--measure", str(store)]
    cmd += ["--with-families"] if families else []
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the measuring process failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(store: Path, made: dict[str, Any]) -> dict[str, Any]:
    from shp_ray.policy.table import family_policies

    std, fam = _fresh(store, False), _fresh(store, True)
    n = (fam["rows"] - std["rows"]) // len(family_policies())
    fam_rows = n * len(family_policies())
    extra = fam["connect_s"] - std["connect_s"]
    return {
        "bench": "families-replay",
        "trajectories": n,
        "family_rows": fam_rows,
        "standard": std,
        "standard+families": fam,
        "family_rows_per_s": round(fam_rows / max(fam["family_rebuild_s"], 1e-9)),
        "family_rows_per_s_by_difference": round(fam_rows / max(extra, 1e-9)),
        **made,
        "process": "fresh (each connect timed in a new interpreter)",
        "data": "synthetic (storage.synthetic: random-walk embeddings, no feedback embeddings; not a model's output)",
    }


def _write(store: Path, n: int, rounds: int) -> dict[str, Any]:
    from analysis.replay import signals_store
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    t0 = time.perf_counter()
    written = write_synthetic_store(store, SyntheticSpec(n_trajectories=n, rounds=rounds))
    signals_store.build(written)  # what the generation writes beside its rounds
    return {"rounds": rounds, "synth_s": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.families", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--keep", type=Path, default=None, help="write the synthetic store here and keep it")
    ap.add_argument("--store", type=Path, default=None, help="measure this store (e.g. one --keep wrote)")
    ap.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)  # the fresh process
    ap.add_argument("--with-families", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.measure is not None:
        print(json.dumps(measure(a.measure, a.with_families)), flush=True)
        return 0
    if a.store is not None:
        if not a.store.is_dir():
            ap.error(f"--store {a.store}: no such folder")
        out = run(a.store, {})
    elif a.keep is not None:
        if a.keep.exists() and any(a.keep.iterdir()):
            ap.error(f"--keep {a.keep} is not empty; give a new folder")
        out = run(a.keep, _write(a.keep, a.trajectories, a.rounds))
    else:
        with tempfile.TemporaryDirectory(prefix="shp-bench-families-") as tmp:
            out = run(Path(tmp), _write(Path(tmp), a.trajectories, a.rounds))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
