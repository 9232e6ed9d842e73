"""shp-bench replay on a small synthetic store: one JSON line last, and the executors agree."""

from __future__ import annotations

import json

from bench import main


def test_bench_replay_prints_one_json_line(capsys) -> None:
    assert main(["replay", "--trajectories", "300", "--rounds", "4", "--dim", "32", "--python-sample", "60"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    out = json.loads(last)
    assert {"trajectories", "cells", "sql_s", "python_s", "speedup", "peak_rss_mb"} <= set(out)
    assert out["trajectories"] == 300 and out["cells"] == 15 + 50
    assert out["identical"] and out["compared_rows"] == 60 * 65 and out["python_extrapolated"]
    assert "synthetic" in out["data"]
    # a new store, its inputs stored by its writer: its first open and the measured (later) one read them in place
    assert out["replay_inputs"] == "written" and out["first_open"]["replay_inputs"] == "written"
    assert out["first_open"]["end_to_end_s"] > 0 and out["first_open"]["identical"]
