"""The shp-query sandbox has no holes, for every kind of store root (issue 11, item 1).

Two layers, both DuckDB's own:

- the statement check (``analysis.query.read_only.check_read_only``, on DuckDB's parse): exactly one statement,
  a query, or EXPLAIN [ANALYZE] of a query. It is the write barrier: DuckDB may write inside the
  folders it may read, so anything that is not a query is refused (exit 2) before it runs -- before the
  store is even opened;
- the connection (``analysis.replay.db._lock_down``): it opens only the store's table folders and its spill
  folder, loads no extension, scans no Python variable, and its configuration is locked, so even a
  query cannot read another file, the environment, or switch on a setting that writes (exit 1, said
  to be the sandbox's refusal).

Every bypass in BYPASSES (each with the reason it must fail) runs through the real ``shp-query`` entry
point against a real synthetic store given as a path and as a ``file://`` URI; the store (every file
and folder, hashed) and a folder outside it holding secrets are the same, byte for byte, afterwards.
There each root is opened once for the module (:func:`opened_once`); a fresh open per run is what
``test_a_uri_store_through_the_cli`` and the installed command of ``test_the_issue_repro...`` check.
Non-local roots (``s3://``, ``gs://``, a pyarrow ``mock://`` store) get the same lock-down.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import analysis
import analysis.query
import analysis.replay.db
from analysis.query import ReadOnlyError, check_read_only, main
from shp_ray.policy.table import family_policies, standard_policies
from storage.parts import Store
from storage.schemas import TABLES
from storage.synthetic import SyntheticSpec, write_synthetic_store
from storage.user_cache import reader_dir

SECRET = "TOP-SECRET-CANARY-7f3a"  # in every file outside the store; must never be printed
CACHED = "CACHED-RESPONSE-CANARY-2b9c"  # in <store>/_cache: beside the tables, not a part

# How a bypass must fail:
STATEMENT = "statement"  # refused before it runs by the statement check: exit 2, "read-only"
SANDBOX = "sandbox"  # refused by DuckDB's lock-down while it runs: exit 1, "refused: the read-only sandbox"
ERROR = "error"  # no such thing in this DuckDB / not runnable: exit 1, a DuckDB error

PART = "{store}/rounds/part-evil.parquet"  # a new part: every later query and sweep would fail on it

# (sql, how it must fail, why it must fail). {store}: the store folder, {uri}: file://{store},
# {outside}: a folder beside the store with secrets, {up}: {outside} relative to {store}/rounds.
BYPASSES: list[tuple[str, str, str]] = [
    # --- EXPLAIN: it passed the old check, and EXPLAIN ANALYZE runs what it explains
    (f"EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "the issue: EXPLAIN ANALYZE ran the COPY"),
    (f"EXPLAIN (ANALYZE) COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "ANALYZE spelt as an EXPLAIN option"),
    (f"EXPLAIN ANALYZE (FORMAT json) COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "ANALYZE and an option list"),
    (f"explain analyse copy (select 1 as a) to 'file://{PART}'", STATEMENT, "lower case, ANALYSE, a file:// target"),
    (
        f"/* ( */ EXPLAIN /* ) */ ANALYZE -- (\nCOPY (SELECT 1 AS a) TO '{PART}'",
        STATEMENT,
        "comments holding parentheses around the keywords",
    ),
    (f"EXPLAIN (FORMAT ')') COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "a parenthesis inside a string literal"),
    (f"EXPLAIN COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "plain EXPLAIN: only a query may be explained"),
    ("EXPLAIN ANALYZE CREATE TABLE evil AS SELECT 1", STATEMENT, "EXPLAIN ANALYZE of a CREATE runs it"),
    ("EXPLAIN ANALYZE CALL checkpoint()", STATEMENT, "EXPLAIN ANALYZE of a CALL runs it"),
    ("EXPLAIN ANALYZE UPDATE EXTENSIONS", STATEMENT, "a statement type the Python binding cannot even name"),
    # --- several statements: the old check accepted them
    ("SELECT 1; SELECT 2", STATEMENT, "the issue: several statements were accepted; one query at a time"),
    ("SELECT 1; COPY (SELECT 1) TO '{store}/rounds/x.csv'", STATEMENT, "a write after a harmless query"),
    ("SELECT 1 -- ;\n; EXPORT DATABASE '{store}/rounds'", STATEMENT, "a second statement after a comment"),
    # --- statements that write, read other files, or change the connection
    (f"COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "writes a part into the store"),
    ("COPY (SELECT 1) TO '{outside}/evil.csv'", STATEMENT, "writes a file outside the store"),
    ("COPY (SELECT 1) TO 'file://{outside}/evil.csv'", STATEMENT, "writes outside the store through file://"),
    ("EXPORT DATABASE '{store}/rounds'", STATEMENT, "writes the whole catalog into the store"),
    ("ATTACH '{store}/rounds/evil.duckdb' AS evil", STATEMENT, "creates a database file in the store"),
    ("ATTACH '{outside}/secret.duckdb' AS s (READ_ONLY)", STATEMENT, "opens a database outside the store"),
    ("COPY FROM DATABASE memory TO evil", STATEMENT, "copies the catalog into another database"),
    ("INSTALL httpfs", STATEMENT, "downloads and installs code"),
    ("LOAD httpfs", STATEMENT, "loads code that reads URLs and object stores"),
    ("UPDATE EXTENSIONS", STATEMENT, "downloads code; unknown to the Python binding's StatementType"),
    ("SET enable_external_access = true", STATEMENT, "turns the file sandbox off"),
    ("SET GLOBAL allowed_directories = ['/']", STATEMENT, "widens the file sandbox to everything"),
    ("RESET lock_configuration", STATEMENT, "unlocks the configuration"),
    ("SET VARIABLE x = 1", STATEMENT, "changes session state"),
    ("USE system", STATEMENT, "changes the default catalog"),
    ("PRAGMA enable_profiling = 'json'", STATEMENT, "profiling can write its output to a file"),
    (f"PRAGMA profiling_output = '{PART}'", STATEMENT, "points the profiler's output at a new part"),
    ("CALL enable_logging(storage = 'file', storage_path = '{store}/rounds')", STATEMENT, "log files into the store"),
    ("CALL checkpoint()", STATEMENT, "CALL runs table functions with side effects"),
    ("CREATE TABLE evil AS SELECT 1", STATEMENT, "creates a table"),
    ("CREATE OR REPLACE VIEW replay AS SELECT 1 AS fake", STATEMENT, "redefines a view so later answers lie"),
    ("CREATE MACRO evil() AS 1", STATEMENT, "creates a macro"),
    ("CREATE SECRET evil (TYPE s3, KEY_ID 'k', SECRET 's')", STATEMENT, "creates (maybe persists) a secret"),
    ("DROP VIEW replay", STATEMENT, "drops a view"),
    ("ALTER VIEW replay RENAME TO gone", STATEMENT, "alters a view"),
    ("INSERT INTO policies SELECT * FROM policies", STATEMENT, "changes the policies the replay reads"),
    ("UPDATE policies SET eps = 0", STATEMENT, "changes the policies the replay reads"),
    ("DELETE FROM policies", STATEMENT, "changes the policies the replay reads"),
    (f"PREPARE p AS COPY (SELECT 1 AS a) TO '{PART}'", STATEMENT, "a write prepared now, run later"),
    ("EXECUTE p", STATEMENT, "runs a prepared statement of any type"),
    ("PIVOT (SELECT 1 AS a) ON a", STATEMENT, "PIVOT runs several statements (CREATE TYPE first)"),
    ("BEGIN TRANSACTION", STATEMENT, "transactions are not queries"),
    ("CHECKPOINT", STATEMENT, "not a query"),
    ("VACUUM", STATEMENT, "not a query"),
    ("DETACH memory", STATEMENT, "detaches the catalog the views live in"),
    # --- queries that read outside the store's tables: refused by the connection itself
    ("SELECT * FROM read_text('/proc/self/environ')", SANDBOX, "the issue: the environment (API keys)"),
    ("SELECT * FROM read_blob('/proc/self/environ')", SANDBOX, "the environment, as bytes"),
    ("SELECT * FROM read_csv('/etc/passwd')", SANDBOX, "a system file"),
    ("SELECT * FROM read_text('{outside}/secret.txt')", SANDBOX, "a file outside the store"),
    ("SELECT * FROM read_text('file://{outside}/secret.txt')", SANDBOX, "the issue: outside, through file://"),
    ("SELECT * FROM '{outside}/secret.csv'", SANDBOX, "a replacement scan of a path"),
    ("SELECT * FROM read_parquet('{outside}/secret.parquet')", SANDBOX, "a Parquet file outside the store"),
    ("SELECT * FROM parquet_metadata('{outside}/secret.parquet')", SANDBOX, "metadata of a file outside"),
    ("SELECT * FROM sniff_csv('{outside}/secret.csv')", SANDBOX, "CSV sniffing reads the file"),
    ("SELECT * FROM read_json_objects('{outside}/secret.json')", SANDBOX, "the JSON readers"),
    ("SELECT * FROM read_duckdb('{outside}/secret.duckdb')", SANDBOX, "a DuckDB file outside the store"),
    ("SELECT * FROM glob('/etc/*')", SANDBOX, "lists a system folder"),
    ("SELECT * FROM glob('{outside}/*')", SANDBOX, "lists a folder outside the store"),
    ("SELECT * FROM glob('{store}/*')", SANDBOX, "lists the store root (only its table folders are open)"),
    ("SELECT * FROM read_text('{store}/views.sql')", SANDBOX, "a file of the store that is not a part"),
    ("SELECT * FROM read_blob('{store}/_cache/responses.sqlite')", SANDBOX, "the cached model responses"),
    ("SELECT * FROM read_text('{store}/rounds/../views.sql')", SANDBOX, "'..' out of an open table folder"),
    ("SELECT * FROM read_text('{store}/rounds/{up}/secret.txt')", SANDBOX, "'..' from the store to outside"),
    ("SELECT * FROM read_text('{store}/rounds/*/../../views.sql')", SANDBOX, "'..' behind a glob"),
    ("SELECT * FROM read_text('{store}/rounds/planted.txt')", SANDBOX, "a symlink in a table folder to outside"),
    ("SELECT * FROM read_blob(['{store}/rounds/**/*.parquet', '/etc/hostname'])", SANDBOX, "a list smuggling a path"),
    ("SELECT * FROM read_text('~/.bashrc')", SANDBOX, "the home folder"),
    ("SELECT * FROM read_text('/proc/self/cwd/README.md')", SANDBOX, "the working folder, through /proc"),
    ("SELECT * FROM read_text('/proc/self/root/etc/passwd')", SANDBOX, "the file system root, through /proc"),
    ("SELECT * FROM read_text('https://example.com/')", SANDBOX, "the network (httpfs is never auto-installed)"),
    ("SELECT * FROM read_parquet('s3://bucket/x.parquet')", SANDBOX, "an object store outside the store"),
    (
        f"FROM enable_profiling(format = 'json', save_location = '{PART}')",
        SANDBOX,
        "a query that writes the profile into the store (the configuration is locked)",
    ),
    (
        "FROM enable_logging(storage = 'file', storage_path = '{store}/rounds')",
        SANDBOX,
        "a query that writes log files into the store (the configuration is locked)",
    ),
    ("FROM add_grammar_extension('evil')", SANDBOX, "a query that changes the parser"),
    (
        "FROM json_execute_serialized_sql(json_serialize_sql('SELECT * FROM read_text(''/proc/self/environ'')'))",
        SANDBOX,
        "a serialized query run from inside a query",
    ),
    ("FROM query('SELECT * FROM read_text(''/proc/self/environ'')')", SANDBOX, "a query given as a string"),
    # --- not there at all
    ("SELECT getenv('HOME')", ERROR, "the environment: getenv() exists only in the DuckDB CLI"),
    ("FROM query('COPY (SELECT 1) TO ''{store}/rounds/x.csv''')", ERROR, "query() accepts one SELECT only"),
]

# Queries the sandbox must still answer (exit 0), whatever the root.
QUERIES = [
    "SELECT count(*) AS n FROM replay",
    "SELECT count(*) AS n FROM replay_udf",
    "SELECT count(*) AS n FROM read_parquet('{store}/rounds/**/*.parquet')",
    "EXPLAIN SELECT count(*) FROM replay",
    "EXPLAIN ANALYZE SELECT count(*) FROM replay",
    "EXPLAIN (FORMAT json) SELECT 1",
    "EXPLAIN (SELECT 1) UNION (SELECT 2)",
    "DESCRIBE replay",
    "SUMMARIZE scenarios",
    "SHOW TABLES",
    "VALUES (1, 'a')",
    "FROM policy_summary LIMIT 1",
    "WITH r AS (FROM replay) SELECT policy, count(*) FROM r GROUP BY ALL;",
    "SELECT current_setting('enable_external_access') AS ext",
]


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a folder, a link's target (byte-for-byte comparison)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, Path]:
    store = tmp_path_factory.mktemp("sandbox-store")
    write_synthetic_store(store, SyntheticSpec(n_trajectories=6, rounds=3, seed=11))
    analysis.write_init_script(store)  # <store>/views.sql: a file of the store that is not a part
    (store / "_cache").mkdir(exist_ok=True)  # Store.write may have made it (storage.verify records)
    (store / "_cache" / "responses.sqlite").write_text(CACHED)
    outside = tmp_path_factory.mktemp("sandbox-outside")
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "secret.csv").write_text(f"secret\n{SECRET}\n")
    (outside / "secret.json").write_text(f'{{"secret": "{SECRET}"}}\n')
    pq.write_table(pa.table({"secret": [SECRET]}), outside / "secret.parquet")
    db = duckdb.connect(str(outside / "secret.duckdb"))
    db.execute(f"CREATE TABLE secret AS SELECT '{SECRET}' AS secret")
    db.close()
    (store / "rounds" / "planted.txt").symlink_to(outside / "secret.txt")  # not a part: no glob of the views sees it
    for root in (str(store), f"file://{store}"):  # what opening computes once per part set (analysis.replay.derived),
        analysis.connect(root).close()  # kept now: the snapshots compare only what a query itself could change
    return {"store": store, "outside": outside}


class _Kept:
    """A connection that main() may close: it stays open for the next run (closed by :func:`opened_once`)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


