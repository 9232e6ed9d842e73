"""Open a DuckDB connection on a store: views, replay, the decide UDF; and what it was opened with.

    con = analysis.connect("runs/store")                  # every policy, paper defaults
    con.sql("SELECT * FROM policy_summary").show()

The connection is in-memory and, by default, sandboxed read-only (:mod:`analysis.replay.sandbox`).
The modules it puts together: :mod:`analysis.replay.views` (the statements), :mod:`analysis.sql` (their
text), :mod:`analysis.replay.cascade_udf` (the Python UDF), :mod:`analysis.replay.family_replay` (the families,
column-wise), :mod:`analysis.replay.signals` (the replay over given per-round signals, without a store).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import duckdb

from analysis import sql
from analysis.errors import AnalysisError, require_sound
from analysis.replay import catalog, costs, family_replay, uniqueness
from analysis.replay.cascade_udf import register_udfs
from analysis.replay.derived import DerivedCache
from analysis.replay.policy_table import policies_sql

# Tests patch ``analysis.replay.db._new_connection`` and call ``analysis.replay.db._lock_down``: connect() looks
# both up here, so a patch of this module's name takes effect.
from analysis.replay.sandbox import lock_down as _lock_down
from analysis.replay.sandbox import new_connection as _new_connection
from analysis.replay.scope import DEFAULT_DELTA, ReplayScope, open_for_reading, resolve_weights, scope_of
from analysis.replay.signals import SIGNAL_COLUMNS, SIGNAL_SELECT, connect_signals, trajectories_from_signals
from analysis.replay.sources import TableSources
from analysis.replay.stored_inputs import relation as stored_relation
from analysis.replay.stored_inputs import stored_facts
from analysis.replay.views import (
    MIXED,
    StoreFacts,
    guarded_sources,
    judgments_unique,
    source,
    store_facts,
)
from shp_ray.policy.table import Policy
from shp_ray.providers.prices import PriceTable
from storage.parts import Store

__all__ = [  # what callers import from here (some defined in the modules above)
    "DEFAULT_DELTA",
    "SIGNAL_COLUMNS",
    "SIGNAL_SELECT",
    "VIEWS_FILE",
    "AnalysisError",
    "ReplayScope",
    "Setup",
    "connect",
    "connect_signals",
    "register_udfs",
    "resolve_weights",
    "set_policies",
    "setup_of",
    "trajectories_from_signals",
    "write_init_script",
]

VIEWS_FILE = "views.sql"
_log = logging.getLogger(__name__)


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
    signals: str = "computed"  # where the per-round signals came from (analysis.replay.views.signals_source)
    prices: PriceTable | None = None  # what the cost columns are priced with (None: nothing, every cost NULL)
    batch: bool = False  # some call in scope was paid in batch mode (replay_inputs has the batch lists)
    # replay_inputs: "built" now from the signals and judgments, "written" (built now from the writer's
    # trajectory_inputs rows: replay.stored_inputs), both kept; "stored" (read back: replay.derived) or "view"
    inputs: str = "built"


# Each connection's Setup lives exactly as long as the connection object: a weak key drops the entry
# when the connection is garbage-collected, so nothing piles up and a later connection (which may
# reuse the same id()) never sees an earlier one's setup.
_SETUPS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, Setup] = weakref.WeakKeyDictionary()


def connect(
    store: str | Path | Store | ReplayScope,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
    read_only: bool = True,
    *,
    materialize: bool = True,
    validate: bool = True,
    ray_address: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views and the replay.

    ``store``: a path, a :class:`Store`, or a :class:`ReplayScope` saying what is replayed (one generation, a
    set of scenarios or a :class:`ScenarioSlice` of them, the judge and its prompt version, the weights, the
    policies, the margin ``delta``, the prices, DuckDB's memory bound); given a path or a Store, ``judge``,
    ``weights`` and ``policies`` are the scope (default: every trajectory, the only judge, uniform weights,
    every standard policy and the seven ablation cells). ``materialize`` computes the per-round signals once
    (one scan of the stored signals) so every later replay is arithmetic only.
    :func:`setup_of` returns what was resolved (judge, weights, policies, where the signals came from).
    ``ray_address`` (``auto``, ``host:port``): replay a bucketed store bucket by bucket as Ray tasks, each through
    this function; the connection then holds the combined ``policy_summary`` only (:mod:`analysis.replay.ray_replay`).
    """
    scope = scope_of(store, judge, weights, policies).resolved()
    if ray_address is not None:
        from analysis.replay import ray_replay

        options = {"read_only": read_only, "materialize": materialize, "validate": validate}
        con, setup = ray_replay.connect(scope, ray_address, options, (connect, setup_of))
        _SETUPS[con] = setup
        return con
    opened = open_for_reading(scope.store)
    # a remote store is listed once: verification, footers and the views all use this listing
    scope = replace(scope, store=opened.snapshot() if opened.remote else opened)
    require_sound(scope.store)
    con = _new_connection(scope.memory_limit)
    try:
        tables, derived = TableSources(scope.store, con), DerivedCache(scope.store)
        facts = _read_facts(con, tables, derived, scope, validate)
        if facts.signals == MIXED:
            _warn_unsigned(facts.missing, scope.store.uri)
        inputs = _create_views(con, tables, derived, scope, facts, materialize)
        if family_replay.has_families(scope.policies):  # the family rows: computed column-wise in Python, then SQL
            family_replay.refresh(con, scope.policies, materialize, facts.dim, facts.batch)
        register_udfs(con, facts.rounds)
        if read_only:
            _lock_down(con, scope.store)
    except BaseException:
        con.close()  # never hand back (or leak) a half-built connection
        raise
    _SETUPS[con] = Setup(
        scope.store.uri, facts.judge, facts.judge_prompt_version, dict(scope.weights), facts.dim, scope.delta,
        scope.policies, facts.signals, scope.prices, facts.batch, inputs,
    )  # fmt: skip
    return con


