"""Scenario-hash buckets: the folder under each generation that holds a fixed share of its trajectories.

    <root>/rounds/gen_id=<gen_id>/bucket=<nn>/part-*.parquet

A trajectory's rounds, signals and replay inputs all go to the bucket of its scenario (:func:`bucket_of`: a
stable hash, the same in every process and on every machine, unlike Python's ``hash``), so a bucket holds whole
trajectories and can be replayed alone: ``analysis.replay.ray_replay`` runs one DuckDB per bucket, as a Ray task, and
adds their aggregates up. The judgments, scenarios and generations stay unbucketed (a task reads them whole and
joins only its bucket's rows).

A store is bucketed by its layout file (``<root>/_layout.json``: ``{"buckets": 16}``), written once by
``python -m storage.compact ROOT --buckets N`` (:mod:`storage.rebucket`, which also moves the parts already
written); from then on every writer -- a generation, ``--signals rebuild``, an import -- writes into the buckets.
The count is part of the layout, never a per-run setting: a scenario must land in the same bucket whatever run
wrote it (a resumed generation, a second job adding scenarios). A store without the file is written as before.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

BUCKETS = 16  # the count --buckets writes unless told: a flush of 32 trajectories writes at most 16 parts per table
COLUMN = "bucket"
BUCKETED = frozenset({"rounds", "signals", "trajectory_inputs"})  # the per-round tables that grow with N
LAYOUT_FILE = "_layout.json"


def layout_count(fs: pafs.FileSystem, root: str) -> int:
    """The bucket count the store's layout file records (0: no file, the store is not bucketed)."""
    try:
        with fs.open_input_stream(f"{root}/{LAYOUT_FILE}") as fh:
            count = json.loads(fh.read().decode()).get("buckets", 0)
    except FileNotFoundError:
        return 0
    if not isinstance(count, int) or not 0 <= count <= 9999:
        raise ValueError(f"{root}/{LAYOUT_FILE}: buckets must be an integer in [0, 9999], got {count!r}")
    return count


def bucket_of(scenario_id: str, count: int) -> int:
    """The bucket of a scenario: the first 8 bytes of its blake2b digest, mod ``count``."""
    digest = hashlib.blake2b(scenario_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def folder_name(bucket: int) -> str:
    return f"{COLUMN}={bucket:02d}"  # 2 digits at least: the folders list in bucket order up to 100


def is_bucket_folder(name: str) -> bool:
    head, _, digits = name.partition("=")
    return head == COLUMN and digits.isdigit()


def bucket_of_folder(name: str) -> int:
    return int(name.partition("=")[2])


def split(table: pa.Table, count: int) -> list[tuple[int, pa.Table]]:
    """The rows of ``table`` per bucket of their ``scenario_id`` (each scenario hashed once)."""
    ids = table["scenario_id"].combine_chunks()
    unique = pc.unique(ids)
    per_unique = np.fromiter((bucket_of(s, count) for s in unique.to_pylist()), dtype=np.int64, count=len(unique))
    buckets = per_unique[np.asarray(pc.index_in(ids, value_set=unique))]
    return [(int(b), table.filter(pa.array(buckets == b))) for b in np.unique(buckets)]
