"""The cascade as a Python UDF: ``shp_cascade`` loops :func:`shp_ray.policy.cascade.decide` per row.

The ``replay_udf`` view runs it in place of the list-lambda SQL of ``replay``; property tests hold
both equal to the reference executor, so the SQL form is checked against decide() itself.
"""

from __future__ import annotations

import contextlib
import inspect
import math

import duckdb
import pyarrow as pa

from analysis import sql
from analysis.sql.replay_text import KNOB_COLUMNS
from shp_ray.policy import cascade
from shp_ray.policy.cascade import HaltConfig

_NAMES = tuple(name for name, _ in KNOB_COLUMNS)  # the UDF's knob arguments, in order


def _cascade_udf(d_inf: pa.Array, s: pa.Array, a: pa.Array, *knobs: pa.Array) -> pa.Array:
    """Arrow-vectorised UDF: loop decide() over each (policy, trajectory) row -> t*8 + code.

    ``knobs``: one column per cascade knob, in KNOBS' order (max_rounds as the row's cap). ``a`` is approved(f_t)
    per round (the stored signal); decide() reads a critique, so an approved round's is given as "APPROVED" and
    any other as "". A chunk's rows share a few policies and caps: each distinct set of knobs is one HaltConfig,
    built (and checked) once, not once per row.
    """
    codes = {r: c for c, r in sql.REASON_CODES.items()}
    configs: dict[tuple, HaltConfig] = {}
    knob_rows = zip(*(c.to_pylist() for c in knobs), strict=True)  # one tuple of knobs per row
    rows = zip(*(c.to_pylist() for c in (d_inf, s, a)), knob_rows, strict=True)
    out = []
    for d_row, s_row, a_row, values in rows:
        cfg = configs.get(values)
        if cfg is None:
            cfg = configs[values] = HaltConfig(**dict(zip(_NAMES, values, strict=True)))
        f_row = [cascade.APPROVAL if v else "" for v in a_row]
        dist = [math.nan if v is None else v for v in d_row[1:]]
        scores = [math.nan if v is None else v for v in s_row]
        code = None
        for t in range(1, cfg.max_rounds + 1):
            decision = cascade.decide(t, dist[: t - 1], scores[:t], f_row[t - 2] if t >= 2 else "", cfg)
            if decision.halt and decision.reason is not None:  # a halt always says why
                code = t * 8 + codes[decision.reason]
                break
        out.append(code)
    return pa.array(out, pa.int64())


# DuckDB counts a UDF's parameters from its signature: one per argument, so the knobs are named one by one.
_cascade_udf.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # read by inspect, undeclared
    [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in ("d", "s", "a", *_NAMES)]
)


def register_udfs(con: duckdb.DuckDBPyConnection, rounds: int) -> None:
    """``shp_cascade``: the cascade through decide(), for the ``replay_udf`` view (over replay_inputs'
    ``rounds`` round columns)."""
    from duckdb import sqltypes as t
    from duckdb.func import PythonUDFType

    dl, fl = duckdb.list_type(t.DOUBLE), duckdb.list_type(t.BOOLEAN)
    with contextlib.suppress(duckdb.InvalidInputException, duckdb.CatalogException):
        con.remove_function("shp_cascade")  # registered again when the round columns change
    con.create_function(
        "shp_cascade",
        _cascade_udf,
        [dl, dl, fl, *(getattr(t, sqltype) for _, sqltype in KNOB_COLUMNS)],
        t.BIGINT,
        type=PythonUDFType.ARROW,
        side_effects=False,
    )
    con.execute(sql.create("replay_udf", sql.replay_sql(rounds, "udf")))
