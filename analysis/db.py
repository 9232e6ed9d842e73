"""Open a DuckDB connection on a store: views, replay, the decide UDF.

    con = analysis.connect("runs/store")                  # every policy, paper defaults
    con.sql("SELECT * FROM policy_summary").show()

The connection is in-memory: the store's Parquet parts are only ever read.
With ``read_only=True`` (the default) file access outside the store's table
folders (and the temp spill folder) is disabled and the configuration locked, so SQL cannot
reach other files; :mod:`analysis.query` additionally refuses any statement
that is not a query (COPY, ATTACH, EXPORT ...), so the store cannot be changed.
The spill folder (``<tmp>/shp-duckdb-<pid>-<random>``) exists only while a
connection that spilled is open: DuckDB creates it on the first spill and
removes it when the connection closes.
"""

from __future__ import annotations

import math
import os
import secrets
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analysis import families, sql
from analysis.policy_table import default_policies, policies_sql
from shp_ray.policy import cascade as halting
from shp_ray.policy import weights as weight_strategies
from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.scoring import check_weights
from shp_ray.policy.table import Policy
from shp_ray.policy.trajectory import Round, Trajectory
from storage.parts import Store
from storage.schemas import EMBEDDING_DIM, TABLES
from storage.verify import DamagedStore, require_sound

VIEWS_FILE = "views.sql"
DEFAULT_DELTA = 0.02


class AnalysisError(ValueError):
    """A store the analysis cannot read as asked (says what and where)."""


@dataclass(frozen=True)
class Setup:
    """What a connection was opened with; the report prints it."""

    store: str
    judge: str | None
    judge_prompt_version: str | None
    weights: dict[str, float]
    dim: int
    delta: float
    policies: tuple[Policy, ...]


def _new_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")  # no progress noise on stderr in scripts and tests
    return con


