"""A DuckDB connection, and its read-only sandbox: which folders it may read, where it spills, no setting changed.

With ``read_only=True`` (the default of :func:`analysis.connect`) file access outside the store's
table folders (and the temp spill folder) is disabled and the configuration locked, so SQL cannot
reach other files; :mod:`analysis.query` additionally refuses any statement that is not a query
(COPY, ATTACH, EXPORT ...), so the store cannot be changed. The spill folder
(``<tmp>/shp-duckdb-<pid>-<random>``) exists only while a connection that spilled is open: DuckDB
creates it on the first spill and removes it when the connection closes.
"""

from __future__ import annotations

import os
import secrets
import tempfile

import duckdb

from analysis import sql
from storage.parts import Store
from storage.schemas import TABLES


def new_connection(memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory connection: the store's Parquet parts are only ever read.

    Its spill folder is chosen now, before any work (DuckDB cannot switch it once it has spilled),
    so a store larger than ``memory_limit`` (e.g. ``"1.5GB"``; default: DuckDB's, 80% of RAM) is
    opened by spilling there rather than by growing without bound.
    """
    con = duckdb.connect(":memory:")
    con.execute(sql.query("new_connection", spill=sql.quote(_spill_path())))
    if memory_limit is not None:
        try:
            con.execute(sql.query("memory_limit", limit=sql.quote(memory_limit)))
        except duckdb.Error as exc:
            con.close()
            raise ValueError(f"memory_limit {memory_limit!r}: {exc}") from None
    return con


def _spill_path() -> str:
    """A fresh, unpredictable path under the temp folder for one connection's spill files, NOT created.

    DuckDB creates its ``temp_directory`` only when a query first spills, and removes a folder it
    created itself when the database closes (``close()``, garbage collection, interpreter exit); a
    folder made here (``mkdtemp``) would be emptied but left behind, one per connection. So a
    connection that never spills leaves nothing even if its process is killed.
    """
    while True:
        path = os.path.join(tempfile.gettempdir(), f"shp-duckdb-{os.getpid()}-{secrets.token_hex(8)}")
        if not os.path.lexists(path):
            return path


def _sandbox_dirs(store: Store, spill: str) -> list[str]:
    """The only folders a locked-down connection may open: each table's folder, spelled exactly as the
    views read it (:meth:`Store.glob` without its file pattern), and the connection's spill folder.

    The same rule for every kind of root: a local path; ``file:///...`` (DuckDB strips the scheme from
    both the entry and the path it checks, so the entry guards the local folder); ``s3://`` / ``gs://``
    (readable only through an extension loaded before the lock-down: none can be loaded after it; a remote
    store's views read pyarrow datasets registered with the connection, :mod:`analysis.replay.sources`, so no
    path of it needs opening at all).
    Not the store root: ``views.sql``, ``_cache/`` (the SQLite caches of model responses) and whatever
    else sits beside the tables stay unreadable.
    """
    return [store.glob(table).rsplit("/", 1)[0] + "/" for table in TABLES] + [spill + "/"]


def lock_down(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Sandbox the connection, whatever the store root, with DuckDB's own settings (run last in connect()).

    Reads: only :func:`_sandbox_dirs` (``allowed_directories`` with ``enable_external_access = false``,
    which also refuses every other path, URL, ``LOAD``/``INSTALL`` and Python replacement scans of
    variables); no extension is auto-installed or auto-loaded, no secret is read from or written to
    ``~/.duckdb``. Settings: ``lock_configuration`` (last) makes every ``SET``/``RESET``/``PRAGMA`` and
    the table functions that change settings (``enable_profiling(save_location=...)``,
    ``enable_logging(...)``) fail, so none of this can be undone. Writes: DuckDB may still write inside
    the allowed folders (it has no read-only flavour of them), which is why :mod:`analysis.query`
    accepts queries only. Views and UDFs made before this keep working; spilling goes to ``spill``.
    The statements, in order: ``analysis/sql/replay/connection/lock_down.sql``.
    """
    ((spill,),) = con.execute(sql.query("spill_folder")).fetchall()  # new_connection chose it
    allowed = ", ".join(sql.quote(d) for d in _sandbox_dirs(store, spill))
    con.execute(sql.query("lock_down", allowed=allowed))
