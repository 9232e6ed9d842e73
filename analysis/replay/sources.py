"""Where each view reads a table's rows: Parquet globs on a local disk, registered pyarrow datasets on object storage.

DuckDB 2.0 reads ``s3://`` only through its httpfs extension, which it downloads at run time (and a
locked-down connection may load none). So a remote store is read through pyarrow instead: the store is
listed once when the connection opens (:meth:`storage.parts.Store.snapshot`), and each table -- or one
generation's partition folder of it -- becomes a ``pyarrow.dataset`` registered with the connection
under a private name that the view selects from. DuckDB pushes projections and filters into the
dataset's scanner, so a query of a few columns of one generation reads only those column chunks of
the row groups that can match; the fragments carry their sizes from the listing, so opening a part
costs no request of its own. (Measured against an fsspec filesystem registered with the connection:
BENCHMARKS.md, "Object storage".)

The datasets take the table's schema as read_parquet reads it (Parquet keeps no fixed list size, so an
embedding is ``FLOAT[]``; a column an older part lacks is NULL, then the value such a part means:
``storage.schemas.ADDED_COLUMNS``), so a local store
and the same store on S3 answer every query with the same types and rows. Unlike globs, a remote
connection's views hold the parts as listed at connect: a part written later is seen by the next connection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.dataset as pds
import pyarrow.fs as pafs

from analysis import sql
from storage.parts import Store
from storage.schemas import ADDED_COLUMNS, TABLES


def _sqltype(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
        return _sqltype(t.value_type) + "[]"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{f.name} {_sqltype(f.type)}" for f in t) + ")"
    raise TypeError(f"no SQL type for {t}")


def fields(table: str) -> list[tuple[str, str]]:
    """(column, SQL type) of ``table`` as the views read it."""
    return [(f.name, _sqltype(f.type)) for f in TABLES[table]]


def added(table: str) -> list[tuple[str, str, object]]:
    """(column, SQL type, value) of the columns ``table`` gained after parts were written
    (storage.schemas.ADDED_COLUMNS): the value a part without one means (None: NULL)."""
    types = dict(fields(table))
    return [(name, types[name], value) for name, value in ADDED_COLUMNS.get(table, {}).items()]


def _as_read(schema: pa.Schema) -> pa.Schema:
    """The schema as read_parquet reads it: Parquet keeps no fixed list size, so ``FLOAT[384]`` is ``FLOAT[]``."""
    return pa.schema(
        [pa.field(f.name, pa.list_(f.type.value_type)) if pa.types.is_fixed_size_list(f.type) else f for f in schema]
    )


def dataset(store: Store, table: str, infos: Sequence[pafs.FileInfo]) -> pds.FileSystemDataset:
    """The parts ``infos`` of ``table`` as one pyarrow dataset with the table's schema as read (sizes from the
    listing: no request per part)."""
    fmt = pds.ParquetFileFormat()
    fragments = [fmt.make_fragment(i.path, store.fs, file_size=i.size) for i in infos]
    return pds.FileSystemDataset(fragments, _as_read(TABLES[table]), fmt, store.fs)


class TableSources:
    """The SELECT a view reads a table (or one generation of it) from, for one store and one connection.

    Local store: ``read_parquet`` over :meth:`Store.globs`, nothing registered. Remote store: ``store``
    is listed once here and each relation asked for is registered with ``con`` on first use. ``skip``: parts
    never read, each a copy of rows other parts hold (analysis.replay.uniqueness); a local table with one reads its
    other parts by name.
    """

    def __init__(self, store: Store, con: duckdb.DuckDBPyConnection | None = None) -> None:
        self.remote = store.remote
        if self.remote and con is None:
            raise ValueError(f"{store!r}: reading a remote store needs the connection its datasets are registered with")
        self.store = store.snapshot() if self.remote and store._listing is None else store
        self.con = con
        self._registered: dict[tuple[str, str | None, frozenset[str]], str] = {}
        self.skip: frozenset[str] = frozenset()

    def of(self, table: str, gen_id: str | None = None) -> str:
        """Every row of ``table``; ``gen_id``: only the parts that can hold that generation's rows (its
        partition folder: the others are never opened). A typed empty relation while it has no parts."""
        if not self.remote:
            globs = self.store.globs(table) if gen_id is None else self.store.globs(table, gen_id)
            if self.skip and not self.skip.isdisjoint(parts := [i.path for i in self._infos(table, gen_id)]):
                globs = [p for p in parts if p not in self.skip]
            return sql.table_source(globs, fields(table), added(table))
        key = (table, gen_id, self.skip)
        if key not in self._registered:
            read = [i for i in self._infos(table, gen_id) if i.path not in self.skip]
            if not read:
                return sql.empty_select(fields(table))
            scope = "" if gen_id is None else "_" + hashlib.sha256(gen_id.encode()).hexdigest()[:12]
            name = f"_store_{table}{scope}" + (f"_{len(self._registered)}" if self.skip else "")
            assert self.con is not None
            self.con.register(name, dataset(self.store, table, read))
            self._registered[key] = name
        # the dataset has the whole schema (a part without an added column reads NULL): give NULL its meaning
        return sql.with_added_values(sql.query("relation_rows", relation=self._registered[key]), added(table))

    def _infos(self, table: str, gen_id: str | None) -> list[pafs.FileInfo]:
        return self.store.part_infos(table) if gen_id is None else self.store.part_infos(table, gen_id)
