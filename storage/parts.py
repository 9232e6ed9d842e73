"""The store root and its atomic Parquet part writes.

Layout: ``<root>/<table>/[<column>=<value>/]part-<time>-<uuid>.sha256-<hash>.parquet``, the
tables that grow split into one folder per generation or dataset (:mod:`storage.partitions`).
A part is first written under a name that no reader globs (``_tmp-*.partial``), flushed, then renamed:
a reader (DuckDB's ``*.parquet`` glob included) never sees half a file, and a
killed writer leaves only a temp file that :meth:`Store.sweep_temp` removes.

Every part carries its own integrity record: ``<hash>`` is the sha256 (first 32 hex digits) of the
file's bytes as written -- footer included -- and each data page has a CRC32 (Parquet page
checksums). Its values are checked before it is written (``storage.schemas.VALUE_RANGES``); and
:mod:`storage.verify` checks parts again before anything believes them. Parts written before this
(``part-<time>-<uuid>.parquet``) have no hash: they get the schema and value checks only.

``root`` is a local path or any pyarrow filesystem URI (``s3://...``, ``gs://...``).
:func:`check_root` says, before anything runs, why a root could not be written.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage import partitions
from storage.part_rules import value_problems
from storage.schemas import TABLES
from storage.verified_record import record_written

PART_GLOB = "*.parquet"
TMP_PREFIX = "_tmp-"
HASH_HEX = 32  # digits of the sha256 of a part's bytes kept in its name (128 bits)
_PART_HASH = re.compile(rf"\.sha256-([0-9a-f]{{{HASH_HEX}}})\.parquet$")
PROBE_PREFIX = "_shp-probe-"
ROOT_CHECK_TIMEOUT_S = 10.0


class StoreError(ValueError):
    """A table written with the wrong columns or types; says which table and why."""


class StoreUnusable(ValueError):
    """A store root that cannot be written: the message (one line) says where and why."""


def _one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


_SECRET_PARAM = re.compile(r"(?i)([^&=]*(?:key|secret|token|password)[^&=]*)=[^&]*")


def _redact_uri(uri: str) -> str:
    """``s3://KEY:SECRET@bucket/x?secret_key=S`` -> ``s3://***@bucket/x?secret_key=***`` for messages."""
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        parts = parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1])
    return urlunsplit(parts._replace(query=_SECRET_PARAM.sub(r"\1=***", parts.query)))


def _nearest_existing(fs: pafs.FileSystem, path: str) -> tuple[str, pafs.FileInfo]:
    """The deepest of ``path`` and its ancestors that exists (what ``create_dir`` would write into)."""
    while True:
        info = fs.get_file_info(path)
        parent = path.rstrip("/").rpartition("/")[0]
        if info.type != pafs.FileType.NotFound or not parent or parent == path:
            return path, info
        path = parent


def _check_local(root: Path) -> None:
    # lexists: a dangling symlink would pass exists() and then fail on mkdir.
    here = root
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    if here != root and not here.is_dir():
        raise StoreUnusable(f"{here} is a file, not a folder, so {root} cannot be created under it")
    if here == root and not root.is_dir():
        raise StoreUnusable(f"{root} is a file, not a folder")
    # os.access misses read-only mounts for root and some ACLs; creating an entry does not.
    if not os.access(here, os.W_OK | os.X_OK):
        raise StoreUnusable(f"{here} is not writable by this user")
    probe = here / f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    try:
        probe.mkdir()
    except OSError as exc:
        why = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise StoreUnusable(f"cannot create a folder in {here}: {why}") from None
    probe.rmdir()


