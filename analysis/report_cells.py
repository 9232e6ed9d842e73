"""What every report section shares: rows as dicts, and one way to print a number in a table cell."""

from __future__ import annotations

import math

import duckdb


def fetch_dicts(con: duckdb.DuckDBPyConnection, query: str, params: list | None = None) -> list[dict]:
    cur = con.execute(query, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def cell(x: object, nd: int = 3) -> str:
    """A float to ``nd`` decimals, None / NaN as "–", anything else as written."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)
