"""The store root and its atomic Parquet part writes.

Layout: ``<root>/<table>/[<column>=<value>/]part-<time>-<uuid>.sha256-<hash>.parquet``, the
tables that grow split into one folder per generation or dataset (:mod:`storage.partitions`).
A local part is first written under a name that no reader globs (``_tmp-*.partial``), flushed, then
renamed: a reader (DuckDB's ``*.parquet`` glob included) never sees half a file, and a killed writer
leaves only a temp file that :meth:`Store.sweep_temp` removes.

Every part carries its own integrity record: ``<hash>`` is the sha256 (first 32 hex digits) of the
file's bytes as written -- footer included -- and each data page has a CRC32 (Parquet page
checksums). Its values are checked before it is written (``storage.schemas.VALUE_RANGES``); and
:mod:`storage.verify` checks parts again before anything believes them. Parts written before this
(``part-<time>-<uuid>.parquet``) have no hash: they get the schema and value checks only.

``root`` is a local path, ``s3://bucket/prefix`` (:mod:`storage.objectstore`: credentials and endpoint from
the AWS environment variables) or another pyarrow filesystem URI (``file://``; ``gs://`` untested).
:func:`check_root` (:mod:`storage.root_check`) says, before anything runs, why a root could not be
written; :func:`open_store` why one could not be read. On object storage there is no rename: a part
is hashed in memory and written under its final name in one upload, which S3 makes visible only once
complete (one PutObject for a small part, a multipart upload for a large one), so a killed writer
leaves nothing a reader lists.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from shp_ray.redaction import redact_text
from storage import buckets, cache, objectstore, partitions, user_cache
from storage.part_rules import value_problems

# Re-exported: the root checks lived here, and callers import them from here.
from storage.root_check import PROBE_PREFIX, ROOT_CHECK_TIMEOUT_S, StoreUnusable, check_root
from storage.schemas import ADDED_COLUMNS, TABLES, with_added_columns
from storage.verified_record import record_written
from storage.write_fault import WriteFailed, writing

__all__ = [
    "PROBE_PREFIX", "HashingSink", "NoStore", "Store", "StoreError", "StoreUnusable", "WriteFailed", "check_root",
    "open_store",
]  # fmt: skip

PART_GLOB = "*.parquet"
TMP_PREFIX = "_tmp-"
TEMP_GRACE_S = 3600.0  # a temp file younger than this may be a live writer's (another job, a compaction): kept
HASH_HEX = 32  # digits of the sha256 of a part's bytes kept in its name (128 bits)
_PART_HASH = re.compile(rf"\.sha256-([0-9a-f]{{{HASH_HEX}}})\.parquet$")


class StoreError(ValueError):
    """A table written with the wrong columns or types; says which table and why."""


def open_store(store: Store, *, timeout_s: float = ROOT_CHECK_TIMEOUT_S) -> Store:
    """``store``, for reading; on object storage, checked first (:class:`StoreUnusable`, one line, before any other
    call): credentials set, the endpoint answering, the bucket there. A root that holds no store -- missing, a file,
    a folder with no table folder (``rounds/``, ``manifests/`` ...: a sweep makes them) -- is :class:`NoStore`, and
    nothing is created for it."""
    found: list[bool] = []
    if store.remote and objectstore.is_object_store(store.uri):
        try:
            objectstore.check(store.fs, store.path, store.uri, timeout_s=timeout_s)
            objectstore.bounded(lambda: found.append(_holds_tables(store)), store.uri, timeout_s)
        except objectstore.ObjectStoreError as exc:
            raise StoreUnusable(str(exc)) from None
    else:
        found.append(_holds_tables(store))
    if not found[0]:
        raise NoStore(
            f"no store at {redact_text(store.uri) if store.remote else store.path}: it holds no table folder "
            "(rounds/, judgments/, manifests/ ...: expected <root>/<table>/part-*.parquet); nothing was read or created"
        )
    return store


class NoStore(StoreUnusable):
    """A root that holds no store: said in one line; a reader creates nothing for it."""


def _holds_tables(store: Store) -> bool:
    """Whether the root is a folder with a table folder in it (an empty one is an empty store)."""
    try:
        infos = store.fs.get_file_info(pafs.FileSelector(store.path, allow_not_found=True))
    except (OSError, ValueError):  # a file, or a folder that cannot be listed
        return False
    return any(i.type == pafs.FileType.Directory and i.base_name in TABLES for i in infos)


def part_digest(path: str) -> str | None:
    """The content hash a part's name records (None: a part written before hashes, or not by Store.write)."""
    m = _PART_HASH.search(path.rsplit("/", 1)[-1])
    return m.group(1) if m else None


