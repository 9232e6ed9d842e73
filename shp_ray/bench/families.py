"""Time the family replay in DuckDB against the SHP replay on a synthetic store (one JSON line last).

python -m shp_ray.bench.families --trajectories 2000 --rounds 6
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    import analysis
    from analysis import sql
    from shp_ray.policy.table import family_policies, standard_policies
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    ap = argparse.ArgumentParser(prog="python -m shp_ray.bench.families")
    ap.add_argument("--trajectories", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=6)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        write_synthetic_store(root, SyntheticSpec(n_trajectories=a.trajectories, rounds=a.rounds))
        out: dict[str, object] = {"bench": "stoppers-replay", "trajectories": a.trajectories, "rounds": a.rounds}
        for label, pols in (
            ("standard", standard_policies()),
            ("standard+families", standard_policies() + family_policies()),
        ):
            t0 = time.perf_counter()
            con = analysis.connect(root, policies=pols)
            t1 = time.perf_counter()
            n = con.execute(sql.query("replay_count")).fetchone()[0]
            t2 = time.perf_counter()
            con.close()
            out[label] = {
                "policies": len(pols),
                "rows": n,
                "connect_s": round(t1 - t0, 3),
                "replay_query_s": round(t2 - t1, 3),
            }
        fam_rows = a.trajectories * len(family_policies())
        extra = out["standard+families"]["connect_s"] - out["standard"]["connect_s"]  # type: ignore[index]
        out["family_rows_per_s"] = round(fam_rows / max(extra, 1e-9))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