@pytest.fixture(scope="module")
def kept_connections():
    """The connections :func:`opened_once` keeps open for the module (closed at its end)."""
    kept: dict[str, _Kept] = {}
    yield kept
    for con in kept.values():
        con._con.close()


@pytest.fixture
def opened_once(kept_connections, monkeypatch) -> None:
    """shp-query's main() as it runs, but each store root opened once for the module: opening binds every view
    (~1-2 s), which the 60 runs that reach the store here would each pay. main() still parses the flags, checks
    the statement, runs it within its bounds on the locked-down connection analysis.connect opened with main's
    own arguments, and says the outcome in one line; only the close waits for the end of the module."""

    def connect(*args: object, **options: object) -> _Kept:
        key = repr((args, sorted(options.items())))
        if key not in kept_connections:
            kept_connections[key] = _Kept(analysis.connect(*args, **options))
        return kept_connections[key]

    monkeypatch.setattr(analysis.query, "connect", connect)


def _fill(sql: str, places: dict[str, Path]) -> str:
    store, outside = places["store"], places["outside"]
    up = os.path.relpath(outside, store / "rounds")
    return sql.format(store=store, uri=f"file://{store}", outside=outside, up=up)


def _root(places: dict[str, Path], kind: str) -> str:
    return str(places["store"]) if kind == "path" else f"file://{places['store']}"


