"""write_report over a synthetic store: files, honest naming, and no half-written report on failure."""

from __future__ import annotations

import csv

import pytest

from analysis.db import AnalysisError
from analysis.report import main, write_report
from storage.synthetic import SYNTHETIC_JUDGE, SyntheticSpec, write_synthetic_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=60, rounds=5, seed=2))
    return root


def test_report_files_and_honest_names(store, tmp_path) -> None:
    path = write_report(store, tmp_path / "out", n_resamples=200)
    out = path.parent
    for name in ("pareto.png", "tokens_saved.png", "distance_by_round.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = path.read_text()
    assert "SYNTHETIC DATA" in md and SYNTHETIC_JUDGE in md
    assert "cf. SHP Table II" in md and "cf. SHP Table III" in md
    with (out / "policy_summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} >= {"shp", "entropy_only", "fixed_k6", "oracle_is", "abl_gain_only"}
    assert all(r["n"] == "60" for r in rows)
    # Every row of the policy table in the markdown names a policy of the summary.
    table_policies = {line.split("|")[1].strip() for line in md.splitlines() if line.startswith("| abl_")}
    assert len(table_policies) >= 7


def test_failed_report_leaves_nothing(store, tmp_path) -> None:
    out = tmp_path / "out"
    with pytest.raises(AnalysisError):
        write_report(store, out, judge="not-a-judge")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_cli_reports_errors_cleanly(store, tmp_path, capsys) -> None:
    assert main(["--store", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_policies_on_the_same_point_share_one_label():
    from analysis.figures import _label, shared_points

    rows = [
        {"policy": "shp", "mean_operational_tokens": 1841.0, "mean_is": 0.682},
        {"policy": "abl_full", "mean_operational_tokens": 1841.0, "mean_is": 0.682},
        {"policy": "fixed_k3", "mean_operational_tokens": 3083.0, "mean_is": 0.682},
        {"policy": "abl_no_gain", "mean_operational_tokens": 3083.0, "mean_is": 0.6820000000001},
        {"policy": "fixed_k1", "mean_operational_tokens": 578.0, "mean_is": 0.704},
    ]
    points = {(x, y): names for x, y, names in shared_points(rows)}
    assert points == {(1841.0, 0.682): ["abl_full", "shp"], (3083.0, 0.682): ["abl_no_gain", "fixed_k3"],
                      (578.0, 0.704): ["fixed_k1"]}  # fmt: skip
    label = _label([f"policy_{i}" for i in range(8)], width=30)
    assert all(len(line) <= 31 for line in label.splitlines()) and label.count("policy_") == 8


def test_small_n_report_says_n_and_power_and_answer_metrics(tmp_path) -> None:
    root = tmp_path / "n4"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=4, rounds=4, seed=1))
    md = write_report(root, tmp_path / "out", n_resamples=100).read_text()
    assert "| EM | F1 | ΔF1 |" in md and "power (N for 0.8)" in md
    assert "To detect a margin δ = 0.02 with power 0.8 at this variance you need N = " in md
    assert "is not evidence" in md and "; at N = 4 the power is" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "(N 4" in line]
    assert rows and all("power" in line or "no test" in line for line in rows)  # never a bare yes/no
    baseline = next(line for line in md.splitlines() if line.startswith("| fixed_k6 |"))
    assert "zero variance" in baseline and "no test (N 4, identical to the baseline)" in baseline
    assert "0% of the returned drafts state an `Answer:` line" in md  # synthetic drafts have none: EM = F1 = 0
