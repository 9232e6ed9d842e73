"""The plain DuckDB CLI (the `duckdb` binary of the pinned `duckdb-cli` package) opens `shp-query --write-init`'s
views.sql and answers what `analysis.connect` answers, the TOST power of `policy_summary` included."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import analysis
from analysis.query import main
from storage.synthetic import SyntheticSpec, write_synthetic_store

pytestmark = pytest.mark.integration

CLI = Path(sys.executable).parent / "duckdb"  # console script of duckdb-cli (pyproject, dev extras)


def test_the_duckdb_cli_opens_the_views(tmp_path, capsys) -> None:
    store = tmp_path / "store"
    write_synthetic_store(store, SyntheticSpec(n_trajectories=30, rounds=4, seed=3))
    assert main(["--store", str(store), "--write-init"]) == 0
    views = Path(capsys.readouterr().out.strip())
    assert views == store / "views.sql"
    cli = str(CLI) if CLI.exists() else shutil.which("duckdb")
    assert cli, "the duckdb CLI is not installed: pip install duckdb-cli (pinned in pyproject's dev extras)"

    q = (
        "SELECT policy::VARCHAR AS policy, n, round(mean_rounds, 6) AS r, round(tost_power, 6) AS p, n_needed "
        "FROM policy_summary ORDER BY policy"
    )
    out = subprocess.run(
        [cli, "-init", str(views), "-csv", "-c", q], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "Error" not in out.stderr, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout[out.stdout.index("policy,") :])))

    con = analysis.connect(store)
    want = con.execute(q).fetchall()
    con.close()
    assert len(rows) == len(want) > 10
    for row, (policy, n, r, p, needed) in zip(rows, want, strict=True):
        assert (row["policy"], int(row["n"]), float(row["r"])) == (policy, n, r)
        assert row["p"] == "NULL" if p is None else float(row["p"]) == pytest.approx(p, abs=1e-6)
        assert row["n_needed"] == "NULL" if needed is None else int(row["n_needed"]) == needed
    assert any(row["p"] != "NULL" for row in rows)  # the power is computed, not only NULL
    # The lenient answers are plain SQL (no Python UDF): the shell reads them as the connection does.
    q = "SELECT count(*) AS n, count(answer_f1) AS f1, sum(has_inline_answer::INTEGER) AS inline FROM answers_lenient"
    out = subprocess.run(
        [cli, "-init", str(views), "-csv", "-c", q], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0 and "Error" not in out.stderr, out.stderr
    (row,) = list(csv.DictReader(io.StringIO(out.stdout[out.stdout.index("n,") :])))
    con = analysis.connect(store)
    (n, f1, inline) = con.execute(q).fetchone()
    con.close()
    assert (int(row["n"]), int(row["f1"]), int(row["inline"] if row["inline"] != "NULL" else 0)) == (
        n, f1, inline or 0
    ) and n == 30 * 4  # fmt: skip
