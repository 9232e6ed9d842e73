"""What the views over a store are built from: where each table's rows come from, which judge gives IS, where the
per-round signals come from, the deepest trajectory (:class:`StoreFacts`, read once per part set).

The views themselves are declared in :mod:`analysis.replay.catalog`, which derives their build order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analysis import sql
from analysis.errors import AnalysisError
from analysis.replay.sources import TableSources
from analysis.sql import ScenarioSlice
from storage.parts import Store
from storage.schemas import EMBEDDING_DIM


def source(sources: TableSources, table: str, gen_id: str | None = None) -> str:
    """The rows of ``table``: its parts, or a typed empty relation while it has none. ``gen_id``: only the
    parts that can hold that generation's rows (its partition folder: the others are never opened)."""
    return sources.of(table, gen_id)


def rounds_source(sources: TableSources, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """The rounds parts, optionally narrowed to one generation and a set of scenarios (a sweep job's scope)."""
    return sql.narrowed(source(sources, "rounds", gen_id), gen_id, scenario_ids)


def judgments_source(sources: TableSources, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """The judgments parts, narrowed to the scenarios of a job's scope or slice (judgments have no gen_id)."""
    return sql.narrowed(source(sources, "judgments"), None, scenario_ids)


def guarded_sources(
    sources: TableSources, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None
) -> dict[str, str]:
    """The rows of the tables whose keys are unique (analysis.replay.uniqueness), narrowed to a scope: their views
    (round_parts, judgments_raw, signals_raw) read these, each key once where the facts say it is stored twice."""
    return {
        "judgments": judgments_source(sources, scenario_ids),
        "rounds": rounds_source(sources, gen_id, scenario_ids),
        "signals": source(sources, "signals", gen_id),
    }


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


def _names(judge: str, asked: str) -> bool:
    """Whether ``asked`` names the stored ``judge``: its full name, or its id, the name before its description
    (``lexical-v1`` for ``lexical-v1 (deterministic reference-based token overlap, not an LLM)``)."""
    return asked in (judge, judge.split(" (", 1)[0])


def pick_judge(con: duckdb.DuckDBPyConnection, judge: str | None, version: str | None) -> tuple[str | None, str | None]:
    """The one judge (and prompt version) matching the request in ``judgments_raw``; say why if none or several."""
    rows = con.sql(sql.query("judges")).fetchall()
    found = [(j, v) for j, v, _ in rows if (judge is None or _names(j, judge)) and (version is None or v == version)]
    if not rows:
        return judge, version  # nothing judged yet: IS is NULL everywhere
    if not found:
        known = ", ".join(f"{j!r} (prompt {v!r}, {n} rows)" for j, v, n in rows)
        asked = f"judge {judge!r}" + (f", prompt version {version!r}" if version is not None else "")
        raise AnalysisError(f"no judgments by {asked}; the store has: {known}")
    if len({j for j, _ in found}) > 1:
        known = ", ".join(f"{j!r} (prompt {v!r})" for j, v in found)
        raise AnalysisError(f"several judges in the store ({known}); choose one with {{judge}}", settings=("judge",))
    if len({v for _, v in found}) > 1:
        known = ", ".join(repr(v) for _, v in found)
        raise AnalysisError(
            f"judge {found[0][0]!r} has several prompt versions in the store ({known}); choose one with "
            "{judge_prompt_version}",
            settings=("judge_prompt_version",),
        )
    return found[0]


# Where round_signals' per-round signals come from (signals_coverage): every trajectory has stored signals
# (read them: no embedding is read), none has (compute them all from the rounds' embeddings), or some have.
STORED, COMPUTED, MIXED = "stored", "computed", "mixed"


def coverage(gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """Per trajectory in scope: whether its signals are stored (signals_coverage.sql; the signal_status table)."""
    stored = sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    return sql.query("signals_coverage", stored=stored)


def signals_source(
    con: duckdb.DuckDBPyConnection, store: Store, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None
) -> tuple[str, int]:
    """Which signals round_signals reads (STORED, COMPUTED or MIXED), and how many trajectories lack
    stored ones (reads key columns only). Needs the ``round_parts`` and ``signals_raw`` views."""
    if not store.parts("signals"):
        return COMPUTED, -1
    status = coverage(gen_id, scenario_ids)
    ((missing, duplicated, orphaned),) = con.execute(sql.query("signals_status_counts", status=status)).fetchall()
    if missing == 0 and duplicated == 0 and orphaned == 0:
        return STORED, 0
    return MIXED, int(missing)  # the mixed relation reads stored rows only of trajectories that have rounds


def signals_lack_calls(
    con: duckdb.DuckDBPyConnection, kind: str, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None
) -> bool:
    """Whether stored signals rows in scope predate the prompt tokens and call modes (then round_signals
    reads those from the rounds: signals_calls_fill.sql). Computed signals carry them. Needs ``signals_raw``."""
    if kind == COMPUTED:
        return False
    stored = sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    ((lack,),) = con.execute(sql.query("signals_calls_missing", signals=stored)).fetchall()
    return bool(lack)


def has_batch_calls(
    con: duckdb.DuckDBPyConnection,
    kind: str,
    fill_calls: bool,
    judge_where: str,
    gen_id: str | None,
    scenario_ids: Sequence[str] | ScenarioSlice | None,
) -> bool:
    """Whether any call in scope was paid in batch mode (then the replay builds the batch calls' token lists).
    Reads the stored signals' mode columns when they have them all, else the rounds'; and the judge's."""
    if kind == STORED and not fill_calls:
        calls = sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    else:
        calls = sql.query("rounds_call_modes")
    ((batch,),) = con.execute(sql.query("batch_calls", signals=calls, judge_where=judge_where)).fetchall()
    return bool(batch)


@dataclass(frozen=True)
class StoreFacts:
    """What connect() reads from the store before it builds the views: a function of the parts in scope and of
    what was asked (judge, prompt version, validation), so :mod:`analysis.replay.derived` can keep it per part set."""

    judge: str | None
    judge_prompt_version: str | None
    dim: int  # embedding size (embedding_dim)
    signals: str  # where round_signals reads the signals (signals_source)
    missing: int  # trajectories without stored signals (-1: no signals table)
    rounds: int  # the deepest trajectory (deepest)
    fill_calls: bool  # signals_lack_calls
    batch: bool  # has_batch_calls
    gen_ids: tuple[str, ...] = ()  # the generations in scope, sorted (gen_ids.sql): the type of gen_id
    skip_parts: tuple[str, ...] = ()  # parts whose every row another part holds too: not read (replay.uniqueness)
    read_once: tuple[str, ...] = ()  # tables holding copies of a row even so: each key read once
    inputs: bool = False  # replay_inputs reads the store's trajectory_inputs rows (analysis.replay.stored_inputs)


def store_facts(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    judge: str | None,
    version: str | None,
    gen_id: str | None,
    scenario_ids: Sequence[str] | ScenarioSlice | None,
    validate: bool = True,
) -> StoreFacts:
    """Check the trajectories (``validate``), pick the judge and read the rest of :class:`StoreFacts`.
    Needs the ``round_parts``, ``judgments_raw`` and ``signals_raw`` views."""
    if validate:
        check_trajectories(con, store)
    judge, version = pick_judge(con, judge, version)
    signals, missing = signals_source(con, store, gen_id, scenario_ids)
    fill_calls = signals_lack_calls(con, signals, gen_id, scenario_ids)
    where = sql.judge_where(judge, version)
    batch = has_batch_calls(con, signals, fill_calls, where, gen_id, scenario_ids)
    gen_ids = tuple(g for (g,) in con.execute(sql.query("gen_ids")).fetchall())
    return StoreFacts(judge, version, embedding_dim(store), signals, missing, deepest(con), fill_calls, batch, gen_ids)


def judgments_unique(con: duckdb.DuckDBPyConnection, judge_where: str) -> bool:
    """Whether the judge ``judge_where`` picks has at most one judgment per draft in ``judgments_raw`` now
    (judgments_unique.sql): then the replay's inputs, computed once at connect, skip the pick."""
    ((unique,),) = con.execute(sql.query("judgments_unique", judge_where=judge_where)).fetchall()
    return bool(unique)


def deepest(con: duckdb.DuckDBPyConnection, relation: str = "round_parts") -> int:
    """The highest round of ``relation`` (1 when empty): how many round columns the replay needs."""
    ((rounds,),) = con.execute(sql.query("deepest_round", relation=relation)).fetchall()
    return int(rounds)


def check_trajectories(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Refuse a store whose rounds are not 1..T once each per trajectory (say which)."""
    bad = con.sql(sql.query("bad_trajectories")).fetchall()
    if bad:
        lines = "; ".join(
            f"gen_id={g!r} scenario_id={s!r}: {n} rows, {dn} distinct rounds, rounds {lo}..{hi}"
            for g, s, n, dn, lo, hi in bad
        )
        raise AnalysisError(f"store {store.uri}: trajectories must hold rounds 1..T once each; {lines}")
