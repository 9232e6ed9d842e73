"""Buffered, deduplicating writes of whole trajectories into the store.

Flush order makes the rounds part the commit marker: scenarios, generations,
judgments and failures land first, then rounds. A kill between them leaves
rows that a rerun recognises (keys loaded at start) and does not write again;
a kill before the rounds part means the trajectory is regenerated -- from the
response cache, paying nothing. The rounds' ``signals`` come right after the
rounds: derived data, so a kill between the two loses nothing (the reader
computes missing signals from the embeddings; ``shp-query --signals rebuild``
stores them). Its ``scores`` and ``draft_answers`` come next, measurements of the stored drafts that
``shp-import --rescore`` computes again if a kill lost them; last, each trajectory's replay inputs
(:mod:`storage.trajectory_inputs`), derived too: a kill before them costs the reader one computation, nothing else.
The drafts' ``draft_logprobs`` come before the rounds (no model-free pass can compute them again).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import partitions
from storage.parts import Store
from storage.resume import key_values
from storage.schemas import ADDED_COLUMNS, TABLES, rounds_schema
from storage.trajectory_inputs import Written, judged_rows, write_inputs, write_parts

# draft_logprobs before rounds: no later pass can compute them, and a kill before the rounds part regenerates the
# trajectory from the response cache, which writes the same rows again (read once: analysis family_logprobs.sql)
_ORDER = (
    "scenarios", "generations", "judgments", "failures", "draft_logprobs", "rounds", "signals", "scores",
    "draft_answers",
)  # fmt: skip


def rows_to_table(name: str, rows: list[dict[str, object]], schema: pa.Schema) -> pa.Table:
    if name != "rounds":
        return pa.Table.from_pylist(rows, schema=schema)
    dim = schema.field("embedding").type.list_size
    added = ADDED_COLUMNS.get(name, {})  # a row from a writer that predates them: NULL, read as Store.read says
    cols = {
        f.name: [r.get(f.name) if f.name in added else r[f.name] for r in rows] for f in schema if f.name != "embedding"
    }
    flat = np.concatenate([np.asarray(r["embedding"], dtype=np.float32).reshape(dim) for r in rows])
    arrays = [pa.array(cols[f.name], type=f.type) for f in schema if f.name != "embedding"]
    emb = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
    names = [f.name for f in schema if f.name != "embedding"]
    return pa.Table.from_arrays([*arrays, emb], names=[*names, "embedding"]).select(schema.names).cast(schema)


class StoreWriter:
    """Accumulates whole trajectories; flushes every ``flush_every`` of them (and on :meth:`flush`)."""

    def __init__(self, store: Store, dim: int, flush_every: int = 32) -> None:
        self.store = store
        self.schemas = {**TABLES, "rounds": rounds_schema(dim)}
        self.flush_every = flush_every
        self.buffers: dict[str, list[dict[str, object]]] = {name: [] for name in _ORDER}
        self.pending = 0
        # A judgment is one judge's verdict on a draft *of a scenario*: two epochs of a task that wrote the same
        # draft share its judge_key (the same request, one cached call) but each needs its own row to join.
        self._keys: dict[str, tuple[str, ...]] = {
            "scenarios": ("scenario_id",),
            "judgments": ("judge_key", "scenario_id"),
            "generations": ("gen_id",),
        }
        self.seen = {name: key_values(store, name, key) for name, key in self._keys.items()}
        self.written = {name: 0 for name in _ORDER}
        self.parts_written = 0

    def add(self, name: str, rows: Iterable[dict[str, object]]) -> None:
        key = self._keys.get(name)
        for row in rows:
            if key is not None:
                value = row[key[0]] if len(key) == 1 else tuple(row[k] for k in key)
                if value in self.seen[name]:
                    continue
                self.seen[name].add(value)
            self.buffers[name].append(row)

    def add_trajectory(self, rows: dict[str, list[dict[str, object]]]) -> None:
        for name in _ORDER:
            self.add(name, rows.get(name, ()))
        self.pending += 1
        if self.pending >= self.flush_every:
            self.flush()

    def flush(self) -> int:
        """Write every buffered row (rounds, then their signals, their scores, their replay inputs last); returns the
        number of parts written."""
        parts = 0
        tables: dict[str, pa.Table] = {}
        paths: dict[str, dict[object, str]] = {}
        for name in _ORDER:
            rows = self.buffers[name]
            if not rows:
                continue
            tables[name] = rows_to_table(name, rows, self.schemas[name])
            paths[name] = write_parts(self.store, name, tables[name], self.schemas[name])
            self.written[name] += len(rows)
            self.buffers[name] = []
            parts += 1
        parts += self._write_inputs(tables, paths)
        self.pending = 0
        self.parts_written += parts
        return parts

    def _write_inputs(self, tables: dict[str, pa.Table], paths: dict[str, dict[object, str]]) -> int:
        """The replay inputs of the trajectories just written, with the verdicts written with them (a verdict
        written earlier, a draft judged before: that trajectory is left to the reader)."""
        if not {"rounds", "signals", "judgments"} <= tables.keys():
            return 0
        written = {}
        count = self.store.buckets
        rounds = dict(partitions.split("rounds", tables["rounds"], count))  # the folders write_parts wrote them to
        for folder, signals in partitions.split("signals", tables["signals"], count):
            if folder in paths["rounds"] and folder in paths["signals"]:
                n = len(pc.unique(rounds[folder]["scenario_id"]))
                written[folder] = Written(paths["rounds"][folder], paths["signals"][folder], signals, n)
        (judgments_path,) = paths["judgments"].values()
        return write_inputs(self.store, written, judged_rows(tables["judgments"], judgments_path))