@pytest.mark.parametrize("kind", ["path", "file-uri"])
@pytest.mark.parametrize(("sql", "how", "reason"), BYPASSES, ids=[f"{i:02d}" for i in range(len(BYPASSES))])
def test_every_bypass_is_refused_and_changes_nothing(places, opened_once, capsys, kind, sql, how, reason) -> None:
    text = _fill(sql, places)
    before = {name: snapshot(path) for name, path in places.items()}
    rc = main(["--store", _root(places, kind), "--format", "csv", text])
    out, err = capsys.readouterr()
    assert {name: snapshot(path) for name, path in places.items()} == before, f"changed files: {reason}"
    assert out == "", f"printed a result: {reason}"
    assert SECRET not in err and CACHED not in err
    assert "Traceback" not in err and err.startswith("shp-query: ")
    if how == STATEMENT:
        assert rc == 2, f"{reason}: {err}"
        assert "read-only" in err and len(err.splitlines()) == 1, err
    elif how == SANDBOX:
        assert rc == 1, f"{reason}: {err}"
        assert err.startswith("shp-query: refused: the read-only sandbox") and len(err.splitlines()) == 1, err
    else:
        assert rc == 1, f"{reason}: {err}"


@pytest.mark.parametrize("kind", ["path", "file-uri"])
def test_queries_still_answer_and_change_nothing(places, opened_once, capsys, kind) -> None:
    before = snapshot(places["store"])
    for sql in QUERIES:
        assert main(["--store", _root(places, kind), "--format", "csv", _fill(sql, places)]) == 0, sql
        out, err = capsys.readouterr()
        assert out and not err, (sql, err)
    assert snapshot(places["store"]) == before


