"""A statement's rows as dicts: what the statistics, the report and the apps read the views with."""

from __future__ import annotations

import duckdb


def fetch_dicts(con: duckdb.DuckDBPyConnection, query: str, params: list | None = None) -> list[dict]:
    cur = con.execute(query, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
