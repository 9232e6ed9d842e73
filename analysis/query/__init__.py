"""``shp-query``: read-only SQL over a store's views.

    shp-query --store runs/store "SELECT * FROM policy_summary"
    shp-query --store runs/store --format csv "SELECT * FROM replay WHERE policy = 'shp'"
    shp-query --store runs/store                 # interactive prompt; end statements with ';'
    shp-query --store runs/store --write-init    # write <store>/views.sql for the plain DuckDB CLI
    shp-query --store s3://b/store --ray auto "SELECT * FROM policy_summary"  # bucket by bucket on Ray
    shp-query --store runs/store --verify        # list damaged parts and why (exit 1 if any)
    shp-query --store runs/store --quarantine    # move them to <store>/_quarantine/ (storage.quarantine)
    shp-query --store runs/store --signals rebuild   # store the per-round signals where missing
    shp-query --store runs/store --signals check     # recompute them from the rounds; exit 1 on a difference
    shp-query --store runs/store --batches [cancel]  # the provider batches of batch-mode runs; cancel the open ones
    shp-query --store runs/store --prices my.yaml "SELECT policy, mean_operational_cost_live_usd FROM policy_summary"
                                                 # the cost columns priced with a table of one's own
    shp-query --store runs/store "SELECT tost_n_needed(0.02 / 0.05), tost_power(4, 0.02 / 0.05)"
                                                 # the TOST planner: N for power 0.8, power at N (es = delta / SD)

Read-only: the connection is in-memory, can read only the store's table folders (and its own spill folder) and
change no setting, whatever the store root (path, ``file://``, ``s3://``, ``gs://``; see
``analysis.replay.sandbox.lock_down``). Each run is exactly one query (SELECT / WITH / FROM / VALUES / DESCRIBE / SHOW /
SUMMARIZE, or EXPLAIN [ANALYZE] of one); COPY, ATTACH, EXPORT, INSERT, CREATE, SET, PRAGMA, CALL, INSTALL, LOAD,
several statements ... are refused before they run (exit 2; before the store is even opened), so the store can
never be modified. ``--write-init`` writes only ``views.sql``, never a table part; ``--signals rebuild`` writes
only ``signals`` parts (derived from the rounds, :mod:`analysis.replay.signals_store`).
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

from analysis import sql
from analysis.errors import said_by
from analysis.query import bounds as query_bounds
from analysis.query.read_only import ReadOnlyError, check_read_only, refuse_early
from analysis.replay.db import DEFAULT_DELTA, AnalysisError, ReplayScope, connect, write_init_script
from shp_ray.policy.table import Policy, family_policies, policy_by_name, standard_policies
from shp_ray.providers.prices import load_prices
from storage.parts import Store, StoreUnusable, open_store

# The settings an AnalysisError may ask to change, as this command spells them.
QUERY_FLAGS = {"judge": "--judge", "judge_prompt_version": "analysis.ReplayScope(judge_prompt_version=...), not a flag"}


def engine_error(exc: duckdb.Error) -> str:
    """A DuckDB error for the user; a refusal by the connection's sandbox (a file outside the store's
    tables, a locked setting) is said to be one, on one line."""
    text = str(exc)
    locked = isinstance(exc, duckdb.InvalidInputException) and "configuration has been locked" in text
    if isinstance(exc, duckdb.PermissionException) or locked:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__  # not the LINE 1: context
        return f"refused: the read-only sandbox reads only the store's table parts and changes no setting: {first}"
    return text


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


def render(names: Sequence[str], rows: Sequence[Sequence[object]], fmt: str, shown: str | None = None) -> str:
    """The result as an aligned text table, CSV, or a JSON array of objects; ``shown``: the table's footer when
    the rows were cut ('3 of 13 rows shown')."""
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
    out.append(f"({shown or f'{len(rows)} row' + ('s' if len(rows) != 1 else '')})")
    return "\n".join(out) + "\n"


def run_sql(con: duckdb.DuckDBPyConnection, text: str, fmt: str, bounds: query_bounds.Bounds) -> str:
    """Run read-only SQL within ``bounds`` (analysis.query.bounds); the output of the last statement is returned.
    CSV and JSON say on stderr that rows were cut (their output stays data)."""
    out = ""
    for stmt in check_read_only(con, text):
        got = query_bounds.fetch(con, stmt, bounds)
        out = render(got.names, got.rows, fmt, got.shown) if got.names else ""
        if got.shown and fmt != "table":
            print(f"shp-query: {got.shown} (--max-rows)", file=sys.stderr)
    return out


def interactive(con: duckdb.DuckDBPyConnection, fmt: str, bounds: query_bounds.Bounds) -> int:
    tty = sys.stdin.isatty()
    if tty:
        import readline  # noqa: F401  (line editing and history for input())

        print("shp-query (read-only). Views: scenarios, rounds, judgments, policies, replay, policy_summary.")
        print("TOST planner: tost_power(n, delta / sd), tost_n_needed(delta / sd) (policy_summary has both).")
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
            sys.stdout.write(run_sql(con, sql.query("query_tables"), fmt, bounds.every_row()))
            continue
        buf.append(line)
        if not stripped.endswith(";"):
            continue
        text, buf = "\n".join(buf), []
        try:
            sys.stdout.write(run_sql(con, text, fmt, bounds))
        except (ReadOnlyError, query_bounds.BoundExceeded) as exc:
            print(f"error: {exc}", file=sys.stderr)
        except duckdb.Error as exc:
            print(f"error: {engine_error(exc)}", file=sys.stderr)


def _margin(text: str) -> float:
    """``--delta``: a margin on IS, which lies in [0, 1] -- so strictly between 0 and 1 (NaN, inf, -1 refused)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:  # NaN fails both
        raise argparse.ArgumentTypeError(f"{text!r}: a margin on IS strictly between 0 and 1 (e.g. 0.05)")
    return value


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="shp-query", description="Read-only SQL over a store's views.")
    ap.add_argument("--store", required=True, help="store root (<root>/<table>/part-*.parquet)")
    ap.add_argument("sql", nargs="?", help="SQL to run; omit for an interactive prompt")
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table")
    ap.add_argument("--judge", default=None, help="judge whose scores give IS (if the store holds several)")
    ap.add_argument("--weights", default=None, help='IS weights as JSON, e.g. {"faithfulness": 1.0}')
    ap.add_argument(
        "--delta", type=_margin, default=DEFAULT_DELTA, help="non-inferiority margin on IS in policy_summary, in (0, 1)"
    )
    query_bounds.add_arguments(ap)  # --max-rows, --timeout, --memory-limit
    policies = "rows of `policies` (and so of `replay`): comma-separated names, `standard` (default: every SHP "
    policies += "policy and ablation cell) and/or `families` (the other stopping systems), e.g. standard,families"
    ap.add_argument("--policies", default=None, help=policies)
    ap.add_argument("--ray", metavar="auto|HOST:PORT", help="a bucketed store's policy_summary, replayed on Ray")
    ap.add_argument("--lazy", action="store_true", help="do not materialise per-round signals (small queries)")
    ap.add_argument("--prices", default=None, help="price table YAML of the cost columns (shp_ray/data/prices.yaml)")
    ap.add_argument("--write-init", action="store_true", help="write <store>/views.sql for `duckdb -init`")
    ap.add_argument("--verify", action="store_true", help="check every part (hash, schema, values); exit 1 if damaged")
    ap.add_argument("--quarantine", action="store_true", help="move damaged parts to <store>/_quarantine/ (repair)")
    ap.add_argument("--recheck", action="store_true", help="with --verify/--quarantine: read every part again")
    ap.add_argument(
        "--batches",
        nargs="?",
        const="list",
        choices=("list", "cancel"),
        help="the provider batches this store's batch-mode runs submitted; cancel: stop those not yet taken in",
    )
    ap.add_argument(
        "--signals",
        choices=("rebuild", "check"),
        default=None,
        help="rebuild: store the per-round signals of trajectories that lack them; check: recompute every "
        "stored one from the rounds and compare (exit 1 on a difference). Prints one JSON line.",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    bounds = query_bounds.from_args(args)
    try:  # the one conversion: every step below takes the Store
        store = Store(args.store)
    except StoreUnusable as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    if args.batches is not None:
        if args.sql:
            ap.error("--batches takes no SQL")
        from analysis.query import batches

        return batches.run(store, args.batches)
    if args.signals is not None:
        if args.sql is not None:
            ap.error("--signals takes no SQL")
        return _signals(store, args.signals)
    if args.verify or args.quarantine:
        if args.sql is not None:
            ap.error("--verify and --quarantine take no SQL")
        from storage.verify_cli import cli as verify_cli

        return verify_cli(store, do_quarantine=args.quarantine, recheck=args.recheck)
    try:
        weights = json.loads(args.weights) if args.weights else None
        prices = load_prices(args.prices) if args.prices else None
        scope = ReplayScope(
            store, judge=args.judge, weights=weights, policies=policies_from(args.policies), delta=args.delta,
            prices=prices,
        )  # fmt: skip
        if args.write_init:
            print(write_init_script(scope))
            return 0
        if args.sql is not None:
            refuse_early(args.sql)  # a ReadOnlyError is said as below: exit 2, one line
        con = query_bounds.opened(connect, bounds, scope, materialize=not args.lazy, ray_address=args.ray)
    except (AnalysisError, ValueError, OSError, duckdb.Error) as exc:
        print(f"shp-query: {said_by(exc, QUERY_FLAGS)}", file=sys.stderr)
        return 2
    try:
        if args.sql is None:
            return interactive(con, args.format, bounds)
        sys.stdout.write(run_sql(con, args.sql, args.format, bounds))
        return 0
    except ReadOnlyError as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    except query_bounds.BoundExceeded as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 1
    except duckdb.Error as exc:
        print(f"shp-query: {engine_error(exc)}", file=sys.stderr)
        return 1
    finally:
        con.close()


def _signals(store: Store, action: str) -> int:
    from analysis.replay import signals_store

    try:
        opened = open_store(store)  # a root that holds no store: refused, nothing created
        report = signals_store.build(opened) if action == "rebuild" else signals_store.check(opened)
    except (AnalysisError, ValueError, OSError) as exc:
        print(f"shp-query: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"signals": action, **report.as_dict()}))
    if report.different_rows:
        print(
            f"shp-query: {report.different_rows} stored signal rows differ from their rounds "
            f"(e.g. {', '.join(report.examples)}): the signals were computed by other code than this "
            f"version's under the same signals_version; move <store>/signals away and run --signals rebuild",
            file=sys.stderr,
        )
        return 1
    return 0


def policies_from(spec: str | None) -> list[Policy] | None:
    """``--policies``: None (every standard policy) or the named ones, ``standard``/``families`` expanded."""
    if spec is None:
        return None
    out: list[Policy] = []
    for name in (n.strip() for n in spec.split(",") if n.strip()):
        if name == "standard":
            out.extend(standard_policies())
        elif name == "families":
            out.extend(family_policies())
        else:
            out.append(policy_by_name(name))  # ValueError names an unknown policy
    if not out:
        raise ValueError("--policies: no policy named")
    return list({p.name: p for p in out}.values())


def entry() -> None:
    raise SystemExit(main())
