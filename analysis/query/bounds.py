"""shp-query's bounds: a query's rows are fetched no further than shown, and it runs in bounded time and memory.

    bounds = Bounds(max_rows=5, timeout_s=300)
    got = fetch(con, "SELECT * FROM range(400000000)", bounds)   # 6 rows fetched, not 400 million
    got.shown                                                    # '5 of 400000000 rows shown'

- Rows: DuckDB streams a result (``execute`` computes nothing ahead of the fetch), so fetching ``max_rows + 1``
  rows (the one more tells that there are more) is all the query computes; the rest is never produced. The total
  of a cut result comes from ``SELECT count(*)`` of the same query (query_count.sql), given at most
  :data:`COUNT_S` seconds (a count of a 10^18-row join would run to the deadline): past them "more than N".
- Time: a timer thread calls ``con.interrupt()`` at the deadline (the query and its count share one deadline),
  :data:`DEFAULT_TIMEOUT_S` unless ``--timeout`` says otherwise: a runaway query ends within a minute.
- Memory: the connection's ``memory_limit`` (:func:`analysis.connect`'s), by default :data:`MEMORY_SHARE` of this
  machine's memory -- DuckDB's own default, 80%, leaves too little to everything else. Past it DuckDB spills what
  it can; what it cannot ends the query.

Each bound ends a query with :class:`BoundExceeded`: one line naming the flag that sets it.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import duckdb

from analysis import sql
from analysis.replay.scope import ReplayScope

DEFAULT_TIMEOUT_S = 50.0  # a runaway query ends in under a minute unless the user raises --timeout
COUNT_S = 10.0  # what counting a cut result's rows may take, at most
MEMORY_SHARE = 0.25


def default_memory_limit() -> str:
    """:data:`MEMORY_SHARE` of this machine's physical memory, as DuckDB reads a size."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{int(total * MEMORY_SHARE) >> 20}MiB"


class BoundExceeded(ValueError):
    """A query ended by one of shp-query's bounds; the message names the flag."""


@dataclass(frozen=True)
class Bounds:
    """What a query may take: ``max_rows`` shown (None: all), ``timeout_s`` seconds (None: no limit), and the
    connection's ``memory_limit`` (set when it was opened; here for the message)."""

    max_rows: int | None = None
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    memory_limit: str | None = None

    def every_row(self) -> Bounds:
        """The same bounds showing every row (a listing the user did not write, e.g. ``.tables``)."""
        return replace(self, max_rows=None)


@dataclass(frozen=True)
class Fetched:
    """A query's column names, the rows shown, and the rows it gives (None: more than shown, not counted in time)."""

    names: list[str]
    rows: list[tuple]
    total: int | None

    @property
    def shown(self) -> str | None:
        """'3 of 13 rows shown' when the rows were cut (None when all are shown)."""
        if self.total == len(self.rows):
            return None
        total = f"more than {len(self.rows)}" if self.total is None else str(self.total)
        return f"{len(self.rows)} of {total} rows shown"


class _Deadline:
    """Interrupt ``con`` at ``at`` (``time.monotonic()``; None: never) from a timer thread, while inside."""

    def __init__(self, con: duckdb.DuckDBPyConnection, at: float | None) -> None:
        self.con, self.at, self.fired = con, at, False
        self._timer: threading.Timer | None = None

    def _fire(self) -> None:
        self.fired = True
        self.con.interrupt()

    def __enter__(self) -> _Deadline:
        if self.at is not None:
            self._timer = threading.Timer(max(0.0, self.at - time.monotonic()), self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()


def fetch(con: duckdb.DuckDBPyConnection, statement: str, bounds: Bounds) -> Fetched:
    """Run one query within ``bounds``: at most ``max_rows + 1`` rows fetched; BoundExceeded past the time or memory."""
    at = None if not bounds.timeout_s else time.monotonic() + bounds.timeout_s
    with _Deadline(con, at) as deadline:
        try:
            cur = con.execute(statement)
            names = [d[0] for d in cur.description] if cur.description else []
            limit = bounds.max_rows
            rows = (cur.fetchall() if limit is None else cur.fetchmany(limit + 1)) if names else []
        except duckdb.InterruptException:
            if not deadline.fired:
                raise
            raise BoundExceeded(
                f"stopped after {bounds.timeout_s:g} s (--timeout); narrow the query or raise --timeout"
            ) from None
        except duckdb.OutOfMemoryException as exc:
            raise BoundExceeded(out_of_memory(exc, bounds.memory_limit)) from None
    if bounds.max_rows is None or len(rows) <= bounds.max_rows:
        return Fetched(names, rows, len(rows))
    count_by = time.monotonic() + COUNT_S
    return Fetched(
        names, rows[: bounds.max_rows], _count(con, statement, count_by if at is None else min(at, count_by))
    )


def _count(con: duckdb.DuckDBPyConnection, statement: str, at: float | None) -> int | None:
    """How many rows ``statement`` gives, counted by DuckDB before ``at``; None if it cannot say in time (or at
    all: EXPLAIN is no subquery). Running it ends the cut result's stream."""
    if at is not None and at <= time.monotonic():
        return None
    query = statement.rstrip().rstrip(";")  # a query as DuckDB's parser split it: its ';' stays on it
    try:
        with _Deadline(con, at):
            ((total,),) = con.execute(sql.query("query_count", query=query)).fetchall()
    except duckdb.Error:
        return None
    return int(total)


def out_of_memory(exc: duckdb.Error, limit: str | None, opening: bool = False) -> str:
    """One line for a query (or the opening of the store) that needed more memory than the connection may take."""
    first = str(exc).strip().splitlines()[0]
    what, hint = ("opening the store", "") if opening else ("the query", "narrow the query or ")
    return f"stopped: {what} needs more memory than --memory-limit {limit} ({first}); {hint}raise --memory-limit"


def opened(
    connect: Callable[..., duckdb.DuckDBPyConnection], bounds: Bounds, scope: ReplayScope, **options: object
) -> duckdb.DuckDBPyConnection:
    """``connect(scope, **options)`` (analysis.connect) with the memory bound; past it while opening the store,
    BoundExceeded (a ValueError: said as any other failure to open)."""
    try:
        return connect(replace(scope, memory_limit=bounds.memory_limit), **options)
    except duckdb.OutOfMemoryException as exc:
        raise BoundExceeded(out_of_memory(exc, bounds.memory_limit, opening=True)) from None


def _memory_limit(text: str) -> str:
    """``--memory-limit``: a size DuckDB reads (checked on a scratch connection: one line if it is none)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(sql.query("memory_limit", limit=sql.quote(text)))
    except duckdb.Error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is no size DuckDB reads ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()
    return text


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r}: seconds >= 0 (0: no limit)")
    return value


def _rows(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a row count >= 0")
    return value


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """shp-query's flags for the bounds."""
    ap.add_argument("--max-rows", type=_rows, default=None, help="print at most this many rows (fetch no more)")
    ap.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"stop a query after this many seconds (default {DEFAULT_TIMEOUT_S:g}; 0: no limit)",
    )
    ap.add_argument(
        "--memory-limit",
        type=_memory_limit,
        default=None,
        help=f"DuckDB's memory bound, e.g. 2GB (default {MEMORY_SHARE * 100:.0f}%% of this machine's memory; "
        "past it DuckDB spills what it can and stops the query otherwise)",
    )


def from_args(args: argparse.Namespace) -> Bounds:
    """The bounds the flags of :func:`add_arguments` set (the default memory limit filled in)."""
    return Bounds(args.max_rows, args.timeout or None, args.memory_limit or default_memory_limit())