def _check_uri(uri: str) -> None:
    fs, path = pafs.FileSystem.from_uri(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        _check_local(Path(path))
        return
    if fs.type_name in ("s3", "gcs"):
        bucket = path.strip("/").split("/", 1)[0]
        if not bucket:
            raise StoreUnusable("the URI names no bucket")
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise StoreUnusable(f"bucket {bucket!r} does not exist (or these credentials cannot see it)")
    here, info = _nearest_existing(fs, path.rstrip("/"))
    if info.type == pafs.FileType.File:
        where = "it is a file" if here == path.rstrip("/") else f"{here!r} on its path is a file"
        raise StoreUnusable(f"{where}, not a folder")
    # A probe object, written and deleted in the nearest folder that exists. pyarrow re-creates the
    # (empty) marker of that folder on delete: it existed already, so no new folder shows anywhere.
    probe = f"{here}/{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    with fs.open_output_stream(probe) as out:
        out.write(b"")
    fs.delete_file(probe)


def check_root(root: str | Path, *, timeout_s: float = ROOT_CHECK_TIMEOUT_S) -> None:
    """Raise :class:`StoreUnusable` if a store at ``root`` could not be created or written.

    Local: the root is a folder or can be made one (no file on its path), and a folder can be created
    in its nearest existing ancestor. URI: the filesystem answers within ``timeout_s``, the bucket
    exists, the root is not a file and an object can be written beside it. Nothing is left behind
    (a probe entry is created and removed); the root itself is not created.
    """
    text = str(root)
    if "://" not in text:
        _check_local(Path(text).resolve())
        return
    shown = _redact_uri(text)
    outcome: list[Exception | None] = []

    def probe() -> None:
        try:
            _check_uri(text)
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 - reported to the caller below, in one line
            outcome.append(exc)

    # The check runs in a daemon thread: a filesystem that never answers costs timeout_s, not minutes.
    worker = threading.Thread(target=probe, name="shp-store-check", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        raise StoreUnusable(f"{shown}: no answer within {timeout_s:g} s (is the endpoint reachable?)")
    exc = outcome[0]
    if isinstance(exc, StoreUnusable):
        raise StoreUnusable(f"{shown}: {exc}") from None
    if exc is not None:
        raise StoreUnusable(f"{shown}: {_one_line(str(exc).replace(text, shown))}") from None


def part_digest(path: str) -> str | None:
    """The content hash a part's name records (None: a part written before hashes, or not by Store.write)."""
    m = _PART_HASH.search(path.rsplit("/", 1)[-1])
    return m.group(1) if m else None


class HashingSink:
    """A write-only file for ``pq.write_table`` that hashes every byte on its way to ``raw``."""

    closed = False

    def __init__(self, raw: object) -> None:
        self.raw, self.sha, self.size = raw, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        self.raw.write(data)  # type: ignore[attr-defined]
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True


_ALL = object()  # Store.parts / globs: every partition


class Store:
    def __init__(self, root: str | Path) -> None:
        text = str(root)
        if "://" in text:
            self.fs, self.path = pafs.FileSystem.from_uri(text)
            self.uri = text.rstrip("/")
            self.local = False
        else:
            self.fs, self.path = pafs.LocalFileSystem(), str(Path(text).resolve())
            self.uri = self.path
            self.local = True

    def __repr__(self) -> str:
        return f"Store({self.uri!r})"

    def table_path(self, name: str) -> str:
        return f"{self.path}/{name}"

    def glob(self, name: str) -> str:
        """The pattern of one table's parts directly in its folder (those written before partitions)."""
        return f"{self.uri}/{name}/{PART_GLOB}"

    def globs(self, name: str, partition: object = _ALL) -> list[str]:
        """The patterns DuckDB's read_parquet takes for one table: each matches at least one part now
        (read_parquet refuses a pattern that matches nothing). ``partition``: only the folder of that
        value of the table's partition column (and the parts of no folder, which may hold it too)."""
        found = self.parts(name, partition)
        root = f"{self.table_path(name)}/"
        out = []
        if any("/" not in p[len(root) :] for p in found):
            out.append(self.glob(name))
        in_folders = sorted({p[len(root) :].split("/", 1)[0] for p in found if "/" in p[len(root) :]})
        if in_folders:
            column = partitions.PARTITION_BY[name]
            if partition is _ALL:
                out.append(f"{self.uri}/{name}/{column}=*/{PART_GLOB}")
            else:
                out += [f"{self.uri}/{name}/{folder}/{PART_GLOB}" for folder in in_folders]
        return out

    def write(self, name: str, table: pa.Table, schema: pa.Schema | None = None) -> str:
        """Write one part atomically per partition folder; returns the (last) path. Empty tables write nothing.

        Refused (StoreError, nothing written): columns or types that do not match the schema, and
        values that cannot be (``VALUE_RANGES``: a negative token count, a NaN embedding ...). The
        part is written with page checksums, named with the sha256 of its bytes, and recorded as
        verified (:mod:`storage.verified_record`), so no reader re-checks a part this process wrote.
        """
        schema = schema or TABLES.get(name)
        if schema is None:
            raise StoreError(f"unknown table {name!r}; known: {sorted(TABLES)}")
        try:
            table = table.select(schema.names).cast(schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise StoreError(f"table {name!r} does not match its schema: {exc}") from None
        if table.num_rows == 0:
            return ""
        problems = value_problems(name, table)
        if problems:
            raise StoreError(f"table {name!r} holds values that cannot be: {'; '.join(problems)}")
        path = ""
        for folder, rows in partitions.split(name, table):
            path = self._write_part(name, rows, folder)
        return path

    def _write_part(self, name: str, table: pa.Table, folder: str | None) -> str:
        folder = self.table_path(name) + (f"/{folder}" if folder else "")
        self.fs.create_dir(folder, recursive=True)
        stem = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
        tmp = f"{folder}/{TMP_PREFIX}{stem}.partial"
        options = {"compression": "zstd", "write_page_checksum": True}
        if self.local:
            with open(tmp, "wb") as fh:
                sink = HashingSink(fh)
                pq.write_table(table, sink, **options)
                fh.flush()
                os.fsync(fh.fileno())
        else:
            with self.fs.open_output_stream(tmp) as out:
                sink = HashingSink(out)
                pq.write_table(table, sink, **options)
        final = f"{folder}/part-{stem}.sha256-{sink.sha.hexdigest()[:HASH_HEX]}.parquet"
        if self.local:
            os.replace(tmp, final)
        else:
            self.fs.move(tmp, final)
        record_written(self, name, final, table)
        return final

    def _folders(self, name: str, partition: object = _ALL) -> list[str]:
        """The folders that hold ``name``'s parts: the table folder and its partition folders (only the
        one of ``partition``, when given)."""
        root = self.table_path(name)
        found = [root]
        if name not in partitions.PARTITION_BY:
            return found
        if partition is not _ALL:
            folder = f"{root}/{partitions.folder_name(partitions.PARTITION_BY[name], partition)}"
            return found + ([folder] if self.fs.get_file_info(folder).type == pafs.FileType.Directory else [])
        for info in self.fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
            if info.type == pafs.FileType.Directory and partitions.is_partition_folder(name, info.base_name):
                found.append(info.path)
        return found

    def _files(self, name: str, partition: object = _ALL) -> list[pafs.FileInfo]:
        """Every file in ``name``'s folders (:meth:`_folders`): its parts, and temp files of a killed writer."""
        return [
            info
            for folder in self._folders(name, partition)
            for info in self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
            if info.type == pafs.FileType.File
        ]

    def parts(self, name: str, partition: object = _ALL) -> list[str]:
        """Every part of ``name`` (in its folder and its partition folders); ``partition``: only those
        that can hold that value of the partition column (its folder, and parts of no folder)."""
        return sorted(
            info.path
            for info in self._files(name, partition)
            if info.base_name.endswith(".parquet") and not info.base_name.startswith(TMP_PREFIX)
        )

    def read(self, name: str, columns: list[str] | None = None, schema: pa.Schema | None = None) -> pa.Table:
        """The whole table (empty, with its schema, if nothing was written yet)."""
        schema = schema or TABLES[name]
        paths = self.parts(name)
        if not paths:
            empty = schema.empty_table()
            return empty.select(columns) if columns else empty
        tables = [pq.read_table(p, columns=columns, filesystem=self.fs) for p in paths]
        return pa.concat_tables(tables, promote_options="default")

    def sweep_temp(self) -> int:
        """Remove temp files left by a killed writer; returns how many."""
        removed = 0
        for name in TABLES:
            for info in self._files(name):
                if info.base_name.startswith(TMP_PREFIX):
                    self.fs.delete_file(info.path)
                    removed += 1
        return removed
