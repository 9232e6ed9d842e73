"""Resume helpers: what a store already holds, read by column (cheap), never whole tables.

A trajectory's rounds are written in one part with others (whole trajectories
only), so "(gen_id, scenario_id) present in rounds" means "done": a rerun skips
it and no row is ever duplicated.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .parts import Store


def column_values(store: Store, table: str, column: str, where: tuple[str, str] | None = None) -> set[str]:
    """Distinct values of one column, optionally where another column equals a value; part by part."""
    out: set[str] = set()
    columns = [column] if where is None else [column, where[0]]
    for path in store.parts(table):
        t = pq.read_table(path, columns=columns, filesystem=store.fs)
        if where is not None:
            t = t.filter(pc.equal(t[where[0]], where[1]))
        out.update(v for v in pc.unique(t[column]).to_pylist() if v is not None)
    return out


def done_scenarios(store: Store, gen_id: str) -> set[str]:
    """Scenario ids whose whole trajectory for ``gen_id`` is in the store."""
    return column_values(store, "rounds", "scenario_id", ("gen_id", gen_id))


def failed_scenarios(store: Store, gen_id: str) -> set[str]:
    """Scenario ids with a recorded writer/critic failure for ``gen_id`` (and so no rounds)."""
    out: set[str] = set()
    for path in store.parts("failures"):
        t = pq.read_table(path, columns=["gen_id", "scenario_id", "stage"], filesystem=store.fs)
        mask = pc.and_(pc.equal(t["gen_id"], gen_id), pc.is_in(t["stage"], value_set=pa.array(["writer", "critic"])))
        out.update(t.filter(mask)["scenario_id"].to_pylist())
    return out


def failure_messages(store: Store, gen_id: str, scenario_ids: list[str]) -> list[tuple[str, str]]:
    """(error_type, message) of the writer/critic failures recorded for these scenarios, newest last."""
    out: list[tuple[str, str]] = []
    wanted = pa.array(scenario_ids, pa.string())
    for path in store.parts("failures"):
        t = pq.read_table(path, columns=["gen_id", "scenario_id", "stage", "error_type", "message"], filesystem=store.fs)
        mask = pc.and_(pc.equal(t["gen_id"], gen_id), pc.is_in(t["scenario_id"], value_set=wanted))
        mask = pc.and_(mask, pc.is_in(t["stage"], value_set=pa.array(["writer", "critic"])))
        t = t.filter(mask)
        out.extend(zip(t["error_type"].to_pylist(), t["message"].to_pylist(), strict=True))
    return out