def _read_once(
    con: duckdb.DuckDBPyConnection, tables: TableSources, scope: ReplayScope, skip: Sequence[str], once: Sequence[str]
) -> None:
    """Read each row once (analysis.replay.uniqueness): leave out the parts another part holds whole (``skip``), read
    the tables that hold copies mixed with new rows (``once``) through a window."""
    if skip or once:
        tables.skip = frozenset(skip)
        for stmt in uniqueness.statements(guarded_sources(tables, scope.gen_id, scope.scenario_ids), once):
            con.execute(stmt)


def _read_facts(
    con: duckdb.DuckDBPyConnection, tables: TableSources, derived: DerivedCache, scope: ReplayScope, validate: bool
) -> StoreFacts:
    """The store's facts in scope (:class:`StoreFacts`), kept per part set by analysis.replay.derived."""
    store, gen_id, ids = scope.store, scope.gen_id, scope.scenario_ids
    guarded = guarded_sources(tables, gen_id, ids)
    sources = uniqueness.statements(guarded)
    for stmt in sources:
        con.execute(stmt)
    asked = repr((scope.judge, scope.judge_prompt_version, validate))

    def facts_now() -> dict:
        found = stored_facts(con, store, tables, gen_id, ids, scope.judge, scope.judge_prompt_version)
        if found is not None:  # the writer's trajectory_inputs rows account for every part in scope
            return asdict(found)
        skip, once = uniqueness.check(con, store, guarded)  # before the rest read the views: each row once
        _read_once(con, tables, scope, skip, once)
        found = store_facts(con, store, scope.judge, scope.judge_prompt_version, gen_id, ids, validate)
        return asdict(replace(found, skip_parts=skip, read_once=once))

    facts = StoreFacts(**derived.remember(derived.key([*sources, asked]), facts_now))
    _read_once(con, tables, scope, facts.skip_parts, facts.read_once)
    return facts


def _warn_unsigned(missing: int, uri: str) -> None:
    _log.warning(
        "%d trajector%s in %s have no stored signals (written before the signals table, or a run was "
        "killed between its rounds and their signals): computing them from the embeddings now. "
        "Store them once: shp-query --store %s --signals rebuild",
        missing, "y" if missing == 1 else "ies", uri, uri,
    )  # fmt: skip


