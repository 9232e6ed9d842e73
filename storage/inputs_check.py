"""A ``trajectory_inputs`` part checked against the parts it derives from, not against anything it carries.

A trajectory_inputs row is a regrouping of a signals part's rows with the verdicts of one judgments part
(:mod:`storage.trajectory_inputs`), and a reader that believes it never reads those parts. Its name's content hash
only proves the bytes are the ones written -- whoever replaces the part writes it under its new hash. So the first
time a reader verifies such a part (and whenever no authenticated record says it did, :mod:`storage.verified_record`)
it computes the rows again from the signals and judgments parts each row names by their content hash, with the
writer's own function, and the part is damaged unless every row it holds is the one computed. Rows naming a part
the store no longer has are not checked here: no reader believes them (:mod:`analysis.replay.stored_inputs` then
computes from the parts).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.parts import Store, part_digest
from storage.schemas import METRIC_COLUMNS, TRAJECTORY_INPUTS
from storage.trajectory_inputs import TABLE, Written, inputs_table, judged_rows

_VERDICT = [  # what inputs_table reads of a verdict
    "scenario_id", "draft_hash", "judge", "judge_prompt_version", *METRIC_COLUMNS,
    "judge_prompt_tokens", "judge_completion_tokens", "judge_mode",
]  # fmt: skip
_GROUP = ("rounds_part", "signals_part", "judgments_part", "rounds_part_trajectories")


class InputsSources:
    """The parts a store's trajectory_inputs rows may name, by content hash: listed once per verification."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._where: dict[str, dict[str, str]] | None = None
        self._judgments: dict[str, pa.Table] = {}  # a judgments part named by many inputs parts: read once

    def where(self) -> dict[str, dict[str, str]]:
        if self._where is None:
            self._where = {t: {} for t in ("rounds", "signals", "judgments")}
            for t, found in self._where.items():
                for info in self.store.part_infos(t):
                    digest = part_digest(info.path)
                    if digest is not None:
                        found[digest] = info.path
        return self._where

    def judgments(self, path: str) -> pa.Table:
        if path not in self._judgments:
            if len(self._judgments) > 8:
                self._judgments.clear()
            self._judgments[path] = judged_rows(self.store.read_part("judgments", path, _VERDICT), path)
        return self._judgments[path]


def _columns(store: Store, path: str, columns: list[str]) -> pa.Table:
    with store.fs.open_input_file(path) as fh:  # (pq.read_table would import pyarrow.dataset)
        return pq.ParquetFile(fh).read(columns=columns)


def _keys(table: pa.Table) -> list[tuple[str, str]]:
    return list(zip(table["gen_id"].to_pylist(), table["scenario_id"].to_pylist(), strict=True))


def _sorted(table: pa.Table) -> pa.Table:
    return table.cast(TRAJECTORY_INPUTS).sort_by([("gen_id", "ascending"), ("scenario_id", "ascending")])


def _same_values(a: pa.Array, b: pa.Array) -> bool:
    """Equal, value for value (NaN equal to NaN, NULL to NULL; a struct or list field by field)."""
    if pa.types.is_list(a.type):
        return a.offsets.equals(b.offsets) and _same_values(a.flatten(), b.flatten())
    if pa.types.is_struct(a.type):
        return a.is_valid().equals(b.is_valid()) and all(
            _same_values(a.field(i), b.field(i)) for i in range(a.type.num_fields)
        )
    if pa.types.is_floating(a.type):
        same_nulls = a.is_null().equals(b.is_null())
        x, y = (np.asarray(v.fill_null(0.0).to_numpy(zero_copy_only=False)) for v in (a, b))
        return same_nulls and bool(np.array_equal(x, y, equal_nan=True))
    return a.equals(b)


def _same(a: pa.Table, b: pa.Table) -> bool:
    """The same rows (in (gen_id, scenario_id) order), value for value."""
    if a.num_rows != b.num_rows:
        return False
    a, b = _sorted(a), _sorted(b)
    return all(_same_values(a[c].combine_chunks(), b[c].combine_chunks()) for c in a.column_names)


def inputs_problems(sources: InputsSources, path: str) -> list[str]:
    """Why the trajectory_inputs part at ``path`` is not what the parts it names give (empty: it is)."""
    store = sources.store
    try:
        part = store.read_part(TABLE, path)
    except (OSError, pa.ArrowException) as exc:
        return [f"cannot be read to check against its sources: {exc}"]
    where = sources.where()
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, key in enumerate(zip(*(part[c].to_pylist() for c in _GROUP), strict=True)):
        groups[key].append(i)
    problems = []
    for (r_part, s_part, j_part, trajectories), rows in sorted(groups.items(), key=str):
        if r_part not in where["rounds"] or s_part not in where["signals"] or j_part not in where["judgments"]:
            continue  # not believed by any reader (stored_inputs): nothing derives from these rows
        mine = part.take(pa.array(rows))
        try:
            signals = store.read_part("signals", where["signals"][s_part])
            judgments = sources.judgments(where["judgments"][j_part])
            held = set(_keys(_columns(store, where["rounds"][r_part], ["gen_id", "scenario_id"])))
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"its sources cannot be read ({exc})")
            continue
        if len(held) != trajectories:
            problems.append(f"says rounds part {r_part[:16]} holds {trajectories} trajectories; it holds {len(held)}")
            continue
        written = Written(where["rounds"][r_part], where["signals"][s_part], signals, trajectories)
        computed = inputs_table(written, judgments)
        wanted = pa.array([f"{g}\x1f{s}" for g, s in _keys(mine)])
        joined = pc.binary_join_element_wise(computed["gen_id"], computed["scenario_id"], "\x1f")
        computed = computed.filter(pc.is_in(joined, value_set=wanted))
        if not _same(computed, mine):
            problems.append(
                f"{mine.num_rows} rows are not what signals part {s_part[:16]} and judgments part {j_part[:16]} "
                "give (replaced or edited: its own hash cannot tell)"
            )
    return problems


def check_inputs(sources: InputsSources, table: str, path: str) -> list[str]:
    """:func:`inputs_problems` for a trajectory_inputs part; nothing to check for any other table."""
    return inputs_problems(sources, path) if table == TABLE else []
