"""``shp-query``: read-only SQL over a store's views.

    shp-query --store runs/store "SELECT * FROM policy_summary"
    shp-query --store runs/store --format csv "SELECT * FROM replay WHERE policy = 'shp'"
    shp-query --store runs/store                 # interactive prompt; end statements with ';'
    shp-query --store runs/store --write-init    # write <store>/views.sql for the plain DuckDB CLI

Read-only: the connection is in-memory, reads only files under the store,
and every statement must be a query (SELECT / WITH / FROM / VALUES / DESCRIBE /
SHOW / SUMMARIZE / EXPLAIN). COPY, ATTACH, EXPORT, INSERT, CREATE, SET, INSTALL,
LOAD ... are refused before they run, so the store can never be modified.
``--write-init`` writes only ``views.sql``, never a table part.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Sequence

import duckdb

from .db import DEFAULT_DELTA, AnalysisError, connect, write_init_script

ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


class ReadOnlyError(ValueError):
    """A statement that could change something; shp-query runs queries only."""


def check_read_only(con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
    """The statements of ``text``, or ReadOnlyError naming the first that is not a query."""
    stmts = con.extract_statements(text)
    if not stmts:
        raise ReadOnlyError("no SQL statement given")
    for s in stmts:
        if s.type not in ALLOWED:
            kind = str(s.type).rsplit(".", 1)[-1]
            raise ReadOnlyError(
                f"shp-query is read-only: {kind} statements are refused (the store is never modified): "
                f"{s.query.strip()[:80]!r}"
            )
    return [s.query for s in stmts]


def _cell(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else f"{v:.6g}"
    return str(v)


def _json_value(v: object) -> object:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    return str(v)


def render(names: Sequence[str], rows: Sequence[Sequence[object]], fmt: str) -> str:
    """The result as an aligned text table, CSV, or a JSON array of objects."""
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        w.writerows(["" if v is None else v for v in r] for r in rows)
        return buf.getvalue()
    if fmt == "json":
        return json.dumps([{n: _json_value(v) for n, v in zip(names, r, strict=True)} for r in rows], indent=1) + "\n"
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and rows for i in range(len(names))]

    def line(vals: Sequence[str]) -> str:
        return " | ".join(
            v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(vals, widths, strict=True))
        )

    out = [line(names), "-+-".join("-" * w for w in widths)] + [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out) + "\n"


def run_sql(con: duckdb.DuckDBPyConnection, text: str, fmt: str, max_rows: int | None) -> str:
    """Run read-only SQL; the output of the last statement is returned."""
    out = ""
    for stmt in check_read_only(con, text):
        cur = con.execute(stmt)
        names = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchmany(max_rows) if max_rows else cur.fetchall()
        if max_rows:
            cur.fetchall()  # finish the result: the connection stays busy until fully fetched
        out = render(names, rows, fmt) if names else ""
    return out


def interactive(con: duckdb.DuckDBPyConnection, fmt: str, max_rows: int | None) -> int:
    tty = sys.stdin.isatty()
    if tty:
        import readline  # noqa: F401  (line editing and history for input())

        print("shp-query (read-only). Views: scenarios, rounds, judgments, policies, replay, policy_summary.")
        print("End a statement with ';'. .tables lists views; .quit leaves.")
    buf: list[str] = []
    while True:
        try:
            line = input("shp> " if not buf else "...> ") if tty else sys.stdin.readline()
        except EOFError:
            return 0
        if not tty and line == "":
            return 0
        stripped = line.strip()
        if not buf and stripped in (".quit", ".exit", "\\q"):
            return 0
        if not buf and stripped == ".tables":
            sys.stdout.write(run_sql(con, "SELECT table_name FROM information_schema.tables ORDER BY 1", fmt, None))
            continue
        buf.append(line)
        if not stripped.endswith(";"):
            continue
        text, buf = "\n".join(buf), []
        try:
            sys.stdout.write(run_sql(con, text, fmt, max_rows))
        except (ReadOnlyError, duckdb.Error) as exc:
            print(f"error: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="shp-query", description="Read-only SQL over a store's views.")
    ap.add_argument("--store", required=True, help="store root (<root>/<table>/part-*.parquet)")
    ap.add_argument("sql", nargs="?", help="SQL to run; omit for an interactive prompt")
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table")
    ap.add_argument("--judge", default=None, help="judge whose scores give IS (if the store holds several)")
    ap.add_argument("--weights", default=None, help='IS weights as JSON, e.g. {"faithfulness": 1.0}')
    ap.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="non-inferiority margin in policy_summary")
    ap.add_argument("--max-rows", type=int, default=None, help="print at most this many rows")
    ap.add_argument("--lazy", action="store_true", help="do not materialise per-round signals (small queries)")
    ap.add_argument("--write-init", action="store_true", help="write <store>/views.sql for `duckdb -init`")
    args = ap.parse_args(argv)
    try:
        weights = json.loads(args.weights) if args.weights else None
        if args.write_init:
            print(write_init_script(args.store, judge=args.judge, weights=weights, delta=args.delta))
            return 0
        con = connect(args.store, judge=args.judge, weights=weights, delta=args.delta, materialize=not args.lazy)
    except (AnalysisError, ValueError, duckdb.Error) as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    try:
        if args.sql is None:
            return interactive(con, args.format, args.max_rows)
        sys.stdout.write(run_sql(con, args.sql, args.format, args.max_rows))
        return 0
    except ReadOnlyError as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 1
    finally:
        con.close()


def entry() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