def _create_views(
    con: duckdb.DuckDBPyConnection,
    tables: TableSources,
    derived: DerivedCache,
    scope: ReplayScope,
    facts: StoreFacts,
    materialize: bool,
) -> str:
    """Run the catalog's statements (:func:`analysis.replay.catalog.statements`), replay_inputs read in place from the
    writer's rows (``written``), else from the kept file when there is one (``stored``), else computed into one
    (``built``); returns which (:attr:`Setup.inputs`; ``view``: not materialised)."""
    where = sql.judge_where(facts.judge, facts.judge_prompt_version)
    price_rows = costs.generation_price_rows(con, source(tables, "generations"), scope.prices, facts.judge, where)
    stored = stored_relation(tables, scope.gen_id, scope.scenario_ids) if facts.inputs else None
    options = catalog.BuildOptions(price_rows=price_rows, materialize=materialize, stored_inputs=stored)

    def build(**changes: object) -> list[str]:
        return catalog.statements(catalog.Build.of_store(tables, scope, facts, replace(options, **changes)))

    stmts = build()
    inputs, at = ("built" if materialize else "view"), _inputs_at(stmts)
    # The writer's rows are read in place, on every open, the first included: in parallel over their parts, a
    # replay reads them as fast as a kept file (which held one row group at 100k trajectories: one thread).
    keep = materialize and not facts.inputs
    inputs = "written" if facts.inputs and materialize else inputs
    # what computes replay_inputs, and the parts it reads (a view is computed when read: nothing to keep)
    key = derived.key(stmts[: at + 1]) if keep else ""
    kept = derived.inputs(key) if keep else None
    if keep and kept is None and judgments_unique(con, where):  # no pick needed
        stmts = build(unique_judgments=True)
    for i, stmt in enumerate(stmts):
        if i == at and kept is not None and derived.attach_inputs(con, kept, key):
            inputs = "stored"
            continue
        if i == at and keep and derived.build_inputs(con, key, _inputs_select(stmt)):
            continue  # computed into the kept file, and read there
        con.execute(sql.deferred(stmt))
    return inputs


def _inputs_at(statements: Sequence[str]) -> int:
    """The index of the statement that creates replay_inputs."""
    head = sql.create("replay_inputs", "", table=True).removesuffix(" AS ")
    head_view = sql.create("replay_inputs", "").removesuffix(" AS ")
    return next(i for i, s in enumerate(statements) if s.startswith((head + " ", head_view + " ")))


def _inputs_select(statement: str) -> str:
    """The query of the statement that creates the replay_inputs table."""
    return statement.removeprefix(sql.create("replay_inputs", "", table=True))


def setup_of(con: duckdb.DuckDBPyConnection) -> Setup:
    """The judge, weights, delta and policies a connection was opened with."""
    try:
        return _SETUPS[con]
    except KeyError:
        raise AnalysisError("this connection was not opened by analysis.connect") from None


def set_policies(con: duckdb.DuckDBPyConnection, policies: Iterable[Policy]) -> None:
    """Replace the rows of ``policies`` (the views follow: a cell is a row, not a generation)."""
    policies = tuple(policies)
    con.execute(policies_sql(policies))
    setup = _SETUPS.get(con)
    family_replay.refresh(con, policies, dim=setup.dim if setup else None, batch=setup.batch if setup else False)
    if con in _SETUPS:
        _SETUPS[con] = replace(_SETUPS[con], policies=policies)


def write_init_script(
    store: str | Path | Store | ReplayScope,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
) -> Path:
    """Write ``<store>/views.sql`` so the plain DuckDB CLI opens the same views:
    ``duckdb -init <store>/views.sql``. Regenerate it after new parts arrive
    (a table that had no parts is an empty view in the script). ``store``: as :func:`connect` takes it (the
    scope's generation, scenarios and memory bound are not used: the script covers the whole store)."""
    scope = scope_of(store, judge, weights, policies).resolved()
    store = open_for_reading(scope.store)
    if not store.local:
        raise AnalysisError(
            f"views.sql is written only for local stores, not {store.uri} (the plain DuckDB CLI reads s3:// only "
            "through its httpfs extension)"
        )
    require_sound(store)
    scope = replace(scope, gen_id=None, scenario_ids=None)
    con = _new_connection()
    tables = TableSources(store)
    guarded = guarded_sources(tables, None, None)
    for stmt in uniqueness.statements(guarded):
        con.execute(stmt)
    skip, once = uniqueness.check(con, store, guarded)
    _read_once(con, tables, scope, skip, once)
    facts = store_facts(con, store, scope.judge, scope.judge_prompt_version, None, None, validate=False)
    judge, version = facts.judge, facts.judge_prompt_version
    where = sql.judge_where(judge, version)
    price_rows = costs.generation_price_rows(con, source(tables, "generations"), scope.prices, judge, where)
    con.close()
    facts = replace(facts, read_once=tuple(once))
    options = catalog.BuildOptions(price_rows=price_rows, with_families=False)
    stmts = catalog.statements(catalog.Build.of_store(tables, scope, facts, options))
    header = (
        "-- shp-ray views over this store (generated by analysis.replay.db.write_init_script; do not edit).\n"
        f"-- judge: {judge!r} prompt {version!r}. Open with: duckdb -init {store.path}/{VIEWS_FILE}\n"
    )
    body = "\n".join(s.rstrip().rstrip(";") + ";\n" for s in stmts)
    path = Path(store.path) / VIEWS_FILE
    tmp = path.with_suffix(".sql.partial")
    tmp.write_text(header + body)
    tmp.replace(path)
    return path
