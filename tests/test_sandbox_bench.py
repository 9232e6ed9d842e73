"""shp-bench sandbox: one JSON line last, with a figure per kind of run and the protections that held."""

from __future__ import annotations

import json

import pytest

from bench import main


def test_bench_sandbox_prints_one_json_line(capsys) -> None:
    assert main(["sandbox", "--runs", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("bare_python_s", "program_off_s", "program_s", "check_s", "examples_s"):
        assert out[key]["median"] > 0 and out[key]["p90"] >= out[key]["median"], key
    assert out["runs"] == 1 and "rlimits" in out["protections"] and "netns" not in out["protections_off"]


def test_bench_sandbox_refuses_no_runs(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sandbox", "--runs", "0"])
    assert exc.value.code == 2
    assert "--runs must be at least 1" in capsys.readouterr().err
