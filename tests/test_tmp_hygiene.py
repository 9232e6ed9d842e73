"""No temp folder outlives its DuckDB connection (issue 10: one empty ``shp-duckdb-*`` per connection).

Real DuckDB on a real small synthetic store. Each test points the temp folder
(``tempfile.gettempdir()``, or ``TMPDIR`` for the ``shp-query`` subprocess) at a
private empty folder, so what a connection leaves behind is seen exactly and other
processes using /tmp at the same time cannot disturb the test.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest

import analysis
import analysis.replay.db

# A sort of 2 M md5 strings (~130 MB) under a 32 MB memory limit: DuckDB must spill to temp_directory.
SPILL_QUERY = "SELECT count(*) FROM (SELECT md5(i::VARCHAR) AS h FROM range(2000000) t(i) ORDER BY h)"


@pytest.fixture
def store(small_store):
    return small_store


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """tempfile.gettempdir() is this empty folder for the test (and so is DuckDB's spill folder's parent)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert tempfile.gettempdir() == str(tmp)
    return tmp


def test_connections_opened_and_closed_leave_no_spill_folder(store, private_tmp) -> None:
    for _ in range(3):
        con = analysis.connect(store)
        assert con.execute("SELECT count(*) FROM replay").fetchone()[0] > 0
        assert os.listdir(private_tmp) == []  # nothing made up front: DuckDB creates the folder only to spill
        con.close()
    con = analysis.connect(store)  # dropped without close(): garbage-collected
    con.execute("SELECT count(*) FROM policy_summary").fetchall()
    del con
    gc.collect()
    assert os.listdir(private_tmp) == []


@pytest.mark.parametrize("ending", ["close", "garbage-collected"])
def test_a_connection_that_spilled_leaves_nothing(store, private_tmp, monkeypatch, ending) -> None:
    made = analysis.replay.db._new_connection

    def small_memory(memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:  # before the lock-down
        con = made(memory_limit)
        con.execute("SET memory_limit = '48MB'")  # connect() itself fits; the sort below does not
        con.execute("SET threads = 1")
        return con

    monkeypatch.setattr(analysis.replay.db, "_new_connection", small_memory)
    con = analysis.connect(store)
    # The real read-only lock-down holds, with the spill folder allowed.
    with pytest.raises(duckdb.InvalidInputException, match="configuration"):
        con.execute("SET memory_limit = '1GB'")
    assert con.execute("SELECT current_setting('enable_external_access')").fetchone()[0] is False
    spill = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
    assert spill.parent == private_tmp and spill.name.startswith("shp-duckdb-")
    allowed = con.execute("SELECT current_setting('allowed_directories')").fetchone()[0]
    assert f"{spill}/" in allowed

    assert not spill.exists()
    assert con.execute(SPILL_QUERY).fetchone()[0] == 2_000_000  # the sort completed
    assert spill.is_dir() and os.listdir(private_tmp) == [spill.name]  # it really spilled, there
    assert con.execute("SELECT count(*) FROM replay").fetchone()[0] > 0  # the views still answer

    if ending == "close":
        con.close()
    else:
        del con
        gc.collect()
    assert os.listdir(private_tmp) == []


def test_shp_query_process_leaves_nothing(store, tmp_path) -> None:
    exe = Path(sys.executable).with_name("shp-query")
    assert exe.is_file(), f"{exe}: the shp-query entry point is not installed"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    done = subprocess.run(
        [str(exe), "--store", str(store), "--format", "csv", "SELECT count(*) AS n FROM scenarios"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", "12"]
    assert os.listdir(tmp) == []
