"""shp-query: answers from the views, three formats, an interactive prompt, and never a write."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import duckdb
import pytest

import analysis
from analysis.query import main
from analysis.report import BEST_QUERY
from storage.synthetic import SyntheticSpec, write_synthetic_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("query-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=50, rounds=4, seed=9))
    return root


def fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_best_policy_question_in_one_query(store, capsys) -> None:
    assert main(["--store", str(store), "--format", "json", BEST_QUERY]) == 0
    got = json.loads(capsys.readouterr().out)
    con = analysis.connect(store)
    expected = con.execute(BEST_QUERY).fetchall()
    assert len(got) == len(expected) == 1
    assert list(got[0].values()) == pytest.approx(list(expected[0]))  # avg() order may differ in the last bit


def test_table_and_csv_formats(store, capsys) -> None:
    sql = "SELECT policy, n, mean_rounds FROM policy_summary WHERE split = 'test' ORDER BY policy"
    assert main(["--store", str(store), "--format", "csv", sql]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 15 and len({r["n"] for r in rows}) == 1
    assert main(["--store", str(store), sql]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split("|")[0].strip() == "policy" and "(15 rows)" in out


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (SELECT 1) TO '{store}/rounds/part-evil.parquet'",
        "ATTACH '{store}/evil.duckdb'",
        "CREATE TABLE t AS SELECT 1",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        "SELECT 1; COPY (SELECT 1) TO '{store}/x.csv'",
    ],
)
def test_writes_are_refused_and_the_store_is_unchanged(store, capsys, sql) -> None:
    before = fingerprint(store)
    assert main(["--store", str(store), sql.format(store=store)]) == 2
    assert "read-only" in capsys.readouterr().err
    assert fingerprint(store) == before


def test_files_outside_the_store_are_unreachable(store, tmp_path, capsys) -> None:
    outside = tmp_path / "secret.csv"
    outside.write_text("a\n1\n")
    assert main(["--store", str(store), f"SELECT * FROM read_csv('{outside}')"]) == 1
    assert "shp-query:" in capsys.readouterr().err


def test_interactive_prompt(store, capsys, monkeypatch) -> None:
    script = "SELECT count(*) AS n\n FROM replay;\nDROP VIEW replay;\nSELECT 42 AS answer;\n.quit\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    assert main(["--store", str(store)]) == 0
    captured = capsys.readouterr()
    assert "750" in captured.out and "42" in captured.out
    assert "read-only" in captured.err


def test_dot_tables_lists_each_relation_once(store, capsys, monkeypatch) -> None:
    main(["--store", str(store), "SELECT 1"])  # the first open keeps replay_inputs; this one attaches that file
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(".tables\n.quit\n"))
    assert main(["--store", str(store), "--format", "csv"]) == 0
    names = capsys.readouterr().out.split()[1:]  # under the header
    assert "replay" in names and "policies" in names and names.count("replay_inputs") == 1
    assert len(names) == len(set(names))


def test_bad_store_and_bad_sql_fail_cleanly(store, tmp_path, capsys) -> None:
    assert main(["--store", str(tmp_path / "none"), "SELECT 1"]) == 2
    assert "no store at" in capsys.readouterr().err
    assert main(["--store", str(store), "SELECT nope FROM replay"]) == 1
    assert "nope" in capsys.readouterr().err


def test_init_script_gives_the_same_views(store, capsys) -> None:
    assert main(["--store", str(store), "--write-init"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == store / "views.sql"
    plain = duckdb.connect()
    for stmt in plain.extract_statements(path.read_text()):
        plain.execute(stmt.query)
    q = "SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, final_is FROM replay"
    q += " ORDER BY 1, 2, 3"
    assert plain.execute(q).fetchall() == analysis.connect(store).execute(q).fetchall()
    path.unlink()


def test_the_policy_set_is_an_option_families_included(store, capsys) -> None:
    sql = "SELECT DISTINCT policy FROM replay ORDER BY 1"
    assert main(["--store", str(store), "--format", "json", "--policies", "families,shp", sql]) == 0
    names = {r["policy"] for r in json.loads(capsys.readouterr().out)}
    from shp_ray.policy.families.registry import needs_answers, needs_logprobs
    from shp_ray.policy.table import family_policies

    # a synthetic store holds no extracted answers and no log-probabilities: the families reading them are left out
    # (one line each), never run
    kept = {p.name for p in family_policies() if not needs_answers(p.kind) and not needs_logprobs(p.kind)}
    assert names == kept | {"shp"}
    assert main(["--store", str(store), "--policies", "no_such_policy", sql]) == 2
    assert "no_such_policy" in capsys.readouterr().err
