"""Open a DuckDB connection on a store: views, replay, the decide UDF; and what it was opened with.

    con = analysis.connect("runs/store")                  # every policy, paper defaults
    con.sql("SELECT * FROM policy_summary").show()

The connection is in-memory and, by default, sandboxed read-only (:mod:`analysis.sandbox`).
The modules it puts together: :mod:`analysis.views` (the statements), :mod:`analysis.sql` (their
text), :mod:`analysis.cascade_udf` (the Python UDF), :mod:`analysis.family_replay` (the families, column-wise),
:mod:`analysis.signals` (the replay over given per-round signals, without a store).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import duckdb

from analysis import costs, family_replay, sql, uniqueness
from analysis.cascade_udf import register_udfs
from analysis.derived import DerivedCache
from analysis.errors import AnalysisError, require_sound
from analysis.policy_table import default_policies, policies_sql

# Tests patch ``analysis.db._new_connection`` and call ``analysis.db._lock_down``: connect() looks
# both up here, so a patch of this module's name takes effect.
from analysis.sandbox import lock_down as _lock_down
from analysis.sandbox import new_connection as _new_connection
from analysis.signals import SIGNAL_COLUMNS, SIGNAL_SELECT, connect_signals, trajectories_from_signals
from analysis.sources import TableSources
from analysis.sql import ScenarioSlice
from analysis.stored_inputs import relation as stored_relation
from analysis.stored_inputs import stored_facts
from analysis.views import (
    DEFAULT_DELTA,
    MIXED,
    StoreFacts,
    build_statements,
    guarded_sources,
    judgments_unique,
    source,
    store_facts,
)
from shp_ray.policy import weights as weight_strategies
from shp_ray.policy.scoring import check_weights
from shp_ray.policy.table import Policy
from shp_ray.providers.prices import PriceTable, default_prices
from storage.parts import NoStore, Store, open_store

__all__ = [  # what callers import from here (some defined in the modules above)
    "DEFAULT_DELTA",
    "SIGNAL_COLUMNS",
    "SIGNAL_SELECT",
    "VIEWS_FILE",
    "AnalysisError",
    "Setup",
    "build_statements",
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
    signals: str = "computed"  # where the per-round signals came from (analysis.views.signals_source)
    prices: PriceTable | None = None  # what the cost columns are priced with (None: nothing, every cost NULL)
    batch: bool = False  # some call in scope was paid in batch mode (replay_inputs has the batch lists)
    # replay_inputs: "built" now from the signals and judgments, "written" (built now from the writer's
    # trajectory_inputs rows: analysis.stored_inputs), both kept; "stored" (read back: analysis.derived) or "view"
    inputs: str = "built"


# Each connection's Setup lives exactly as long as the connection object: a weak key drops the entry
# when the connection is garbage-collected, so nothing piles up and a later connection (which may
# reuse the same id()) never sees an earlier one's setup.
_SETUPS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, Setup] = weakref.WeakKeyDictionary()


def resolve_weights(weights: Mapping[str, float] | str | None) -> dict[str, float]:
    if weights is None or weights == "uniform":
        return weight_strategies.uniform()
    if isinstance(weights, str):
        raise AnalysisError(f"weights {weights!r}: pass a dict metric -> weight (see shp_ray.policy.weights)")
    return dict(weights)


def connect(
    store_root: str | Path | Store,
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
    scenario_ids: Sequence[str] | ScenarioSlice | None = None,
    memory_limit: str | None = None,
    prices: PriceTable | None = None,
    ray_address: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views and the replay.

    ``gen_id`` / ``scenario_ids`` narrow the trajectories to one generation and a
    set of scenarios (what one sweep job generated and replays) or a
    :class:`ScenarioSlice` of them (a store too large for memory, replayed slice by slice); default: all.

    ``judge`` selects whose judgments give IS (needed only when the store holds
    several); ``weights`` a dict over METRICS (default uniform); ``policies``
    the rows of the ``policies`` table (default: every standard policy and the
    seven ablation cells). ``materialize`` computes the per-round signals once
    (one scan of the stored signals) so every later replay is arithmetic only.
    ``memory_limit`` (e.g. ``"1.5GB"``) bounds DuckDB's memory: past it, it spills to disk.
    ``prices`` prices the cost columns (default: the shipped table, ``shp_ray/data/prices.yaml``).
    :func:`setup_of` returns what was resolved (judge, weights, policies, where the signals came from).
    ``ray_address`` (``auto``, ``host:port``): replay a bucketed store bucket by bucket as Ray tasks, each through
    this function; the connection then holds the combined ``policy_summary`` only (:mod:`analysis.ray_replay`).
    """
    if ray_address is not None:
        from analysis import ray_replay

        con, setup = ray_replay.connect(_open(store_root), ray_address, dict(locals()), (connect, setup_of))
        _SETUPS[con] = setup
        return con
    store = _open(store_root)
    if store.remote:
        store = store.snapshot()  # listed once: verification, footers and the views all use this listing
    require_sound(store)
    w = check_weights(resolve_weights(weights))
    pols = tuple(default_policies() if policies is None else policies)
    prices = default_prices() if prices is None else prices
    con = _new_connection(memory_limit)
    try:
        tables = TableSources(store, con)
        derived = DerivedCache(store)
        guarded = guarded_sources(tables, gen_id, scenario_ids)
        sources = uniqueness.statements(guarded)
        for stmt in sources:
            con.execute(stmt)
        asked = repr((judge, judge_prompt_version, validate))

        def read_once(skip: Sequence[str], once: Sequence[str]) -> None:  # copies of rows (analysis.uniqueness)
            if skip or once:
                tables.skip = frozenset(skip)
                for stmt in uniqueness.statements(guarded_sources(tables, gen_id, scenario_ids), once):
                    con.execute(stmt)

        def facts_now() -> dict:
            found = stored_facts(con, store, tables, gen_id, scenario_ids, judge, judge_prompt_version)
            if found is not None:  # the writer's trajectory_inputs rows account for every part in scope
                return asdict(found)
            skip, once = uniqueness.check(con, store, guarded)  # before the rest read the views: each row once
            read_once(skip, once)
            found = store_facts(con, store, judge, judge_prompt_version, gen_id, scenario_ids, validate)
            return asdict(replace(found, skip_parts=skip, read_once=once))

        facts = StoreFacts(**derived.remember(derived.key([*sources, asked]), facts_now))
        read_once(facts.skip_parts, facts.read_once)
        judge, version, dim, signals = facts.judge, facts.judge_prompt_version, facts.dim, facts.signals
        missing, rounds, fill_calls, batch = facts.missing, facts.rounds, facts.fill_calls, facts.batch
        where = sql.judge_where(judge, version)
        price_rows = costs.generation_price_rows(con, source(tables, "generations"), prices, judge, where)
        if signals == MIXED:
            _log.warning(
                "%d trajector%s in %s have no stored signals (written before the signals table, or a run was "
                "killed between its rounds and their signals): computing them from the embeddings now. "
                "Store them once: shp-query --store %s --signals rebuild",
                missing, "y" if missing == 1 else "ies", store.uri, store.uri,
            )  # fmt: skip
        build = partial(
            build_statements,
            tables,
            judge=judge,
            judge_prompt_version=version,
            weights=w,
            policies=pols,
            delta=delta,
            dim=dim,
            materialize=materialize,
            gen_id=gen_id,
            scenario_ids=scenario_ids,
            signals=signals,
            rounds=rounds,
            fill_calls=fill_calls,
            batch=batch,
            prices=prices,
            price_rows=price_rows,
            gen_ids=facts.gen_ids,
            read_once=facts.read_once,
            stored_inputs=stored_relation(tables, gen_id, scenario_ids) if facts.inputs else None,
        )
        stmts = build()
        inputs, at = ("built" if materialize else "view"), _inputs_at(stmts)
        inputs = "written" if facts.inputs and materialize else inputs  # computed from the writer's rows
        # what computes replay_inputs, and the parts it reads (a view is computed when read: nothing to keep)
        key = derived.key(stmts[: at + 1]) if materialize else ""
        kept = derived.inputs(key) if materialize else None
        if materialize and kept is None and not facts.inputs and judgments_unique(con, where):  # no pick needed
            stmts = build(unique_judgments=True)
        for i, stmt in enumerate(stmts):
            if i == at and kept is not None and derived.attach_inputs(con, kept, key):
                inputs = "stored"
                continue
            if i == at and materialize and derived.build_inputs(con, key, _inputs_select(stmt)):
                continue  # computed into the kept file, and read there
            con.execute(stmt)
        if family_replay.has_families(pols):  # the family rows: computed column-wise in Python, then SQL
            family_replay.refresh(con, pols, materialize, dim, batch)
        register_udfs(con, rounds)
        if read_only:
            _lock_down(con, store)
    except BaseException:
        con.close()  # never hand back (or leak) a half-built connection
        raise
    _SETUPS[con] = Setup(store.uri, judge, version, w, dim, delta, pols, signals, prices, batch, inputs)
    return con


