"""Each trajectory's replay inputs, written with its signals: the ``trajectory_inputs`` table.

Opening a store used to group every stored signals row by trajectory and join it with the judgments, 600k
rows each at 100k trajectories: most of a store's first open (BENCHMARKS.md, "Replay"). The writer holds a
trajectory's signals and its judge's verdicts when it writes them, so it writes them a second time, grouped: one
row per trajectory, its rounds a list of structs (``rounds[t]`` = round t, :data:`storage.schemas.INPUT_ROUND`).
Nothing is computed here but a regrouping (d_t +inf where the replay reads it so, the judge's token total, the
call modes as flags, the first approving round), so what the reader derives from them (IS under its weights, the
cascade's comparisons, the dollars: ``analysis.replay.stored_inputs``) is the arithmetic it does on the parts.

A row names the parts it was read from by the sha256 digest in their names (``rounds_part``, ``signals_part``,
``judgments_part``) and how many trajectories its rounds part holds. A reader believes the rows only while those
parts are in the store and the rows account for every trajectory of every rounds and signals part in scope;
otherwise (a part compacted, quarantined, rewritten; an older or imported store) it computes the same from the
parts, as before. The rows are written only for trajectories whose every round has exactly one verdict in one
judgments part and whose rounds are 1..depth once each; the rest are left to the reader.

A trajectory's inputs combine by union: rows of different parts (or buckets) never hold the same trajectory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import partitions
from storage.parts import Store, part_digest
from storage.schemas import INPUT_ROUND, METRIC_COLUMNS, TRAJECTORY_INPUTS

INPUTS_VERSION = "inputs-v1"  # bump when what a row holds changes (a reader believes only its own version)
TABLE = "trajectory_inputs"
PART_COLUMN = "judgments_part"  # the digest of the judgments part a verdict row came from (see judged_rows)

# round t's struct field (storage.schemas.INPUT_ROUND) -> its column among the joined signals + verdict rows
_FIELDS = {
    "d": "d",
    "a": "approved",
    "w": "writer_tokens",
    "c": "critic_tokens",
    "j": "judge_tokens",
    "hl": "has_answer_line",
    "em": "answer_em",
    "f1": "answer_f1",
    "wp": "writer_prompt_tokens",
    "cp": "critic_prompt_tokens",
    "jpr": "judge_prompt_tokens",
    "wb": "writer_batch",
    "cb": "critic_batch",
    "jb": "judge_batch",
    **{m: m for m in METRIC_COLUMNS},
}
# a row's value that must be present for the trajectory to be written (a signals row from before the prompt
# tokens and call modes: the reader takes those from the rounds)
_PRESENT = ("writer_prompt_tokens", "critic_prompt_tokens", "writer_mode", "critic_mode", "judge", PART_COLUMN)


@dataclass(frozen=True)
class Written:
    """One rounds part and the signals part written from it (one generation's folder each)."""

    rounds_path: str
    signals_path: str
    signals: pa.Table  # the signals rows written
    trajectories: int  # trajectories the rounds part holds


def judged_rows(judgments: pa.Table, path: str) -> pa.Table:
    """The rows of the judgments part at ``path`` with its digest (PART_COLUMN), as :func:`inputs_table` takes them."""
    return judgments.append_column(PART_COLUMN, pa.array([part_digest(path)] * judgments.num_rows, pa.string()))


def inputs_table(written: Written, judgments: pa.Table) -> pa.Table:
    """The trajectory_inputs rows of ``written`` (its signals) with their verdicts from ``judgments`` (rows of
    the JUDGMENTS schema plus PART_COLUMN: :func:`judged_rows`); empty when none qualifies."""
    sig = written.signals
    if sig.num_rows == 0:
        return TRAJECTORY_INPUTS.empty_table()
    mine = pc.is_in(judgments["scenario_id"], value_set=pc.unique(sig["scenario_id"]))  # all of their scenarios'
    verdicts = _one_per_draft(judgments.filter(mine))
    rows = sig.join(verdicts, keys=["scenario_id", "draft_hash"], join_type="left outer")
    rows = rows.sort_by([("gen_id", "ascending"), ("scenario_id", "ascending"), ("round", "ascending")])
    key = pc.binary_join_element_wise(rows["gen_id"], rows["scenario_id"], "\x1f").combine_chunks()
    n = rows.num_rows
    starts = (
        np.flatnonzero(np.concatenate([[True], np.asarray(pc.not_equal(key[1:], key[:-1]))]))
        if n
        else np.zeros(0, np.intp)
    )
    offsets = np.append(starts, n).astype(np.int32)
    group = np.repeat(np.arange(len(starts)), np.diff(offsets))
    position = np.arange(n) - offsets[:-1][group]
    ok = np.asarray(rows["round"].to_numpy(zero_copy_only=False)) == position + 1  # rounds 1..depth, once each
    for name in _PRESENT:
        ok &= np.asarray(pc.is_valid(rows[name]))
    for name in ("judge", "judge_prompt_version", PART_COLUMN):  # one judge, one judgments part per trajectory
        codes = np.asarray(rows[name].combine_chunks().dictionary_encode().indices.fill_null(-1))
        ok &= codes == codes[offsets[:-1]][group]
    keep = np.logical_and.reduceat(ok, offsets[:-1]) if n else np.zeros(0, bool)
    if not keep.any():
        return TRAJECTORY_INPUTS.empty_table()
    rows = rows.filter(pa.array(keep[group]))
    lengths = np.diff(offsets)[keep]
    new_offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    firsts = pa.array(np.concatenate([[0], np.cumsum(lengths)[:-1]]))
    rows = _derived_columns(rows)
    out = {c: rows[c].take(firsts) for c in ("gen_id", "scenario_id", "judge", "judge_prompt_version")}
    out["depth"] = pa.array(lengths.astype(np.int32))
    hits = np.flatnonzero(np.asarray(rows["approved"].to_numpy(zero_copy_only=False), bool))
    first = np.full(len(lengths), np.iinfo(np.int64).max)  # per trajectory: the row of its first approval
    np.minimum.at(first, np.searchsorted(new_offsets.to_numpy(), hits, side="right") - 1, hits)
    none = first == np.iinfo(np.int64).max
    rank = np.where(none, 0, first - np.asarray(firsts) + 1)
    out["first_approved"] = pa.array(rank.astype(np.int32), pa.int32(), mask=none)
    fields = [rows[column].combine_chunks().cast(INPUT_ROUND.field(f).type) for f, column in _FIELDS.items()]
    out["rounds"] = pa.ListArray.from_arrays(new_offsets, pa.StructArray.from_arrays(fields, fields=list(INPUT_ROUND)))
    batch = pc.or_(pc.or_(rows["writer_batch"], rows["critic_batch"]), rows["judge_batch"])
    out["batch"] = pa.array(np.logical_or.reduceat(np.asarray(batch), new_offsets.to_numpy()[:-1]))
    m = len(lengths)
    out["signals_version"] = rows["signals_version"].take(firsts)
    out["inputs_version"] = pa.array([INPUTS_VERSION] * m)
    out["rounds_part"] = pa.array([part_digest(written.rounds_path)] * m, pa.string())
    out["signals_part"] = pa.array([part_digest(written.signals_path)] * m, pa.string())
    out["judgments_part"] = rows[PART_COLUMN].take(firsts)
    out["rounds_part_trajectories"] = pa.array([written.trajectories] * m, pa.int64())
    return pa.table({f.name: out[f.name] for f in TRAJECTORY_INPUTS}).cast(TRAJECTORY_INPUTS)


def _one_per_draft(judgments: pa.Table) -> pa.Table:
    """The verdict columns of ``judgments`` for each (scenario_id, draft_hash) judged exactly once there (a draft
    judged twice is left unjudged: the reader's pick decides it)."""
    cols = ["scenario_id", "draft_hash", "judge", "judge_prompt_version", *METRIC_COLUMNS]
    cols += ["judge_prompt_tokens", "judge_completion_tokens", "judge_mode", PART_COLUMN]
    j = judgments.select(cols)
    counts = j.group_by(["scenario_id", "draft_hash"]).aggregate([([], "count_all")])
    once = counts.filter(pc.equal(counts["count_all"], 1)).drop_columns(["count_all"])
    return j.join(once, keys=["scenario_id", "draft_hash"], join_type="inner")


def _derived_columns(rows: pa.Table) -> pa.Table:
    """The joined rows with the columns the rounds' structs are read from: d_t as the replay reads it (+inf at round
    1 and where unknown), batch flags and the judge's token total (an integer sum, exact; a call mode NULL in a
    judgments part from before modes means live)."""
    distance = rows["distance"]
    unknown = pc.or_(pc.or_(pc.is_null(distance), pc.is_nan(pc.fill_null(distance, 0.0))), pc.equal(rows["round"], 1))
    add = {
        "d": pc.if_else(unknown, math.inf, distance),
        "writer_batch": pc.equal(rows["writer_mode"], "batch"),
        "critic_batch": pc.equal(rows["critic_mode"], "batch"),
        "judge_batch": pc.equal(pc.fill_null(rows["judge_mode"], "live"), "batch"),
        "judge_tokens": pc.add(rows["judge_prompt_tokens"], rows["judge_completion_tokens"]),
    }
    for name, values in add.items():
        rows = rows.append_column(name, values)
    return rows


def write_parts(store: Store, name: str, table: pa.Table, schema: pa.Schema | None = None) -> dict[str | None, str]:
    """``table`` written as :meth:`Store.write` writes it, one part per partition (and bucket) folder: folder -> its
    path (:func:`storage.partitions.split` names the folders)."""
    out: dict[str | None, str] = {}
    for folder, rows in partitions.split(name, table, store.buckets):
        path = store.write(name, rows, schema)
        if path:
            out[folder] = path
    return out


def write_inputs(store: Store, written: Mapping[str | None, Written], judgments: pa.Table) -> int:
    """Write the trajectory_inputs of each generation's ``written`` parts (their verdicts from ``judgments``:
    :func:`judged_rows`); returns the parts written."""
    total = 0
    for parts in written.values():
        table = inputs_table(parts, judgments)
        if table.num_rows:
            store.write(TABLE, table)
            total += 1
    return total
