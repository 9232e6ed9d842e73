"""The record of verified parts: a part is read for verification once, then believed until it changes.

A sound part is recorded by (path, size, mtime and, on a local disk, ctime) in ``verified-parts.jsonl`` and is not
read again until one of them changes (an edit whose mtime was set back still changes the ctime, which no user can
set). Two records are read: the generation writer's, in the store's own cache folder
(``<root>/_cache``: :meth:`Store.write` records the parts it writes -- their values were checked before
writing, their hash taken while writing), and this machine's reader's, in the user's cache directory
(:mod:`storage.user_cache`): a reader (``analysis.connect``, ``shp-query --verify``) records what it
verified there, never in the store it reads. ``--verify --recheck`` ignores both (a flip by the disk itself
changes neither size nor mtime). Entries carry :data:`CHECKS_VERSION`: when the checks change, every
recorded verification is redone. The record is best effort -- a part it misses is simply verified.

A line is believed only if this reader can authenticate it: each carries a keyed hash under the user's key
(:mod:`storage.user_key`, never in a store). A line in the store's record written by another user or machine, or
appended by anyone who can write the store, is not: that part is verified again (then recorded in this reader's
own record), so no one can make a reader skip the check of a part they changed (docs/store.md, "Threat model").
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs

from storage.kept import append_lines, authentic_entry, signed
from storage.part_rules import part_summary
from storage.schemas import TABLES
from storage.user_cache import reader_dir

if TYPE_CHECKING:  # storage.parts records what it writes through this module: a type-only import back
    from storage.parts import Store

CHECKS_VERSION = 2  # bump when the checks change: every recorded verification is then redone
VERIFIED_FILE = "verified-parts.jsonl"


def record_key(store: Store, path: str) -> str:
    """A part's key in the record: its filesystem type and path."""
    return f"{store.fs.type_name}:{path}"


def record_mtime(store: Store, info: pafs.FileInfo) -> int | None:
    """The mtime the record keeps: nanoseconds locally; whole seconds on object storage, where a listing
    and a HEAD of the same object may differ below the second (S3 dates objects to the second in HEAD)."""
    if info.mtime_ns is None or not store.remote:
        return info.mtime_ns
    return info.mtime_ns // 1_000_000_000 * 1_000_000_000


def record_ctime(store: Store, path: str) -> int | None:
    """A local part's inode change time (None on object storage, or if it is gone)."""
    if not store.local:
        return None
    try:
        return os.stat(path).st_ctime_ns
    except OSError:
        return None


def unchanged(store: Store, seen: dict[str, Any], info: pafs.FileInfo) -> bool:
    """Whether the part ``info`` is as the record's line ``seen`` found it."""
    same = seen["size"] == info.size and seen["mtime_ns"] == record_mtime(store, info)
    return same and seen.get("ctime_ns") == record_ctime(store, info.path)


def _writer_file(store: Store) -> Path:
    return store.cache_dir / VERIFIED_FILE


def _reader_file(store: Store) -> Path:
    return reader_dir(store) / VERIFIED_FILE


def load_record(store: Store) -> tuple[dict[str, dict[str, Any]], int, int]:
    """Recorded sound parts (the writer's record, then this reader's; last line per part wins) and the number
    of lines of each record, this reader's and the writer's (what :func:`rewrite_record` may shorten)."""
    out: dict[str, dict[str, Any]] = {}
    counts: dict[Path, int] = {}
    writer, reader = _writer_file(store), _reader_file(store)  # one file for a remote store: read once
    for path in (writer, reader):
        try:
            lines = path.read_text().splitlines() if path not in counts else []
        except OSError:
            lines = []
        counts.setdefault(path, len(lines))
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn line of a concurrent writer: that part is simply verified again
            believed = isinstance(entry, dict) and entry.get("v") == CHECKS_VERSION and "key" in entry
            if believed and authentic_entry(
                entry
            ):  # else another user's, machine's or a co-writer's line: verified again
                out[entry["key"]] = entry
    return out, counts[reader], counts[writer]


def append_record(store: Store, entries: Iterable[dict[str, Any]]) -> None:
    """Record parts a reader verified (in this reader's record); best effort."""
    append_lines(_reader_file(store), entries)


def rewrite_record(store: Store, live: dict[str, dict[str, Any]], *, writer: bool = False) -> None:
    """Replace this reader's record (``writer``: the generation writer's, in the store) by ``live``, dropping the
    lines of parts long gone; best effort."""
    append_lines(_writer_file(store) if writer else _reader_file(store), live.values(), replace=True)


def record_entry(
    store: Store, table: str, info: pafs.FileInfo, rows: int | None, checksum: str, summary: dict
) -> dict[str, Any]:
    """The record's line for one sound part (with its keyed hash)."""
    return signed(
        {
            "v": CHECKS_VERSION,
            "key": record_key(store, info.path),
            "table": table,
            "size": info.size,
            "mtime_ns": record_mtime(store, info),
            "ctime_ns": record_ctime(store, info.path),
            "rows": rows,
            "checksum": checksum,
            "summary": summary,
        }
    )


def record_written(store: Store, table: str, path: str, data: pa.Table) -> None:
    """Record a part :meth:`Store.write` just wrote as verified (values checked, hash taken as written)."""
    if table not in TABLES:
        return
    try:
        info = store.fs.get_file_info(path)
        entry = record_entry(store, table, info, data.num_rows, "sha256 ok", part_summary(table, data))
        append_lines(_writer_file(store), [entry])
    except Exception:  # noqa: BLE001 - best effort: an unrecorded part is verified by its first reader
        pass
