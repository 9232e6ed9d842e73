"""The store root and its atomic Parquet part writes.

Layout: ``<root>/<table>/part-<time>-<uuid>.parquet``. A part is first written
under a name that no reader globs (``_tmp-*.partial``), flushed, then renamed:
a reader (DuckDB's ``*.parquet`` glob included) never sees half a file, and a
killed writer leaves only a temp file that :meth:`Store.sweep_temp` removes.

``root`` is a local path or any pyarrow filesystem URI (``s3://...``, ``gs://...``).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .schemas import TABLES

PART_GLOB = "*.parquet"
TMP_PREFIX = "_tmp-"


class StoreError(ValueError):
    """A table written with the wrong columns or types; says which table and why."""


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
        """The pattern DuckDB's read_parquet takes for one table."""
        return f"{self.uri}/{name}/{PART_GLOB}"

    def write(self, name: str, table: pa.Table, schema: pa.Schema | None = None) -> str:
        """Write one part atomically; returns its path. Empty tables write nothing."""
        schema = schema or TABLES.get(name)
        if schema is None:
            raise StoreError(f"unknown table {name!r}; known: {sorted(TABLES)}")
        try:
            table = table.select(schema.names).cast(schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise StoreError(f"table {name!r} does not match its schema: {exc}") from None
        if table.num_rows == 0:
            return ""
        folder = self.table_path(name)
        self.fs.create_dir(folder, recursive=True)
        stem = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
        tmp, final = f"{folder}/{TMP_PREFIX}{stem}.partial", f"{folder}/part-{stem}.parquet"
        if self.local:
            with open(tmp, "wb") as fh:
                pq.write_table(table, fh, compression="zstd")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        else:
            with self.fs.open_output_stream(tmp) as out:
                pq.write_table(table, out, compression="zstd")
            self.fs.move(tmp, final)
        return final

    def parts(self, name: str) -> list[str]:
        selector = pafs.FileSelector(self.table_path(name), allow_not_found=True)
        return sorted(
            info.path
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
            and info.base_name.endswith(".parquet")
            and not info.base_name.startswith(TMP_PREFIX)
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
            selector = pafs.FileSelector(self.table_path(name), allow_not_found=True)
            for info in self.fs.get_file_info(selector):
                if info.base_name.startswith(TMP_PREFIX):
                    self.fs.delete_file(info.path)
                    removed += 1
        return removed
