"""The record of verified parts: a part is read for verification once, then believed until it changes.

A sound part is recorded by (path, size, mtime) in ``<cache dir>/verified-parts.jsonl``
(``<root>/_cache`` for a local store) and is not read again until one of them changes;
:meth:`Store.write` records the parts it writes (their values were checked before writing, their
hash taken while writing). ``--verify --recheck`` ignores the record (a flip by the disk itself
changes neither size nor mtime). Entries carry :data:`CHECKS_VERSION`: when the checks change, every
recorded verification is redone. The record is best effort -- a part it misses is simply verified.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs

from storage.cache import default_cache_dir
from storage.part_rules import part_summary
from storage.schemas import TABLES

if TYPE_CHECKING:  # storage.parts records what it writes through this module: a type-only import back
    from storage.parts import Store

CHECKS_VERSION = 1  # bump when the checks change: every recorded verification is then redone
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


def _record_file(store: Store) -> Path:
    return default_cache_dir(store.uri) / VERIFIED_FILE


def load_record(store: Store) -> tuple[dict[str, dict[str, Any]], int]:
    """Recorded sound parts (last line per part wins) and the number of lines read."""
    try:
        text = _record_file(store).read_text()
    except OSError:
        return {}, 0
    out: dict[str, dict[str, Any]] = {}
    lines = text.splitlines()
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn line of a concurrent writer: that part is simply verified again
        if isinstance(entry, dict) and entry.get("v") == CHECKS_VERSION and "key" in entry:
            out[entry["key"]] = entry
    return out, len(lines)


def append_record(store: Store, entries: Iterable[dict[str, Any]]) -> None:
    """Append lines in one ``write`` (O_APPEND: concurrent jobs do not interleave); best effort."""
    data = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries).encode()
    if not data:
        return
    path = _record_file(store)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        pass  # a read-only store: verification is simply not remembered


def rewrite_record(store: Store, live: dict[str, dict[str, Any]]) -> None:
    """Replace the record by ``live`` (dropping the lines of parts long gone); best effort."""
    path = _record_file(store)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        tmp.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in live.values()))
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def record_entry(
    store: Store, table: str, info: pafs.FileInfo, rows: int | None, checksum: str, summary: dict
) -> dict[str, Any]:
    """The record's line for one sound part."""
    return {
        "v": CHECKS_VERSION,
        "key": record_key(store, info.path),
        "table": table,
        "size": info.size,
        "mtime_ns": record_mtime(store, info),
        "rows": rows,
        "checksum": checksum,
        "summary": summary,
    }


def record_written(store: Store, table: str, path: str, data: pa.Table) -> None:
    """Record a part :meth:`Store.write` just wrote as verified (values checked, hash taken as written)."""
    if table not in TABLES:
        return
    try:
        info = store.fs.get_file_info(path)
        entry = record_entry(store, table, info, data.num_rows, "sha256 ok", part_summary(table, data))
        append_record(store, [entry])
    except Exception:  # noqa: BLE001 - best effort: an unrecorded part is verified by its first reader
        pass
