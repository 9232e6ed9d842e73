"""Each row of the store once: a key held twice with different values is refused, naming both parts; twice
with the same values (a retried write) it is read once.

Nothing else stops a contradiction: a part is verified alone (its hash, schema and values), so a second
judgments part with the same keys and every metric 0 -- valid, correctly hash-named -- would be read beside
the first and change every ``mean_is``. The keys:

    rounds      gen_id, scenario_id, round                    (a trajectory's round)
    judgments   judge, judge_key, scenario_id                 (one judge's verdict on one request, for a scenario)
    signals     gen_id, scenario_id, round, signals_version   (a round's stored signals, per way of computing them)

A judgment's ``judge_key`` is the judge's cache key: a hash of the judge, its prompt version, the metric set, the
question and the draft. One draft may be judged under two metric sets, and the views pick one of those
(judgment_pick.sql); the same key twice for one scenario is one request answered twice (a different draft under it
is a contradiction too). Two epochs of one task that wrote the same draft share the key (the same request, judged
once through the cache): each has its own row.

The check reads the key columns of the views (one GROUP BY of their hash each: 0.35 CPU-s at 100k trajectories,
600k rows a table) and, only for a key it finds twice, the whole rows of the parts that hold it. It runs with the
facts connect() reads first, so it is done once per part set (:mod:`analysis.replay.derived` keeps those facts). A copy
is read once at no cost when the part holding it holds nothing else (a part written twice: the views leave that
part out, ``TableSources.skip``); copies mixed with new rows make the table's view read each key once through a
window over the table (:func:`read_once_sql`: correct, slower). Both are facts, so every later connection does
the same.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import reduce
from typing import Any

import duckdb
import pyarrow.dataset as pds
import pyarrow.parquet as pq

from analysis import sql
from analysis.errors import AnalysisError
from analysis.replay.sources import added, dataset
from storage.parts import Store
from storage.schemas import TABLES

KEYS: dict[str, tuple[str, ...]] = {
    "rounds": ("gen_id", "scenario_id", "round"),
    "judgments": ("judge", "judge_key", "scenario_id"),  # one judge's verdict on a draft of a scenario
    "signals": ("gen_id", "scenario_id", "round", "signals_version"),
}
# Columns two copies may differ in and still be one row: a round's d_t is recomputed from the embeddings when a
# lost trajectory is generated again, and the embedding model's float32 rounding depends on the micro-batch a
# draft lands in (<= 2e-7 seen), so the regenerated signals beside the surviving ones differ in the last bits only.
NOISE: dict[str, dict[str, float]] = {"signals": {"distance": 1e-5}}  # table -> column -> tolerance
VIEWS = {"rounds": "round_parts", "judgments": "judgments_raw", "signals": "signals_raw"}  # what reads each
_COPIES = "_uniqueness_copies"  # the rows of the keys found twice, registered while they are compared
_PART = "__filename"  # the part a row came from (pyarrow's scanner fills it)


def read_once_sql(table: str, source: str) -> str:
    """``source`` (the rows of ``table``) with each key once: for a table whose copies are identical."""
    return sql.query("read_once", source=source, keys=", ".join(KEYS[table]))


def check(
    con: duckdb.DuckDBPyConnection, store: Store, sources: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Refuse (AnalysisError naming both parts) a key of ``sources`` (table -> the rows its view reads, as
    narrowed to the connection's scope) held twice with different values. Else, where keys are held twice
    with the same values: the parts to skip (every row of each is a copy of a row another part holds: a write
    done twice, which costs nothing to leave out), and the tables still holding copies after that (their views
    read each key once: :func:`statements`, a window over the table, slower). Needs the views of :data:`VIEWS`."""
    skip: list[str] = []
    once: list[str] = []
    for table in sources:
        keys = ", ".join(KEYS[table])
        twice = con.execute(sql.query("duplicate_keys", relation=VIEWS[table], keys=keys)).fetchall()
        if twice:
            copies = _copies(con, store, table, twice)
            left = _skippable(store, copies)
            skip += left[0]
            once += [table] if left[1] else []
    return tuple(skip), tuple(once)