def test_a_refused_statement_is_refused_before_the_store_is_opened(tmp_path, capsys) -> None:
    """No store at all there: the statement is said to be refused, not the store to be missing."""
    assert main(["--store", str(tmp_path / "none"), f"COPY (SELECT 1) TO '{tmp_path}/x.csv'"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shp-query: shp-query is read-only: COPY statements are refused") and err.count("\n") == 1
    assert main(["--store", str(tmp_path / "none"), "SELECT 1"]) == 2  # a query needs the store
    assert capsys.readouterr().err.startswith("shp-query: no store at")
    assert os.listdir(tmp_path) == []


def test_check_read_only_accepts_one_query_and_says_why_it_refuses() -> None:
    con = duckdb.connect()
    for sql in ("SELECT 1", "EXPLAIN ANALYZE SELECT 1", "EXPLAIN (SELECT 1);", "/* c */ EXPLAIN -- (\n SELECT 1"):
        assert check_read_only(con, sql) == [con.extract_statements(sql)[0].query]
    cases = {
        "SELECT 1; SELECT 2": "one query at a time: 2 statements given",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'": "EXPLAIN is accepted only around a query, not COPY",
        "COPY (SELECT 1) TO 'x.csv'": "COPY statements are refused",
        "UPDATE EXTENSIONS": "a type it does not know",
        ";": "no SQL statement given",
    }
    for sql, why in cases.items():
        with pytest.raises(ReadOnlyError, match="read-only") as info:
            check_read_only(con, sql)
        assert why in str(info.value) and "\n" not in str(info.value)
    assert not os.path.exists("x.csv")


def test_the_lock_down_settings(places) -> None:
    con = analysis.connect(places["store"])
    try:
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access',"
                " 'lock_configuration', 'autoinstall_known_extensions', 'autoload_known_extensions',"
                " 'allow_community_extensions', 'allow_persistent_secrets', 'python_enable_replacements',"
                " 'allowed_configs', 'allowed_paths')"
            ).fetchall()
        )
        allowed = con.execute("SELECT current_setting('allowed_directories')").fetchone()[0]
        (kept,) = con.execute("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL").fetchone()
        spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
            con.execute("SET enable_external_access = true")
    finally:
        con.close()
    # DuckDB's own, in no fixed order: the file replay_inputs is read from, attached read-only
    # (analysis.replay.derived), and its WAL's names
    paths = settings.pop("allowed_paths").strip("[]").split(", ")
    assert sorted(paths) == sorted(f"{kept}{end}" for end in ("", ".wal", ".wal.checkpoint", ".wal.recovery"))
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
        "allow_community_extensions": "false",
        "allow_persistent_secrets": "false",
        "python_enable_replacements": "false",
        "allowed_configs": "[]",
    }
    assert Path(kept).parent == reader_dir(Store(places["store"])) / "derived"  # the user's cache, not the store
    # the table folders and the spill folder: not the store root, not its views.sql or _cache
    assert sorted(allowed) == sorted([f"{places['store']}/{t}/" for t in TABLES] + [f"{spill}/"])


