"""A generation's own approval marker (its prompt preset's ``approval``) is what every path that recomputes the
``approved`` signal from the stored critiques reads: the SQL of a store without signals, ``shp-query --signals
check`` and ``rebuild``. A generation whose config names none (an older store, an import) reads APPROVED."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import analysis
from analysis import sql
from analysis.query import main as query_main
from analysis.replay import signals_store
from shp_ray.generation.records import signal_rows
from shp_ray.policy.cascade import approved
from storage.parts import Store
from storage.schemas import GENERATIONS, SIGNALS, rounds_schema
from storage.synthetic import SyntheticSpec, write_synthetic_store

pytestmark = pytest.mark.integration

LGTM = "lgtm-gen"  # its preset's marker is LGTM
OLD = SyntheticSpec.gen_id  # its generations row names no marker: APPROVED
APPROVED_ROWS = "SELECT gen_id, scenario_id, round, approved FROM round_signals ORDER BY gen_id, scenario_id, round"


def _lgtm_generation(tmp_path, root) -> None:
    """A second generation of the store at ``root`` made with the marker LGTM: its config names it, half its
    approving critiques start with "lgtm" and half with "APPROVED" (no approval under LGTM), and its stored
    signals are the generation's own (records.signal_rows with the preset's marker)."""
    src = write_synthetic_store(
        tmp_path / "lgtm", SyntheticSpec(n_trajectories=30, gen_id=LGTM, seed=5, approve_rate=0.4)
    )
    for table in ("scenarios", "judgments"):
        for part in (tmp_path / "lgtm" / table).rglob("part-*.parquet"):
            dest = root / part.relative_to(tmp_path / "lgtm")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(part, dest)
    (gen,) = src.read("generations").to_pylist()
    config = json.loads(gen["config_json"])
    gen["config_json"] = json.dumps({**config, "generation": {"prompts": {"name": "mine", "approval": "LGTM"}}})
    store = Store(root)
    store.write("generations", pa.Table.from_pylist([gen], schema=GENERATIONS))
    rounds = src.read("rounds").sort_by([("scenario_id", "ascending"), ("round", "ascending")]).to_pylist()
    flip = False
    for r in rounds:
        if r["feedback"].startswith("APPROVED"):
            r["feedback"] = " \tlgtm - ship it." if flip else r["feedback"]
            flip = not flip
    schema = rounds_schema(SyntheticSpec.dim)
    store.write("rounds", pa.Table.from_pylist(rounds, schema=schema), schema)
    gold = dict(zip(*src.read("scenarios", columns=["scenario_id", "ground_truth"]).to_pydict().values(), strict=True))
    rows = signal_rows(rounds, gold, {LGTM: gen["embedder"]}, "LGTM")
    store.write("signals", pa.Table.from_pylist(rows, schema=SIGNALS))


@pytest.fixture(scope="module")
def store(tmp_path_factory):  # noqa: ANN201
    tmp_path = tmp_path_factory.mktemp("marker")
    root = tmp_path / "store"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=30, seed=3, approve_rate=0.3))
    signals_store.build(Store(root))  # the old generation's signals, read with APPROVED
    _lgtm_generation(tmp_path, root)
    return root


def _stored(root) -> dict[tuple, bool]:
    t = Store(root).read("signals", columns=["gen_id", "scenario_id", "round", "approved"]).to_pylist()
    return {(r["gen_id"], r["scenario_id"], r["round"]): r["approved"] for r in t}


def test_the_stored_approvals_follow_each_generations_marker(store) -> None:
    rounds = Store(store).read("rounds", columns=["gen_id", "scenario_id", "round", "feedback"]).to_pylist()
    stored = _stored(store)
    by_kind: dict[tuple[str, str], set[bool]] = {}
    for r in rounds:
        kind = r["feedback"].strip()[:4].lower()
        by_kind.setdefault((r["gen_id"], kind), set()).add(stored[(r["gen_id"], r["scenario_id"], r["round"])])
    assert by_kind[(LGTM, "lgtm")] == {True} and by_kind[(LGTM, "appr")] == {False}
    assert by_kind[(OLD, "appr")] == {True} and by_kind[(OLD, "revi")] == {False}


def test_signals_check_finds_no_difference(store, capsys) -> None:
    assert query_main(["--store", str(store), "--signals", "check"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["different_rows"] == 0 and line["checked_rows"] == len(_stored(store))


def test_recomputed_approvals_equal_the_stored_ones(store, tmp_path, capsys) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(store, plain)
    shutil.rmtree(plain / "signals")
    con = analysis.connect(plain)  # no signals: round_signals computes them in SQL from the rounds
    try:
        assert analysis.setup_of(con).signals == "computed"
        computed = {(g, s, t): a for g, s, t, a in con.sql(APPROVED_ROWS).fetchall()}
    finally:
        con.close()
    assert computed == _stored(store)

    cli = str(Path(sys.executable).parent / "duckdb")  # the plain DuckDB CLI over views.sql reads the same
    assert Path(cli).exists(), "the duckdb CLI is not installed (pyproject dev extras)"
    assert query_main(["--store", str(plain), "--write-init"]) == 0
    q = "SELECT gen_id, count(*) FILTER (WHERE approved) FROM round_signals GROUP BY ALL ORDER BY ALL"
    out = subprocess.run([cli, "-init", str(plain / "views.sql"), "-csv", "-noheader", "-c", q],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0 and "Error" not in out.stderr, out.stderr
    want = {g: sum(a for (gi, _, _), a in computed.items() if gi == g) for g in (LGTM, OLD)}
    assert out.stdout.strip().splitlines()[-2:] == [f"{g},{n}" for g, n in sorted(want.items())]

    report = signals_store.build(Store(plain))  # shp-query --signals rebuild
    assert report.built == 60
    assert _stored(plain) == _stored(store)


@pytest.mark.parametrize("marker", ["LGTM", "ok.", "A+B?", "[x]{2} (y)|z^$", "Looks good!", "\\E*", "Ça va"])
def test_sql_regex_of_a_marker_is_approved_in_python(marker: str) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE generations (gen_id VARCHAR, config_json VARCHAR)")
    config = json.dumps({"generation": {"prompts": {"approval": marker}}})
    con.execute("INSERT INTO generations VALUES ('g', ?), ('old', '{}')", [config])
    rows = con.sql(sql.approval_markers_sql()).fetchall()
    assert rows == [("g", sql.approval_regex(marker))]  # 'old' names none: APPROVED, the constant
    for text in [marker, f"  {marker.lower()} fine", f"\u3000{marker.upper()}", f"no {marker}", marker[:-1], ""]:
        got = con.execute("SELECT regexp_matches(?, ?)", [text, rows[0][1]]).fetchone()[0]
        assert got == approved(text, marker), text
