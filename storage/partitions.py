"""The store's partition layout: which column splits a table's parts into folders, and their names.

    <root>/rounds/gen_id=<gen_id>/part-*.parquet      one folder per generation
    <root>/scenarios/dataset=<dataset>/part-*.parquet one folder per dataset
    <root>/rounds/gen_id=<gen_id>/bucket=<nn>/...     a bucketed store's per-round tables (storage.buckets)

A query of one generation (a sweep job's replay, ``analysis.connect(ReplayScope(store, gen_id=...))``) or one dataset
then opens only that folder's files instead of every part's footer. The folder name is Hive's
``column=value`` (the value percent-encoded), but the column stays in the file too, so a part means
the same wherever it lies and readers never take values from paths (DuckDB reads with
``hive_partitioning = false``). Parts written before partitions, directly in ``<root>/<table>/``,
are read as before; compaction merges parts only within one folder.
"""

from __future__ import annotations

from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from storage import buckets

# The tables that grow with the experiment, by the column a query narrows them by.
PARTITION_BY: dict[str, str] = {
    "rounds": "gen_id",
    "signals": "gen_id",
    "scores": "gen_id",
    "draft_answers": "gen_id",
    "draft_logprobs": "gen_id",
    "trajectory_inputs": "gen_id",
    "failures": "gen_id",
    "results": "gen_id",
    "scenarios": "dataset",
}
NULL_VALUE = "__null__"  # the folder of rows whose partition value is NULL


def folder_name(column: str, value: object) -> str:
    """``column=value``, the value percent-encoded (never a path separator, never '..')."""
    text = NULL_VALUE if value is None else quote(str(value), safe="_-")
    return f"{column}={text}"


def is_partition_folder(table: str, name: str) -> bool:
    column = PARTITION_BY.get(table)
    return column is not None and name.startswith(f"{column}=") and len(name) > len(column) + 1


def split(table_name: str, table: pa.Table, buckets_count: int = 0) -> list[tuple[str | None, pa.Table]]:
    """The rows of ``table`` per partition folder (None: the table is not partitioned); a bucketed table's rows
    per bucket folder within it (``gen_id=<g>/bucket=<nn>``) when ``buckets_count`` (:mod:`storage.buckets`)."""
    column = PARTITION_BY.get(table_name)
    if column is None or column not in table.column_names or table.num_rows == 0:
        return [(None, table)]
    values = table[column]
    out = []
    for value in pc.unique(values).to_pylist():
        mask = pc.is_null(values) if value is None else pc.equal(values, pa.scalar(value, values.type))
        folder, rows = folder_name(column, value), table.filter(mask)
        if buckets_count and table_name in buckets.BUCKETED and "scenario_id" in rows.column_names:
            out += [(f"{folder}/{buckets.folder_name(b)}", part) for b, part in buckets.split(rows, buckets_count)]
        else:
            out.append((folder, rows))
    return out
