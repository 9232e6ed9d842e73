"""Resume helpers: what a store already holds, read by column (cheap), never whole tables.

A trajectory's rounds are written in one part with others (whole trajectories
only), so "(gen_id, scenario_id) present in rounds" means "done": a rerun skips
it and no row is ever duplicated.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.partitions import PARTITION_BY
from storage.parts import Store, StoreError


def column_values(store: Store, table: str, column: str, where: tuple[str, str] | None = None) -> set[str]:
    """Distinct values of one column, optionally where another column equals a value; part by part
    (when that column partitions the table, only the parts of its folder are opened)."""
    out: set[str] = set()
    columns = [column] if where is None else [column, where[0]]
    value = where[1] if where is not None and PARTITION_BY.get(table) == where[0] else None  # its folder's value
    for path in store.parts(table) if value is None else store.parts(table, value):
        t = pq.read_table(path, columns=columns, filesystem=store.fs)
        if where is not None:
            t = t.filter(pc.equal(t[where[0]], where[1]))
        out.update(v for v in pc.unique(t[column]).to_pylist() if v is not None)
    return out


def key_values(store: Store, table: str, key: tuple[str, ...]) -> set[object]:
    """The stored values of a table's key: of one column, its distinct values (:func:`column_values`); of several,
    their tuples (a judgment's (judge_key, scenario_id)). What a writer must not store again."""
    if len(key) == 1:
        return set(column_values(store, table, key[0]))
    out: set[object] = set()
    for path in store.parts(table):
        t = pq.read_table(path, columns=list(key), filesystem=store.fs)
        out.update(zip(*(t[c].to_pylist() for c in key), strict=True))
    return out


def done_scenarios(store: Store, gen_id: str) -> set[str]:
    """Scenario ids whose whole trajectory for ``gen_id`` is in the store."""
    return column_values(store, "rounds", "scenario_id", ("gen_id", gen_id))


FATAL_STAGES = ("writer", "critic")  # a failed writer/critic call ends the trajectory: no rounds are stored


def _fatal_failures(store: Store, gen_id: str, columns: list[str], scenario_ids: list[str] | None = None):
    """The ``failures`` rows of ``gen_id`` that ended a trajectory, part by part (only ``columns``)."""
    for path in store.parts("failures", gen_id):
        t = pq.read_table(path, columns=sorted({"gen_id", "scenario_id", "stage", *columns}), filesystem=store.fs)
        mask = pc.and_(pc.equal(t["gen_id"], gen_id), pc.is_in(t["stage"], value_set=pa.array(FATAL_STAGES)))
        if scenario_ids is not None:
            mask = pc.and_(mask, pc.is_in(t["scenario_id"], value_set=pa.array(scenario_ids, pa.string())))
        yield t.filter(mask)


def failed_scenarios(store: Store, gen_id: str) -> set[str]:
    """Scenario ids with a recorded writer/critic failure for ``gen_id`` (and so no rounds)."""
    return {s for t in _fatal_failures(store, gen_id, ["scenario_id"]) for s in t["scenario_id"].to_pylist()}


def failure_messages(store: Store, gen_id: str, scenario_ids: list[str]) -> list[tuple[str, str]]:
    """(error_type, message) of the writer/critic failures recorded for these scenarios."""
    out: list[tuple[str, str]] = []
    for t in _fatal_failures(store, gen_id, ["error_type", "message"], scenario_ids):
        out.extend(zip(t["error_type"].to_pylist(), t["message"].to_pylist(), strict=True))
    return out


def full_gen_id(store: Store, given: str) -> str:
    """The stored generation ``given`` names: its whole id or a prefix of it (the 8 or 12 digits the reports
    print). No match, or a prefix that several generations share, is one line that says which."""
    known = column_values(store, "generations", "gen_id")
    if not any(g.startswith(given) for g in known):  # a store whose generations rows are missing: its rounds
        known |= column_values(store, "rounds", "gen_id")
    if given in known:
        return given
    matches = sorted(g for g in known if g.startswith(given)) if given else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(g[:12] for g in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise StoreError(
            f"generation id {given!r} is ambiguous in {store.uri}: {len(matches)} match ({shown}); give more digits"
        )
    stored = ", ".join(sorted(g[:12] for g in known)[:5]) or "none"
    raise StoreError(f"no generation {given!r} in {store.uri} (stored: {stored})")