def _open(store_root: str | Path | Store) -> Store:
    """The store, for reading (an object store: credentials, endpoint and bucket checked first); a root that
    holds no store is refused in one line, nothing created."""
    if isinstance(store_root, Store):  # opened already (a bucket of it: analysis.ray_replay)
        return store_root
    try:
        return open_store(store_root)
    except NoStore as exc:
        raise AnalysisError(str(exc)) from None


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
    store_root: str | Path,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
    *,
    judge_prompt_version: str | None = None,
    delta: float = DEFAULT_DELTA,
    prices: PriceTable | None = None,
) -> Path:
    """Write ``<store>/views.sql`` so the plain DuckDB CLI opens the same views:
    ``duckdb -init <store>/views.sql``. Regenerate it after new parts arrive
    (a table that had no parts is an empty view in the script)."""
    store = _open(store_root)
    if not store.local:
        raise AnalysisError(
            f"views.sql is written only for local stores, not {store.uri} (the plain DuckDB CLI reads s3:// only "
            "through its httpfs extension)"
        )
    require_sound(store)
    con = _new_connection()
    tables = TableSources(store)
    guarded = guarded_sources(tables, None, None)
    for stmt in uniqueness.statements(guarded):
        con.execute(stmt)
    skip, once = uniqueness.check(con, store, guarded)
    tables.skip = frozenset(skip)
    for stmt in uniqueness.statements(guarded_sources(tables, None, None), once):
        con.execute(stmt)
    facts = store_facts(con, store, judge, judge_prompt_version, None, None, validate=False)
    judge, version = facts.judge, facts.judge_prompt_version
    prices = default_prices() if prices is None else prices
    where = sql.judge_where(judge, version)
    price_rows = costs.generation_price_rows(con, source(tables, "generations"), prices, judge, where)
    con.close()
    stmts = build_statements(
        tables,
        judge=judge,
        judge_prompt_version=version,
        weights=check_weights(resolve_weights(weights)),
        policies=default_policies() if policies is None else policies,
        delta=delta,
        dim=facts.dim,
        with_families=False,
        signals=facts.signals,
        rounds=facts.rounds,
        fill_calls=facts.fill_calls,
        batch=facts.batch,
        prices=prices,
        price_rows=price_rows,
        gen_ids=facts.gen_ids,
        read_once=once,
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