def test_python_variables_are_not_scanned(places) -> None:
    con = analysis.connect(places["store"])
    secret_table = pa.table({"secret": [SECRET]})  # noqa: F841 - what a replacement scan would find
    try:
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT * FROM secret_table").fetchall()
    finally:
        con.close()


def test_views_and_udfs_answer_the_same_under_the_lock_down(places) -> None:
    """Lazy views, the cascade UDF and the families' column-wise replay run AFTER the lock-down: rows as unlocked."""
    pols = standard_policies() + family_policies()
    q = "SELECT * FROM replay ORDER BY ALL"
    rows = {}
    for read_only in (True, False):
        con = analysis.connect(places["store"], policies=pols, read_only=read_only, materialize=False)
        try:
            rows[read_only] = (
                con.execute(q).fetchall(),
                con.execute("SELECT * FROM replay_udf ORDER BY ALL").fetchall(),
                con.execute("SELECT * FROM family_replay ORDER BY ALL").fetchall(),
            )
            locked = con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]
        finally:
            con.close()
        assert locked is read_only
    assert rows[True] == rows[False]
    assert rows[True][0] and rows[True][2]  # the family rows are there, computed by family_replay


@pytest.mark.parametrize(
    "root",
    ["s3://bucket/store", "gs://bucket/store", "mock:///sandbox-store"],
)
def test_object_store_roots_are_locked_down_too(places, root, monkeypatch) -> None:
    """Before issue 11 a URI root had no sandbox at all. Store() opens none of these (no network)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # an s3:// store needs credentials, read from here only
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    store = Store(root)
    con = analysis.replay.db._new_connection()
    try:
        analysis.replay.db._lock_down(con, store)
        allowed = con.execute("SELECT current_setting('allowed_directories')").fetchone()[0]
        spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        assert con.execute("SELECT current_setting('enable_external_access')").fetchone()[0] is False
        for sql in (
            "SELECT * FROM read_text('/proc/self/environ')",
            "SELECT * FROM read_text('{outside}/secret.txt')",
            "SELECT * FROM read_text('file://{outside}/secret.txt')",
            "SELECT * FROM read_csv('/etc/passwd')",
            "SELECT * FROM read_text('https://example.com/')",
            "SELECT * FROM read_parquet('s3://other-bucket/x.parquet')",
            "SELECT * FROM read_parquet('{store}/rounds/**/*.parquet')",  # a local store is not this store
        ):
            with pytest.raises(duckdb.PermissionException):
                con.execute(_fill(sql, places)).fetchall()
        with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
            con.execute("SET enable_external_access = true")
    finally:
        con.close()
    assert sorted(allowed) == sorted([f"{store.uri}/{t}/" for t in TABLES] + [f"{spill}/"])


def test_a_uri_store_through_the_cli(places, capsys) -> None:
    """A URI root through shp-query: pyarrow's in-memory mock filesystem holds no store (refused in one line,
    nothing created); the sandbox of a file:// store refuses every probe."""
    assert main(["--store", "mock:///sandbox-store", "--format", "csv", "SELECT count(*) AS n FROM replay"]) == 2
    assert capsys.readouterr().err.startswith("shp-query: no store at mock:")
    root = f"file://{places['store']}"
    assert main(["--store", root, "--format", "csv", "SELECT count(*) AS n FROM scenarios"]) == 0
    assert capsys.readouterr().out.split()[0] == "n"
    before = snapshot(places["outside"])
    for sql, code in (
        ("SELECT * FROM read_text('/proc/self/environ')", 1),
        ("SELECT * FROM read_text('{outside}/secret.txt')", 1),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{outside}/evil.csv'", 2),
        ("FROM enable_profiling(format = 'json', save_location = '{outside}/evil.json')", 1),
    ):
        assert main(["--store", root, _fill(sql, places)]) == code, sql
        out, err = capsys.readouterr()
        assert out == "" and SECRET not in err and len(err.splitlines()) == 1, err
    assert snapshot(places["outside"]) == before