def statements(sources: Mapping[str, str], once: Iterable[str] = ()) -> list[str]:
    """The view of each table of ``sources`` (:data:`VIEWS`), reading each key once in the tables ``once``
    (those :func:`check` found copies in that no skipped part accounts for)."""
    once = set(once)
    return [sql.create(VIEWS[t], read_once_sql(t, s) if t in once else s) for t, s in sources.items()]


def _copies(
    con: duckdb.DuckDBPyConnection, store: Store, table: str, twice: list[tuple[Any, ...]]
) -> list[tuple[tuple[Any, ...], str]]:
    """Read every row of the keys in ``twice`` with the part it came from, refuse the first key whose copies
    differ, and give (key, part) of each such row. Reads only the row groups that can hold such a key (the
    filter is pushed into the scan)."""
    keys = KEYS[table]
    wanted = reduce(operator.and_, [pds.field(k).isin(sorted({row[i] for row in twice})) for i, k in enumerate(keys)])
    rows = dataset(store, table, store.part_infos(table)).to_table(columns=[*TABLES[table].names, _PART], filter=wanted)
    con.register(_COPIES, rows)
    try:
        # an older part means the default
        copies = sql.with_added_values(sql.query("relation_rows", relation=_COPIES), added(table))
        for column, tolerance in NOISE.get(table, {}).items():
            copies = sql.query(
                "copies_within_tolerance",
                copies=copies,
                keys=", ".join(keys),
                column=column,
                tolerance=sql.double(tolerance),
            )
        found = con.execute(
            sql.query(
                "contradicting_copies",
                copies=copies,
                keys=", ".join(keys),
                values=", ".join(TABLES[table].names),
                part=_PART,
            )
        ).fetchall()
    finally:
        con.unregister(_COPIES)
    if found:
        *key, parts, n = found[0]
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, key, strict=True))
        named = " and ".join(_relative(store, p) for p in parts)
        more = f" (and {n - 1} more key{'s' if n > 2 else ''} like it)" if n > 1 else ""
        raise AnalysisError(
            f"store {store.uri}: {table} {shown} is held by {named} with different values{more}; a key is stored "
            f"once, so one of these parts is wrong: move it out of the store (e.g. into {store.uri}/_quarantine/)"
        )
    return list(zip(zip(*(rows[k].to_pylist() for k in keys), strict=True), rows[_PART].to_pylist(), strict=True))


def _skippable(store: Store, copies: list[tuple[tuple[object, ...], str]]) -> tuple[list[str], bool]:
    """The parts every row of which is a copy another kept part holds (the later written first, by name), and
    whether copies are left after leaving them out (a part holding some copies and other rows, a key twice in
    one part). ``copies`` may hold rows of keys stored once (the scan's filter is per column): they keep their
    part, which is safe."""
    held: dict[tuple[object, ...], list[str]] = defaultdict(list)  # key -> the part of each of its rows
    keys_in: dict[str, list[tuple[object, ...]]] = defaultdict(list)  # part -> the key of each of its rows
    for key, part in copies:
        held[key].append(part)
        keys_in[part].append(key)
    skip = []
    for part in sorted(keys_in, reverse=True):
        mine = keys_in[part]
        if len(mine) == pq.read_metadata(part, filesystem=store.fs).num_rows and all(
            any(p != part for p in held[k]) for k in mine
        ):
            skip.append(part)
            for k in set(mine):
                held[k] = [p for p in held[k] if p != part]
    return skip, any(len(parts) > 1 for parts in held.values())


def _relative(store: Store, path: str) -> str:
    root = store.path.rstrip("/") + "/"
    return path[len(root) :] if path.startswith(root) else path
