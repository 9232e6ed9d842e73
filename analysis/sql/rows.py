"""A statement's rows as dicts: what the statistics, the report and the apps read the views with."""

from __future__ import annotations

from typing import Any

import duckdb


def fetch_row(con: duckdb.DuckDBPyConnection, query: str, params: list | None = None) -> tuple[Any, ...]:
    """The one row of ``query`` (an aggregate's: it always answers one); LookupError if it answered none."""
    row = con.execute(query, params or []).fetchone()
    if row is None:
        raise LookupError(f"no row from: {query.strip().splitlines()[0]}")
    return row


def fetch_dicts(con: duckdb.DuckDBPyConnection, query: str, params: list | None = None) -> list[dict[str, Any]]:
    cur = con.execute(query, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