def test_the_issue_repro_through_the_installed_command(places, tmp_path) -> None:
    """The probes of issue 11 as reported: a file:// store, the API key in the environment, a new part."""
    exe = Path(sys.executable).with_name("shp-query")
    assert exe.is_file(), f"{exe}: the shp-query entry point is not installed"
    key = "sk-canary-" + hashlib.sha256(b"issue-11").hexdigest()[:24]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "OPENAI_API_KEY": key, "TMPDIR": str(tmp)}
    root = f"file://{places['store']}"
    before = snapshot(places["store"])

    def run(sql: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), "--store", root, "--format", "csv", _fill(sql, places)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    leak = run("SELECT * FROM read_text('/proc/self/environ')")
    assert leak.returncode == 1 and key not in leak.stdout + leak.stderr
    assert leak.stderr.startswith("shp-query: refused: the read-only sandbox") and len(leak.stderr.splitlines()) == 1
    write = run(f"EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{PART}'")
    assert write.returncode == 2 and "read-only" in write.stderr and len(write.stderr.splitlines()) == 1
    assert snapshot(places["store"]) == before
    fine = run("SELECT count(*) AS n FROM scenarios")  # the store still answers
    assert fine.returncode == 0 and fine.stdout.split() == ["n", "6"], fine.stderr
    assert os.listdir(tmp) == []