def _sqltype(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
        return _sqltype(t.value_type) + "[]"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    raise TypeError(f"no SQL type for {t}")


def _source(store: Store, table: str) -> str:
    if store.parts(table):
        return f"SELECT * FROM {sql.read_parquet(store.glob(table))}"
    return sql.empty_select([(f.name, _sqltype(f.type)) for f in TABLES[table]])


def _rounds_source(store: Store, gen_id: str | None, scenario_ids: Sequence[str] | None) -> str:
    """The rounds parts, optionally narrowed to one generation and a set of scenarios (a sweep job's scope)."""
    where = ["true"]
    if gen_id is not None:
        where.append(f"gen_id = {sql.quote(gen_id)}")
    if scenario_ids is not None:
        where.append(f"scenario_id IN ({', '.join(sql.quote(s) for s in scenario_ids) or 'NULL'})")
    source = _source(store, "rounds")
    return source if len(where) == 1 else f"SELECT * FROM ({source}) WHERE {' AND '.join(where)}"


def embedding_dim(store: Store) -> int:
    """The embedding size of the rounds parts, from their Parquet footers (no data scan)."""
    dims: dict[int, str] = {}
    for part in store.parts("rounds"):
        field = pq.read_schema(part, filesystem=store.fs).field("embedding")
        if not pa.types.is_fixed_size_list(field.type):
            raise AnalysisError(f"{part}: rounds.embedding is {field.type}, expected a fixed-size float list")
        dims.setdefault(field.type.list_size, part)
    if len(dims) > 1:
        where = "; ".join(f"dim {d} in {p}" for d, p in dims.items())
        raise AnalysisError(f"store {store.uri} mixes embedding sizes ({where}); use one store per embedder")
    return next(iter(dims), EMBEDDING_DIM)


def _pick_judge(
    con: duckdb.DuckDBPyConnection, judge: str | None, version: str | None
) -> tuple[str | None, str | None]:
    rows = con.sql(
        "SELECT judge, judge_prompt_version, count(*) FROM judgments_raw GROUP BY ALL ORDER BY 1, 2"
    ).fetchall()
    found = [(j, v) for j, v, _ in rows if (judge is None or j == judge) and (version is None or v == version)]
    if not rows:
        return judge, version  # nothing judged yet: IS is NULL everywhere
    if not found:
        known = ", ".join(f"{j!r} (prompt {v!r}, {n} rows)" for j, v, n in rows)
        raise AnalysisError(f"no judgments by judge={judge!r} prompt_version={version!r}; the store has: {known}")
    if len({j for j, _ in found}) > 1 or len({v for _, v in found}) > 1:
        known = ", ".join(f"{j!r} (prompt {v!r})" for j, v in found)
        raise AnalysisError(f"several judges in the store ({known}); pass judge= (and judge_prompt_version=)")
    return found[0]


def _judge_where(judge: str | None, version: str | None) -> str:
    parts = ["true"]
    if judge is not None:
        parts.append(f"judge = {sql.quote(judge)}")
    if version is not None:
        parts.append(f"judge_prompt_version = {sql.quote(version)}")
    return " AND ".join(parts)


def build_statements(
    store: Store,
    *,
    judge: str | None,
    judge_prompt_version: str | None,
    weights: Mapping[str, float],
    policies: Iterable[Policy],
    delta: float,
    dim: int,
    materialize: bool = True,
    gen_id: str | None = None,
    scenario_ids: Sequence[str] | None = None,
    with_families: bool = True,
) -> list[str]:
    """Every statement that sets up the views (shared by connect() and views.sql).

    ``with_families``: the other stopping families' rows (they need the Python UDF
    ``shp_family``, so the plain-CLI views.sql leaves them out).
    """
    policies = tuple(policies)
    kind = "TEMP TABLE" if materialize else "VIEW"
    stmts = [f"CREATE OR REPLACE VIEW {t} AS {_source(store, t)}" for t in ("scenarios", "generations")]
    stmts += [
        f"CREATE OR REPLACE VIEW {t} AS {_source(store, t)}"
        for t in ("failures", "manifests", "results", "feedback_embeddings")
    ]
    stmts += [
        f"CREATE OR REPLACE VIEW round_parts AS {_rounds_source(store, gen_id, scenario_ids)}",
        f"CREATE OR REPLACE VIEW judgments_raw AS {_source(store, 'judgments')}",
        "CREATE OR REPLACE VIEW judgments AS SELECT *, judge_prompt_tokens + judge_completion_tokens AS judge_tokens"
        f" FROM judgments_raw WHERE {_judge_where(judge, judge_prompt_version)}",
        f"CREATE OR REPLACE {kind} round_signals AS "
        + sql.round_signals_sql(dim, _judge_where(judge, judge_prompt_version), weights),
        "CREATE OR REPLACE VIEW rounds AS SELECT s.gen_id, s.scenario_id, s.round, r.draft, s.feedback, s.draft_hash,"
        " s.distance, s.is_score, s.faithfulness, s.answer_relevancy, s.context_precision, s.context_recall,"
        " s.writer_tokens, s.critic_tokens, s.judge_tokens, s.judge, r.writer_latency_s, r.critic_latency_s"
        " FROM round_signals s JOIN round_parts r"
        " ON r.gen_id = s.gen_id AND r.scenario_id = s.scenario_id AND r.round = s.round",
        f"CREATE OR REPLACE {kind} trajectories AS " + sql.trajectories_sql(),
        policies_sql(policies),
        sql.t95_table_sql(),
        "CREATE OR REPLACE VIEW replay_core AS " + sql.replay_sql("sql"),
        "CREATE OR REPLACE VIEW replay AS SELECT * FROM replay_core",
        *(families.statements(policies, dim, materialize) if with_families else []),
        "CREATE OR REPLACE VIEW policy_summary AS " + sql.policy_summary_sql(delta),
    ]
    return stmts


def _cascade_udf(d_inf, s, fb, eps, k, warmup, cap, critic, entropy, gain, min_gain):  # noqa: ANN001, ANN202
    """Arrow-vectorised UDF: loop decide() over each (policy, trajectory) row -> t*8 + code."""
    codes = {r: c for c, r in sql.REASON_CODES.items()}
    cols = [c.to_pylist() for c in (d_inf, s, fb, eps, k, warmup, cap, critic, entropy, gain, min_gain)]
    out = []
    for d_row, s_row, f_row, e, kk, w, c, cr, en, ga, mg in zip(*cols, strict=True):
        cfg = HaltConfig(eps=e, k=kk, warmup=w, max_rounds=c, critic=cr, entropy=en, gain=ga, min_gain=mg)
        dist = [math.nan if v is None else v for v in d_row[1:]]
        scores = [math.nan if v is None else v for v in s_row]
        code = None
        for t in range(1, c + 1):
            decision = halting.decide(t, dist[: t - 1], scores[:t], f_row[t - 2] if t >= 2 else "", cfg)
            if decision.halt:
                code = t * 8 + codes[decision.reason]
                break
        out.append(code)
    return pa.array(out, pa.int64())


def register_udfs(con: duckdb.DuckDBPyConnection) -> None:
    """``shp_cascade``: the cascade through decide(), for the ``replay_udf`` view."""
    from duckdb import sqltypes as t

    dl, fl = duckdb.list_type(t.DOUBLE), duckdb.list_type(t.VARCHAR)
    con.create_function(
        "shp_cascade",
        _cascade_udf,
        [dl, dl, fl, t.DOUBLE, t.INTEGER, t.INTEGER, t.INTEGER, t.BOOLEAN, t.BOOLEAN, t.BOOLEAN, t.DOUBLE],
        t.BIGINT,
        type="arrow",
        side_effects=False,
    )
    con.execute("CREATE OR REPLACE VIEW replay_udf AS " + sql.replay_sql("udf"))


def check_trajectories(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Refuse a store whose rounds are not 1..T once each per trajectory (say which)."""
    bad = con.sql(
        "SELECT gen_id, scenario_id, count(*) AS n, count(DISTINCT round) AS distinct_rounds, min(round), max(round)"
        " FROM round_parts GROUP BY gen_id, scenario_id"
        " HAVING n <> distinct_rounds OR min(round) <> 1 OR max(round) <> n ORDER BY 1, 2 LIMIT 5"
    ).fetchall()
    if bad:
        lines = "; ".join(
            f"gen_id={g!r} scenario_id={s!r}: {n} rows, {dn} distinct rounds, rounds {lo}..{hi}"
            for g, s, n, dn, lo, hi in bad
        )
        raise AnalysisError(f"store {store.uri}: trajectories must hold rounds 1..T once each; {lines}")


def _spill_path() -> str:
    """A fresh, unpredictable path under the temp folder for one connection's spill files, NOT created.

    DuckDB creates its ``temp_directory`` only when a query first spills, and removes a folder it
    created itself when the database closes (``close()``, garbage collection, interpreter exit); a
    folder made here (``mkdtemp``) would be emptied but left behind, one per connection. So a
    connection that never spills leaves nothing even if its process is killed.
    """
    while True:
        path = os.path.join(tempfile.gettempdir(), f"shp-duckdb-{os.getpid()}-{secrets.token_hex(8)}")
        if not os.path.lexists(path):
            return path


def _sandbox_dirs(store: Store, spill: str) -> list[str]:
    """The only folders a locked-down connection may open: each table's folder, spelled exactly as the
    views read it (:meth:`Store.glob` without its file pattern), and the connection's spill folder.

    The same rule for every kind of root: a local path; ``file:///...`` (DuckDB strips the scheme from
    both the entry and the path it checks, so the entry guards the local folder); ``s3://`` / ``gs://``
    (readable only through an extension loaded before the lock-down: none can be loaded after it).
    Not the store root: ``views.sql``, ``_cache/`` (the SQLite caches of model responses) and whatever
    else sits beside the tables stay unreadable.
    """
    return [store.glob(table).rsplit("/", 1)[0] + "/" for table in TABLES] + [spill + "/"]


def _lock_down(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Sandbox the connection, whatever the store root, with DuckDB's own settings (run last in connect()).

    Reads: only :func:`_sandbox_dirs` (``allowed_directories`` with ``enable_external_access = false``,
    which also refuses every other path, URL, ``LOAD``/``INSTALL`` and Python replacement scans of
    variables); no extension is auto-installed or auto-loaded, no secret is read from or written to
    ``~/.duckdb``. Settings: ``lock_configuration`` (last) makes every ``SET``/``RESET``/``PRAGMA`` and
    the table functions that change settings (``enable_profiling(save_location=...)``,
    ``enable_logging(...)``) fail, so none of this can be undone. Writes: DuckDB may still write inside
    the allowed folders (it has no read-only flavour of them), which is why :mod:`analysis.query`
    accepts queries only. Views and UDFs made before this keep working; spilling goes to ``spill``.
    """
    spill = _spill_path()
    con.execute(f"SET temp_directory = {sql.quote(spill)}")
    dirs = ", ".join(sql.quote(d) for d in _sandbox_dirs(store, spill))
    for stmt in (
        f"SET allowed_directories = [{dirs}]",
        "SET enable_external_access = false",
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET allow_community_extensions = false",
        "SET allow_persistent_secrets = false",
        "SET python_enable_replacements = false",
        "SET lock_configuration = true",
    ):
        con.execute(stmt)


def _require_sound(store: Store) -> None:
    """Every part checked before it is believed (each once: storage.verify records sound parts)."""
    try:
        require_sound(store)
    except DamagedStore as exc:
        raise AnalysisError(str(exc)) from None


def resolve_weights(weights: Mapping[str, float] | str | None) -> dict[str, float]:
    if weights is None or weights == "uniform":
        return weight_strategies.uniform()
    if isinstance(weights, str):
        raise AnalysisError(f"weights {weights!r}: pass a dict metric -> weight (see shp_ray.policy.weights)")
    return dict(weights)


def connect(
    store_root: str | Path,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
    read_only: bool = True,
    *,
    judge_prompt_version: str | None = None,
    delta: float = DEFAULT_DELTA,
    materialize: bool = True,
    validate: bool = True,
    gen_id: str | None = None,
    scenario_ids: Sequence[str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views and the replay.

    ``gen_id`` / ``scenario_ids`` narrow the trajectories to one generation and a
    set of scenarios (what one sweep job generated and replays); default: all.

    ``judge`` selects whose judgments give IS (needed only when the store holds
    several); ``weights`` a dict over METRICS (default uniform); ``policies``
    the rows of the ``policies`` table (default: every standard policy and the
    seven ablation cells). ``materialize`` computes the per-round signals once
    (one scan of the embeddings) so every later replay is arithmetic only.
    :func:`setup_of` returns what was resolved (judge, weights, policies).
    """
    store = Store(store_root)
    if store.local and not Path(store.path).is_dir():
        raise AnalysisError(f"no store at {store.path} (expected <root>/<table>/part-*.parquet)")
    _require_sound(store)
    w = check_weights(resolve_weights(weights))
    pols = tuple(default_policies() if policies is None else policies)
    con = _new_connection()
    try:
        con.execute(f"CREATE OR REPLACE VIEW judgments_raw AS {_source(store, 'judgments')}")
        con.execute(f"CREATE OR REPLACE VIEW round_parts AS {_rounds_source(store, gen_id, scenario_ids)}")
        if validate:
            check_trajectories(con, store)
        judge, version = _pick_judge(con, judge, judge_prompt_version)
        dim = embedding_dim(store)
        stmts = build_statements(
            store,
            judge=judge,
            judge_prompt_version=version,
            weights=w,
            policies=pols,
            delta=delta,
            dim=dim,
            materialize=materialize,
            gen_id=gen_id,
            scenario_ids=scenario_ids,
        )
        families.register(con)  # before the views that call it
        for stmt in stmts:
            con.execute(stmt)
        register_udfs(con)
        if read_only:
            _lock_down(con, store)
    except BaseException:
        con.close()  # never hand back (or leak) a half-built connection
        raise
    _SETUPS[id(con)] = Setup(store.uri, judge, version, w, dim, delta, pols)
    return con


_SETUPS: dict[int, Setup] = {}


def setup_of(con: duckdb.DuckDBPyConnection) -> Setup:
    """The judge, weights, delta and policies a connection was opened with."""
    try:
        return _SETUPS[id(con)]
    except KeyError:
        raise AnalysisError("this connection was not opened by analysis.connect") from None


def write_init_script(
    store_root: str | Path,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
    *,
    judge_prompt_version: str | None = None,
    delta: float = DEFAULT_DELTA,
) -> Path:
    """Write ``<store>/views.sql`` so the plain DuckDB CLI opens the same views:
    ``duckdb -init <store>/views.sql``. Regenerate it after new parts arrive
    (a table that had no parts is an empty view in the script)."""
    store = Store(store_root)
    if not store.local:
        raise AnalysisError(f"views.sql is written only for local stores, not {store.uri}")
    _require_sound(store)
    con = _new_connection()
    con.execute(f"CREATE VIEW judgments_raw AS {_source(store, 'judgments')}")
    judge, version = _pick_judge(con, judge, judge_prompt_version)
    con.close()
    stmts = build_statements(
        store,
        judge=judge,
        judge_prompt_version=version,
        weights=check_weights(resolve_weights(weights)),
        policies=default_policies() if policies is None else policies,
        delta=delta,
        dim=embedding_dim(store),
        with_families=False,
    )
    header = (
        "-- shp-ray views over this store (generated by analysis.db.write_init_script; do not edit).\n"
        f"-- judge: {judge!r} prompt {version!r}. Open with: duckdb -init {store.path}/{VIEWS_FILE}\n"
    )
    body = "\n".join(s.rstrip().rstrip(";") + ";\n" for s in stmts)
    path = Path(store.path) / VIEWS_FILE
    tmp = path.with_suffix(".sql.partial")
    tmp.write_text(header + body)
    tmp.replace(path)
    return path


SIGNAL_COLUMNS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("distance", pa.float64()),
        ("is_score", pa.float64()),
        ("feedback", pa.string()),
        ("writer_tokens", pa.int64()),
        ("critic_tokens", pa.int64()),
        ("judge_tokens", pa.int64()),
    ]
)


SIGNAL_SELECT = ", ".join(SIGNAL_COLUMNS.names)


def trajectories_from_signals(rows: Iterable[tuple]) -> list[Trajectory]:
    """Trajectories for the reference executor from rows of SIGNAL_COLUMNS, ordered by
    (gen_id, scenario_id, round): the SAME numbers the SQL replay reads (NULL -> NaN)."""
    out: dict[tuple[str, str], list[Round]] = {}
    for g, s, t, d, score, fb, w, c, j in rows:
        out.setdefault((g, s), []).append(
            Round(t, math.nan if d is None else d, math.nan if score is None else score, fb, w, c, j)
        )
    return [Trajectory(s, tuple(r), gen_id=g) for (g, s), r in out.items()]


def connect_signals(
    signals: pa.Table, policies: Iterable[Policy] | None = None, *, delta: float = DEFAULT_DELTA
) -> duckdb.DuckDBPyConnection:
    """The replay over given per-round signals (no store): the same SQL as :func:`connect`.

    ``signals`` has SIGNAL_COLUMNS (one row per round; distance NaN/NULL at
    round 1). Property tests feed hypothesis trajectories through it, and the
    benchmark times the replay apart from the one-time store scan.
    """
    try:
        table = signals.select(SIGNAL_COLUMNS.names).cast(SIGNAL_COLUMNS)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise AnalysisError(f"signals do not match {SIGNAL_COLUMNS.names}: {exc}") from None
    con = _new_connection()
    con.register("signals_input", table)
    con.execute("CREATE TEMP TABLE round_signals AS SELECT * FROM signals_input")
    con.unregister("signals_input")
    for stmt in (
        "CREATE OR REPLACE TEMP TABLE trajectories AS " + sql.trajectories_sql(),
        policies_sql(default_policies() if policies is None else policies),
        sql.t95_table_sql(),
        "CREATE OR REPLACE VIEW replay_core AS " + sql.replay_sql("sql"),
        "CREATE OR REPLACE VIEW replay AS SELECT * FROM replay_core",
        "CREATE OR REPLACE VIEW policy_summary AS " + sql.policy_summary_sql(delta),
    ):
        con.execute(stmt)
    register_udfs(con)
    return con


def set_policies(con: duckdb.DuckDBPyConnection, policies: Iterable[Policy]) -> None:
    """Replace the rows of ``policies`` (the views follow: a cell is a row, not a generation)."""
    policies = tuple(policies)
    con.execute(policies_sql(policies))
    families.refresh(con, policies)
    if id(con) in _SETUPS:
        _SETUPS[id(con)] = replace(_SETUPS[id(con)], policies=policies)