class HashingSink:
    """A write-only file for ``pq.write_table`` that hashes every byte on its way to ``raw``."""

    closed = False

    def __init__(self, raw: object) -> None:
        self.raw, self.sha, self.size = raw, hashlib.sha256(), 0
        self.error: OSError | None = None  # the raw file's first write error: raised by check() after the write

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        if self.error is None:
            # Kept, not raised: an exception raised back through pyarrow's C++ writer left CPython's AST
            # recursion counter off (a later ast.parse -- pytest importing a module -- failed, CPython 3.11.7).
            try:
                self.raw.write(data)  # type: ignore[attr-defined]  # raw: a pyarrow output stream
            except OSError as exc:
                self.error = exc
        return len(data)

    def check(self) -> None:
        """Raise the write error the file met, if any."""
        if self.error is not None:
            raise self.error

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True


_ALL = object()  # Store.parts / globs: every partition


class Store:
    """A store root: its filesystem, where each table's parts lie, atomic writes.

    ``snapshot()`` is the same store with its files listed ONCE (one recursive listing): what a reader
    of a remote store opens with, so each table's parts cost no further request (:meth:`part_infos`).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = text = str(root)  # as it was named: what a message shows (``uri`` is what it resolved to)
        self._listing: list[pafs.FileInfo] | None = None  # set by snapshot(): every file under the root
        if objectstore.is_object_store(text):
            try:
                self.fs, self.path = objectstore.filesystem(text)
            except objectstore.ObjectStoreError as exc:
                raise StoreUnusable(str(exc)) from None
            self.uri = text.rstrip("/")
            self.local = False
        elif "://" in text:
            self.fs, self.path = pafs.FileSystem.from_uri(text)
            self.uri = text.rstrip("/")
            self.local = False
        else:
            self.fs, self.path = pafs.LocalFileSystem(), str(Path(text).resolve())
            self.uri = self.path
            self.local = True
        # Remote: no rename, no folders, no fsync -- parts are written in one upload under their final name.
        self.remote = not isinstance(self.fs, pafs.LocalFileSystem)

    def snapshot(self) -> Store:
        """This store with every file under its root listed now, once; it lists nothing again (read-only use)."""
        copy = object.__new__(Store)
        copy.__dict__.update(self.__dict__)
        selector = pafs.FileSelector(self.path, recursive=True, allow_not_found=True)
        copy._listing = [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]
        return copy

    def __repr__(self) -> str:
        return f"Store({self.uri!r})"

    @property
    def cache_dir(self) -> Path:
        """The writer's side folder (caches, locks, the parts it wrote): ``<root>/_cache``; on object storage
        this machine's folder for the store (:func:`storage.user_cache.remote_dir`: SQLite cannot sit there)."""
        return user_cache.remote_dir(self.uri) if self.remote else Path(self.path).resolve() / cache.CACHE_DIRNAME

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
        out: list[str] = []
        for folder in sorted({p[len(root) :].rpartition("/")[0] for p in found}):
            levels = folder.split("/") if folder else []  # [] | [gen_id=<g>] | [gen_id=<g>, bucket=<nn>]
            if levels and partition is _ALL:
                levels[0] = f"{partitions.PARTITION_BY[name]}=*"
            levels[1:] = [f"{buckets.COLUMN}=*"] * len(levels[1:])
            pattern = "/".join([self.uri, name, *levels, PART_GLOB])
            if pattern not in out:
                out.append(pattern)
        return out

    def write(self, name: str, table: pa.Table, schema: pa.Schema | None = None) -> str:
        """Write one part atomically per partition folder; returns the (last) path. Empty tables write nothing.

        Refused (StoreError, nothing written): columns or types that do not match the schema (a column
        the table gained later, ``ADDED_COLUMNS``, may be absent: it is written NULL), and values that
        cannot be (``VALUE_RANGES``: a negative token count, a NaN embedding ...). The
        part is written with page checksums, named with the sha256 of its bytes, and recorded as
        verified (:mod:`storage.verified_record`), so no reader re-checks a part this process wrote.
        """
        schema = schema or TABLES.get(name)
        if schema is None:
            raise StoreError(f"unknown table {name!r}; known: {sorted(TABLES)}")
        try:
            # a writer that predates a column the table gained writes NULL there: read as an older part's value
            table = with_added_columns(name, table, fill=False).select(schema.names).cast(schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise StoreError(f"table {name!r} does not match its schema: {exc}") from None
        if table.num_rows == 0:
            return ""
        problems = value_problems(name, table)
        if problems:
            raise StoreError(f"table {name!r} holds values that cannot be: {'; '.join(problems)}")
        path = ""
        for folder, rows in partitions.split(name, table, self.buckets):
            path = self._write_part(name, rows, folder)
        return path

    @property
    def buckets(self) -> int:
        """The scenario-hash buckets the per-round tables are written into (0: none), read once (storage.buckets)."""
        if getattr(self, "_buckets", None) is None:
            self._buckets = buckets.layout_count(self.fs, self.path)
        return self._buckets

    def _write_part(self, name: str, table: pa.Table, folder: str | None) -> str:
        if self._listing is not None:
            raise StoreError(f"{self!r} is a snapshot, for reading; write through Store({self.uri!r})")
        folder = self.table_path(name) + (f"/{folder}" if folder else "")
        stem = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
        options = {"compression": "zstd", "write_page_checksum": True}
        if self.remote:
            # Hashed in memory first, so the object is written once under its final name: S3 shows an
            # object only when its upload completes, so no reader ever lists a partial part.
            buf = pa.BufferOutputStream()
            sink = HashingSink(buf)
            pq.write_table(table, sink, **options)
            final = self._part_name(folder, stem, sink)
            with self.fs.open_output_stream(final) as out:
                out.write(buf.getvalue())
            record_written(self, name, final, table)
            return final
        tmp = f"{folder}/{TMP_PREFIX}{stem}.partial"
        try:
            with writing(folder):  # a full disk: one line naming the folder, and no temp file left
                self.fs.create_dir(folder, recursive=True)
                if self.local:
                    with open(tmp, "wb") as fh:
                        sink = HashingSink(fh)
                        pq.write_table(table, sink, **options)
                        sink.check()
                        fh.flush()
                        os.fsync(fh.fileno())
                else:
                    with self.fs.open_output_stream(tmp) as out:
                        sink = HashingSink(out)
                        pq.write_table(table, sink, **options)
                        sink.check()
                final = self._part_name(folder, stem, sink)
                if self.local:
                    os.replace(tmp, final)
                else:
                    self.fs.move(tmp, final)
        except BaseException:
            self._discard(tmp)
            raise
        record_written(self, name, final, table)
        return final

    def _discard(self, tmp: str) -> None:
        """Remove a temp file a failed write left (if there is one; best effort: the sweep gets it later)."""
        with contextlib.suppress(OSError):
            if self.local:
                os.unlink(tmp)
            else:
                self.fs.delete_file(tmp)

    @staticmethod
    def _part_name(folder: str, stem: str, sink: HashingSink) -> str:
        return f"{folder}/part-{stem}.sha256-{sink.sha.hexdigest()[:HASH_HEX]}.parquet"

    def put_bytes(self, path: str, data: bytes) -> None:
        """Write a small side file (a journal, a reason) whole: one upload remotely, temp + rename locally."""
        if self.remote:
            with self.fs.open_output_stream(path) as out:
                out.write(data)
            return
        tmp = f"{path}.{TMP_PREFIX}w"
        try:
            with writing(path):
                with self.fs.open_output_stream(tmp) as out:
                    out.write(data)
                self.fs.move(tmp, path)
        except BaseException:
            self._discard(tmp)
            raise

    def _files(self, name: str, partition: object = _ALL) -> list[pafs.FileInfo]:
        """Every file in ``name``'s folders -- the table's, its partition folders' (only the one of ``partition``,
        when given) and their bucket folders' (:mod:`storage.buckets`): its parts, and temp files of a killed writer."""
        root = self.table_path(name)
        if self._listing is not None:
            infos = [i for i in self._listing if i.path.startswith(root + "/")]
        elif name not in partitions.PARTITION_BY or partition is _ALL:
            infos = self._listed(root, recursive=name in partitions.PARTITION_BY)
        else:
            column = partitions.PARTITION_BY[name]
            infos = self._listed(root) + self._listed(f"{root}/{partitions.folder_name(column, partition)}", True)
        return [i for i in infos if self._in_scope(name, i.path[len(root) + 1 :].split("/")[:-1], partition)]

    def _listed(self, folder: str, recursive: bool = False) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(folder, recursive=recursive, allow_not_found=True)
        return [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]

    @staticmethod
    def _in_scope(name: str, folders: list[str], partition: object) -> bool:
        """Whether a file in ``folders`` (below the table's) is one of ``name``'s, in ``partition``'s folder."""
        if not folders:
            return True
        column = partitions.PARTITION_BY.get(name)
        if column is None or not partitions.is_partition_folder(name, folders[0]) or len(folders) > 2:
            return False
        if partition is not _ALL and folders[0] != partitions.folder_name(column, partition):
            return False
        return len(folders) == 1 or buckets.is_bucket_folder(folders[1])

    def part_infos(self, name: str, partition: object = _ALL) -> list[pafs.FileInfo]:
        """:meth:`parts` with each part's size and mtime, as listed (no request per part)."""
        return sorted(
            (
                info
                for info in self._files(name, partition)
                if info.base_name.endswith(".parquet") and not info.base_name.startswith(TMP_PREFIX)
            ),
            key=lambda info: info.path,
        )

    def parts(self, name: str, partition: object = _ALL) -> list[str]:
        """Every part of ``name`` (in its folder and its partition folders); ``partition``: only those
        that can hold that value of the partition column (its folder, and parts of no folder)."""
        return [info.path for info in self.part_infos(name, partition)]

    def read(self, name: str, columns: list[str] | None = None, schema: pa.Schema | None = None) -> pa.Table:
        """The whole table (empty, with its schema, if nothing was written yet)."""
        schema = schema or TABLES[name]
        paths = self.parts(name)
        if not paths:
            return schema.empty_table().select(columns) if columns else schema.empty_table()
        tables = [self.read_part(name, p, columns) for p in paths]
        return pa.concat_tables(tables, promote_options="default")

    def read_part(self, name: str, path: str, columns: list[str] | None = None) -> pa.Table:
        """One part of table ``name`` (only ``columns``); a column the table gained after the part was
        written reads as the value such a part means (``storage.schemas.ADDED_COLUMNS``)."""
        added = ADDED_COLUMNS.get(name, {})
        if added and columns is not None and not added.keys().isdisjoint(columns):
            present = set(pq.read_schema(path, filesystem=self.fs).names)
            columns_read: list[str] | None = [c for c in columns if c in present]
        else:
            columns_read = columns
        table = pq.read_table(path, columns=columns_read, filesystem=self.fs)
        if not added:
            return table
        table = with_added_columns(name, table)
        return table.select(columns) if columns is not None else table

    def sweep_temp(self, min_age_s: float = 0.0) -> int:
        """Remove the temp files a killed writer left, older than ``min_age_s`` (younger: maybe a live writer's)."""
        removed = 0
        now_ns = time.time_ns()
        for name in TABLES:
            for info in self._files(name):
                if not info.base_name.startswith(TMP_PREFIX):
                    continue
                if min_age_s and info.mtime_ns is not None and now_ns - info.mtime_ns < min_age_s * 1e9:
                    continue
                self.fs.delete_file(info.path)
                removed += 1
        return removed
