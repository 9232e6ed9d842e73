"""Persistent caches on SQLite (WAL): LLM responses and judge results, stored as JSON records.

One row per completed call, committed as the call completes, so a rerun after
``kill -9`` repeats no paid call that had finished. WAL mode lets many Ray
actors (processes) read and write the same file; writers wait on a busy
timeout instead of failing. Caches live on the local disk (SQLite cannot sit
on object storage): by default ``<store root>/_cache`` for a local store --
a folder DuckDB's ``<table>/*.parquet`` globs never see -- and, for a store on
object storage, a folder of this machine named by the store
(:func:`storage.user_cache.remote_dir`, logged once): not shared across machines. The folder is
:attr:`storage.parts.Store.cache_dir`, the one place it is named.

The caches hold plain records (a dict, stored as sorted JSON text) under a
string key; they know nothing of the objects the records come from. What goes
in a record, and which results are worth keeping, is decided by the callers in
``shp_ray.generation.services`` (storage sits below the code that makes calls):

- :class:`ResponseCache`: ``ChatRequest.cache_key()`` -> the completion's
  content, usage, latency, model and the readable key parts.
- :class:`JudgeCache`: judge key -> the judge result (metrics, judge, prompt
  version, tokens, error), shared across runs and sweeps.

A record that finds the disk full is not dropped: it is kept in memory (and answered by :meth:`get`) while the
put waits up to :attr:`_SqliteKV.space_wait_s` for space, then written. Only if no space comes is the put
:class:`~storage.write_fault.WriteFailed`, with one warning line naming how many paid records were lost (a rerun
pays for those again, and only those).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from storage.write_fault import WriteFailed, writing

RESPONSES_FILE = "responses.sqlite"
JUDGMENTS_FILE = "judgments.sqlite"
CACHE_DIRNAME = "_cache"
SPACE_WAIT_S = 30.0  # how long a record that found the disk full waits, in memory, for space
_log = logging.getLogger("shp_ray.store")


def cached_replies(cache_dir: str | Path) -> int:
    """The replies the response cache holds (every successful call, from every run of the store), read without
    writing (no cache yet: 0)."""
    path = Path(cache_dir) / RESPONSES_FILE
    if not path.is_file():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as db:
            return int(db.execute(f"SELECT count(*) FROM {ResponseCache.table}").fetchone()[0])
    except sqlite3.Error:  # a cache being created as we look: nothing countable yet
        return 0


BUSY_TIMEOUT_S = 60.0
T = TypeVar("T")


def when_free(statement: Callable[[], T], timeout: float = BUSY_TIMEOUT_S) -> T:
    """``statement()``, tried again while another process holds the lock, for up to ``timeout`` seconds.

    SQLite's busy timeout does not cover every wait: when several processes open a
    new file at once, switching it to WAL or creating its tables can deadlock on the
    lock upgrade, and SQLite then answers "database is locked" at once instead of
    waiting (measured: 11 of 320 opens failed, 8 processes opening one new file).
    Only idempotent statements go through here, so trying again is safe.
    """
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def open_sqlite(path: Path) -> sqlite3.Connection:
    """One process's connection to a store-side SQLite file: WAL, shared by many processes, autocommit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    when_free(lambda: conn.execute("PRAGMA journal_mode=WAL"))
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across a process kill
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")  # writers wait for each other
    return conn


class _SqliteKV:
    """A small key -> JSON table; one connection per process, guarded for threads."""

    table = "kv"
    space_wait_s = SPACE_WAIT_S

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.unkept: dict[str, str] = {}  # records that found the disk full: kept here until written
        schema = f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
        with writing(self.path):  # a full disk: one line naming the file, before any call is paid
            self._conn = open_sqlite(self.path)
            when_free(lambda: self._conn.execute(schema))
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict | None:
        """The record stored under ``key``, or None."""
        with self._lock:
            row = self._conn.execute(f"SELECT value FROM {self.table} WHERE key = ?", (key,)).fetchone()
            if row is None and key in self.unkept:
                row = (self.unkept[key],)
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, record: dict) -> None:
        """Store ``record`` under ``key``; a key already present keeps its first record. A record that cannot
        be kept -- the disk stayed full for :attr:`space_wait_s` (the record waits in memory meanwhile), or another
        write fault -- is :class:`~storage.write_fault.WriteFailed`: the caller must not use it unkept."""
        text = json.dumps(record, sort_keys=True, ensure_ascii=False)
        deadline = time.monotonic() + self.space_wait_s
        with self._lock:
            try:
                self._write({key: text})
                return
            except WriteFailed as fault:
                self.unkept[key] = text  # kept here, answered by get, until written
                if not fault.no_space:
                    self._lost(fault)
                    raise
        while True:
            time.sleep(0.2)  # space may come back (a file removed, a volume grown); gets go on meanwhile
            with self._lock:
                try:
                    self._write(self.unkept)
                    return
                except WriteFailed as fault:
                    if not fault.no_space or time.monotonic() >= deadline:
                        self._lost(fault)
                        raise

    def _write(self, records: dict[str, str]) -> None:
        """Write ``records`` (each written one leaves :attr:`unkept`); WriteFailed: the disk's fault."""
        with writing(self.path):
            for key, text in list(records.items()):
                # INSERT OR IGNORE: two actors racing on the same key keep the first answer.
                self._conn.execute(
                    f"INSERT OR IGNORE INTO {self.table} (key, value, created) VALUES (?, ?, ?)",
                    (key, text, time.time()),
                )
                self.unkept.pop(key, None)

    def _lost(self, fault: WriteFailed) -> None:
        """Name the records that could not be kept, and drop them (the caller raises ``fault``)."""
        n = len(self.unkept)
        _log.warning(
            "%d paid record%s of %s could not be kept (%s): a rerun pays for %s again",
            n, "" if n == 1 else "s", self.path.name, fault.reason, "it" if n == 1 else "them",
        )  # fmt: skip
        self.unkept.clear()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class ResponseCache(_SqliteKV):
    """Request cache key -> completion record (only successful completions are put)."""

    table = "responses"


class JudgeCache(_SqliteKV):
    """Judge key -> judge result record (only results without an error are put)."""

    table = "judgments"
