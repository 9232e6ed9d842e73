"""Compaction: merge a table's small parts into fewer, larger ones.

Never exposes duplicates or half files, and survives a kill at any point:

1. the merged part is streamed (one source part in memory at a time) into a
   temp file no reader globs (``_tmp-*.partial``);
2. a journal ``_compact-<id>.json`` names the sources, the temp and the final;
3. each source is renamed to a hidden name (``*.hidden``, not ``*.parquet``);
4. the temp is renamed to its final ``part-*.parquet`` name;
5. the hidden sources are deleted, then the journal.

A reader sees the sources or the merged part, never both. Between 3 and 4 a
reader may briefly miss the group's rows, so do not compact a store while a
generation is starting on it (``generate`` reads which trajectories are done).
:func:`recover` (run by ``generate`` on start) finishes or rolls back a
compaction that was killed: the merged part exists -> drop the hidden
sources; otherwise -> unhide them.

On object storage there is no rename (a "move" is a copy and a delete), so the
order rolls forward instead: 1 and 2 as above (the temp is complete before the
journal names it), then 3' the sources are deleted, 4' the temp is copied to its
final name (one server-side copy: it appears whole), 5 the temp and the journal
are deleted. Again a reader sees the sources or the merged part, never both
(between 3' and 4' it may miss rows). :func:`recover` finishes such a journal:
the temp holds every row, so the sources are deleted and the copy is made.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage.buckets import BUCKETS
from storage.part_rules import expected_schema
from storage.parts import HASH_HEX, TMP_PREFIX, HashingSink, Store, StoreUnusable, open_store
from storage.rebucket import rebucket
from storage.schemas import TABLES, with_added_columns
from storage.verify import require_sound

JOURNAL_PREFIX = "_compact-"
HIDDEN_SUFFIX = ".hidden"
SMALL_BYTES = 16 * 1024 * 1024
TARGET_BYTES = 128 * 1024 * 1024


def _exists(store: Store, path: str) -> bool:
    return store.fs.get_file_info(path).type == pafs.FileType.File


def _groups(store: Store, table: str, small_bytes: int, target_bytes: int) -> list[list[str]]:
    """Runs of small parts to merge, each within ONE folder (a partition's parts stay in its folder)."""
    by_folder: dict[str, list] = {}
    for info in store.part_infos(table):
        by_folder.setdefault(info.path.rsplit("/", 1)[0], []).append(info)
    groups: list[list[str]] = []
    for infos in by_folder.values():
        current: list[str] = []
        size = 0
        for info in infos:
            if info.size is None or info.size >= small_bytes:
                continue
            if current and size + info.size > target_bytes:
                groups.append(current)
                current, size = [], 0
            current.append(info.path)
            size += info.size
        if current:
            groups.append(current)
    return [g for g in groups if len(g) >= 2]


def _merge(store: Store, table: str, sources: list[str]) -> tuple[str, str, int]:
    """Stream ``sources`` into one temp part written like ``Store.write`` writes (page checksums,
    named with the sha256 of its bytes), so a merged part is verified like any other."""
    folder = sources[0].rsplit("/", 1)[0]  # the sources' own folder (_groups never mixes folders)
    stem = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
    tmp = f"{folder}/{TMP_PREFIX}{stem}.partial"
    # The table's whole schema (the first source's embedding size): a source written before a column was
    # added gets it as NULL, which reads exactly as before (storage.schemas.ADDED_COLUMNS), so old and new
    # parts merge.
    schema = expected_schema(table, pq.read_schema(sources[0], filesystem=store.fs))
    rows = 0
    with store.fs.open_output_stream(tmp) as out:
        sink = HashingSink(out)
        with pq.ParquetWriter(sink, schema, compression="zstd", write_page_checksum=True) as writer:
            for src in sources:
                part = pq.read_table(src, filesystem=store.fs, page_checksum_verification=True)
                part = with_added_columns(table, part, fill=False).select(schema.names)
                writer.write_table(part.cast(schema))
                rows += part.num_rows
        sink.check()  # a write the file refused (a full disk) fails the merge: its temp is never renamed
    final = f"{folder}/part-{stem}.sha256-{sink.sha.hexdigest()[:HASH_HEX]}.parquet"
    return tmp, final, rows


def compact_table(
    store: Store, table: str, small_bytes: int = SMALL_BYTES, target_bytes: int = TARGET_BYTES
) -> dict[str, int]:
    """Merge the small parts of one table; returns parts before/after and rows moved.

    Refuses (DamagedStore) a table with a damaged part: merging would carry the damage into a
    part with a fresh, valid hash. Repair first (``shp-query --store S --quarantine``).
    """
    require_sound(store, (table,))
    before = len(store.parts(table))
    moved = 0
    for sources in _groups(store, table, small_bytes, target_bytes):
        tmp, final, rows = _merge(store, table, sources)
        journal = f"{store.table_path(table)}/{JOURNAL_PREFIX}{uuid.uuid4().hex[:12]}.json"
        plan = {"sources": sources, "tmp": tmp, "final": final, "forward": store.remote}
        store.put_bytes(journal, json.dumps(plan).encode())
        if store.remote:
            _roll_forward(store, plan)
        else:
            for src in sources:
                store.fs.move(src, src + HIDDEN_SUFFIX)
            store.fs.move(tmp, final)
            for src in sources:
                store.fs.delete_file(src + HIDDEN_SUFFIX)
        store.fs.delete_file(journal)
        moved += rows
    return {"parts_before": before, "parts_after": len(store.parts(table)), "rows_moved": moved}


def compact(store: Store, tables: tuple[str, ...] | None = None, **kwargs: int) -> dict[str, dict[str, int]]:
    recover(store)
    return {t: compact_table(store, t, **kwargs) for t in (tables or tuple(TABLES))}


def _roll_forward(store: Store, plan: dict) -> None:
    """Object storage: the complete temp becomes the merged part, the sources go first (never both seen)."""
    if not _exists(store, plan["final"]):
        if not _exists(store, plan["tmp"]):
            if all(_exists(store, src) for src in plan["sources"]):
                return  # the temp never landed and nothing was deleted: the sources stand as they were
            raise RuntimeError(f"compaction journal {plan}: the merged temp is gone and sources were deleted")
        for src in plan["sources"]:
            if _exists(store, src):
                store.fs.delete_file(src)
        store.fs.copy_file(plan["tmp"], plan["final"])
    for path in (*plan["sources"], plan["tmp"]):
        if _exists(store, path):
            store.fs.delete_file(path)


def recover(store: Store) -> int:
    """Finish or roll back compactions that were killed; returns how many journals it settled."""
    settled = 0
    for table in TABLES:
        selector = pafs.FileSelector(store.table_path(table), allow_not_found=True)
        for info in store.fs.get_file_info(selector):
            if not (info.base_name.startswith(JOURNAL_PREFIX) and info.base_name.endswith(".json")):
                continue
            with store.fs.open_input_stream(info.path) as fh:
                plan = json.loads(fh.read().decode())
            if plan.get("forward"):
                _roll_forward(store, plan)
                store.fs.delete_file(info.path)
                settled += 1
                continue
            done = _exists(store, plan["final"])
            for src in plan["sources"]:
                hidden = src + HIDDEN_SUFFIX
                if _exists(store, hidden):
                    if done:
                        store.fs.delete_file(hidden)
                    else:
                        store.fs.move(hidden, src)
            if not done and _exists(store, plan["tmp"]):
                store.fs.delete_file(plan["tmp"])
            store.fs.delete_file(info.path)
            settled += 1
    return settled


def main(argv: list[str] | None = None) -> int:
    """``python -m storage.compact ROOT [TABLE ...] [--buckets [N]]``: merge small parts (first, with ``--buckets``,
    move the store into scenario-hash buckets); prints one JSON line."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m storage.compact", description=main.__doc__)
    p.add_argument("root", help="store root (local path or pyarrow filesystem URI)")
    p.add_argument("tables", nargs="*", help=f"tables (default: all of {', '.join(TABLES)})")
    p.add_argument(
        "--buckets", type=int, nargs="?", const=BUCKETS, metavar="N",
        help=f"first move the store into N scenario-hash buckets (default {BUCKETS}): storage.rebucket",
    )  # fmt: skip
    a = p.parse_args(argv)
    unknown = [t for t in a.tables if t not in TABLES]
    if unknown:
        p.error(f"unknown table(s) {unknown}; known: {list(TABLES)}")
    try:
        store = open_store(
            Store(a.root)
        )  # the one conversion; an object store: credentials, endpoint, bucket checked first
    except StoreUnusable as exc:
        print(f"python -m storage.compact: {exc}", file=sys.stderr)
        return 2
    moved = {}
    if a.buckets is not None:
        try:
            moved = {"rebucket": rebucket(store, a.buckets)}
        except ValueError as exc:
            print(f"python -m storage.compact: {exc}", file=sys.stderr)
            return 2
    print(json.dumps({**moved, **compact(store, tuple(a.tables) or None)}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
