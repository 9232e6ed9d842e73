"""shp-query is bounded: it fetches no more rows than it shows (and says how many there were), stops a query at
--timeout and at --memory-limit, each with one line naming the flag and a non-zero exit."""

from __future__ import annotations

import duckdb
import pytest

from analysis.query import main
from analysis.query.bounds import default_memory_limit

# A cross join no machine finishes: 10^16 pairs, none kept (no early end), so only a bound stops it.
ENDLESS = "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range + b.range < 0"


@pytest.fixture
def store(small_store):
    return small_store


def _run(store, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--store", str(store), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_max_rows_fetches_no_more_and_says_how_many_there_are(store, capsys) -> None:
    # 400 million rows: fetched whole (5 GB) before, now the query stops after the rows shown; the count is DuckDB's
    code, out, err = _run(store, capsys, "--max-rows", "5", "SELECT * FROM range(400000000)")
    assert code == 0 and err == ""
    assert out.splitlines()[2:] == ["    0", "    1", "    2", "    3", "    4", "(5 of 400000000 rows shown)"]


def test_a_cut_result_says_3_of_13_and_a_whole_one_its_rows(store, capsys) -> None:
    assert _run(store, capsys, "--max-rows", "3", "SELECT * FROM range(13)")[1].endswith("(3 of 13 rows shown)\n")
    assert _run(store, capsys, "--max-rows", "13", "SELECT * FROM range(13)")[1].endswith("(13 rows)\n")
    code, out, err = _run(store, capsys, "--max-rows", "3", "--format", "csv", "SELECT * FROM range(13);")
    assert code == 0 and out == "range\n0\n1\n2\n"  # the data stays data; the note goes to stderr
    assert err == "shp-query: 3 of 13 rows shown (--max-rows)\n"


def test_a_count_that_cannot_be_had_says_more_than(store, capsys) -> None:
    # EXPLAIN is no subquery, so its rows cannot be counted: the cut is still said
    code, out, _ = _run(store, capsys, "--max-rows", "0", "EXPLAIN SELECT 1")
    assert code == 0 and out.endswith("(0 of more than 0 rows shown)\n")
    # the first rows come at once, their count never does (10^14 rows): it stops at the deadline, the rows stay
    every = "SELECT a.range FROM range(1000) b, range(1000) c, range(1000) d, range(100000) a"
    code, out, _ = _run(store, capsys, "--max-rows", "3", "--timeout", "3", every)
    assert code == 0 and out.endswith("(3 of more than 3 rows shown)\n")


def test_a_query_past_its_timeout_is_stopped_with_one_line(store, capsys) -> None:
    code, out, err = _run(store, capsys, "--timeout", "1", ENDLESS)
    assert code == 1 and out == ""
    assert err == "shp-query: stopped after 1 s (--timeout); narrow the query or raise --timeout\n"


def test_a_query_past_its_memory_limit_is_stopped_with_one_line(store, capsys) -> None:
    # one list of 50 million integers (400 MB) cannot be spilled: past 20 MB the query ends
    code, out, err = _run(store, capsys, "--memory-limit", "20MB", "SELECT list(range) FROM range(50000000)")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(
        "shp-query: stopped: the query needs more memory than --memory-limit 20MB (Out of Memory Error"
    )
    assert err.endswith("; narrow the query or raise --memory-limit\n")
    # 1 MB does not even open the store (its views and replay inputs): said as such, nothing half-opened
    code, out, err = _run(store, capsys, "--memory-limit", "1MB", "SELECT 1")
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("shp-query: stopped: opening the store needs more memory than --memory-limit 1MB (")
    assert err.endswith("; raise --memory-limit\n")


def test_bad_bounds_are_refused_naming_the_flag(store, capsys) -> None:
    for flag, value in (("--memory-limit", "lots"), ("--timeout", "-1"), ("--max-rows", "-2")):
        with pytest.raises(SystemExit) as stop:
            main(["--store", str(store), flag, value, "SELECT 1"])
        assert stop.value.code == 2 and f"argument {flag}: " in capsys.readouterr().err


def test_the_connection_has_the_memory_bound_by_default(store, capsys) -> None:
    scratch = duckdb.connect(":memory:")
    scratch.execute(f"SET memory_limit = '{default_memory_limit()}'")  # a quarter of this machine's memory
    ((expected,),) = scratch.execute("SELECT current_setting('memory_limit')").fetchall()
    scratch.close()
    code, out, _ = _run(store, capsys, "--format", "csv", "SELECT current_setting('memory_limit') AS m")
    assert code == 0 and out == f"m\n{expected}\n"
    one_gb = _run(store, capsys, "--memory-limit", "1GB", "--format", "csv", "SELECT current_setting('memory_limit')")
    assert one_gb[1].endswith("953.6 MiB\n")  # 10^9 bytes, as DuckDB shows them


def test_a_cut_result_of_an_endless_join_ends_within_the_count_budget(store, capsys, monkeypatch) -> None:
    """The first rows of a 10^18-row join come at once; its count is given COUNT_S (here 1 s), not the whole
    --timeout, so the result is "5 of more than 5" without waiting out the deadline."""
    import analysis.query.bounds as bounds

    monkeypatch.setattr(bounds, "COUNT_S", 1.0)
    endless = "SELECT a.range FROM range(1000000) a, range(1000000) b, range(1000000) c"
    code, out, _ = _run(store, capsys, "--max-rows", "5", "--timeout", "600", endless)
    assert code == 0 and out.endswith("(5 of more than 5 rows shown)\n")


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "-inf", "0", "1", "x"])
def test_a_margin_that_is_no_margin_on_is_is_refused_in_one_line(store, capsys, value) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--store", str(store), f"--delta={value}", "SELECT 1"])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    said = err.splitlines()[-1]  # after argparse's usage lines
    assert said.startswith("shp-query: error: ") and said.endswith(
        f"argument --delta: {value!r}: a margin on IS strictly between 0 and 1 (e.g. 0.05)"
    )
