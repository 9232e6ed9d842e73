"""A store's tables as DuckDB sources: its Parquet parts (or a typed empty relation), the columns a table
gained after parts were written, and a sweep job's or a slice's narrowing of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis.sql import literal, quote, quote_list
from analysis.sql.loader import query  # not via analysis.sql: mypy reads that name as its folder query/


def read_parquet(globs: Sequence[str]) -> str:
    """The parts matching ``globs``; values come from the files, never from partition folder names."""
    return f"read_parquet([{', '.join(quote(g) for g in globs)}], union_by_name = true, hive_partitioning = false)"


def empty_select(schema_fields: Sequence[tuple[str, str]]) -> str:
    """A typed empty relation for a table with no parts yet."""
    cols = ", ".join(f"NULL::{sqltype} AS {name}" for name, sqltype in schema_fields)
    return f"SELECT {cols} WHERE false"


def with_added_values(select: str, added: Sequence[tuple[str, str, object]]) -> str:
    """``select`` (which has every added column, NULL where a part lacks it) with those NULLs given the value
    such a part means: the relation a remote store's registered dataset gives (analysis.replay.sources)."""
    defaults = [
        f"coalesce({name}, {literal(value, sqltype)}) AS {name}" for name, sqltype, value in added if value is not None
    ]
    return f"SELECT * REPLACE ({', '.join(defaults)}) FROM ({select})" if defaults else select


def table_source(
    globs: Sequence[str],
    schema_fields: Sequence[tuple[str, str]],
    added: Sequence[tuple[str, str, object]] = (),
) -> str:
    """A table's rows: its Parquet parts at ``globs``, or (none: no parts yet) a typed empty relation.

    ``added``: (name, SQL type, value) of the columns the table gained after parts were written
    (storage.schemas.ADDED_COLUMNS): present even when no part has them, with ``value`` (None: NULL) where
    a part lacks them (added_columns.sql)."""
    if not globs:
        return empty_select(schema_fields)
    parts = f"SELECT * FROM {read_parquet(globs)}"
    if not added:
        return parts
    defaults = [
        f"coalesce({name}, {literal(value, sqltype)}) AS {name}" for name, sqltype, value in added if value is not None
    ]
    return query(
        "added_columns",
        parts=parts,
        replace=f"REPLACE ({', '.join(defaults)})" if defaults else "",
        columns=", ".join(f"NULL::{sqltype} AS {name}" for name, sqltype, _ in added),
    )


@dataclass(frozen=True)
class ScenarioSlice:
    """Slice ``index`` of ``count``: the scenarios whose hash falls in it. A store too large for memory is
    replayed slice by slice (``analysis.connect(ReplayScope(store, scenario_ids=ScenarioSlice(i, n)))`` for i < n):
    each slice is a whole set of trajectories, every slice together the store."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not (isinstance(self.count, int) and self.count >= 1 and 0 <= self.index < self.count):
            raise ValueError(f"ScenarioSlice({self.index}, {self.count}): need 0 <= index < count")


def narrowed(source: str, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """``source`` narrowed to one generation and a set of scenarios (a sweep job's scope) or a slice of them."""
    where = ["true"]
    if gen_id is not None:
        where.append(f"gen_id = {quote(gen_id)}")
    if isinstance(scenario_ids, ScenarioSlice):
        where.append(f"hash(scenario_id) % {int(scenario_ids.count)} = {int(scenario_ids.index)}")
    elif scenario_ids is not None:
        where.append(f"scenario_id IN ({quote_list(scenario_ids)})")
    return source if len(where) == 1 else f"SELECT * FROM ({source}) WHERE {' AND '.join(where)}"
