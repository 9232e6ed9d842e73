"""The cascade as a Python UDF: ``shp_cascade`` loops :func:`shp_ray.policy.cascade.decide` per row.

The ``replay_udf`` view runs it in place of the list-lambda SQL of ``replay``; property tests hold
both equal to the reference executor, so the SQL form is checked against decide() itself.
"""

from __future__ import annotations

import contextlib
import math

import duckdb
import pyarrow as pa

from analysis import sql
from shp_ray.policy import cascade
from shp_ray.policy.cascade import HaltConfig


def _cascade_udf(d_inf, s, a, eps, k, warmup, cap, critic, entropy, gain, min_gain):  # noqa: ANN001, ANN202
    """Arrow-vectorised UDF: loop decide() over each (policy, trajectory) row -> t*8 + code.

    ``a`` is approved(f_t) per round (the stored signal); decide() reads a critique, so an approved
    round's is given as "APPROVED" and any other as "".
    """
    codes = {r: c for c, r in sql.REASON_CODES.items()}
    cols = [c.to_pylist() for c in (d_inf, s, a, eps, k, warmup, cap, critic, entropy, gain, min_gain)]
    out = []
    for d_row, s_row, a_row, e, kk, w, c, cr, en, ga, mg in zip(*cols, strict=True):
        f_row = [cascade.APPROVAL if v else "" for v in a_row]
        cfg = HaltConfig(eps=e, k=kk, warmup=w, max_rounds=c, critic=cr, entropy=en, gain=ga, min_gain=mg)
        dist = [math.nan if v is None else v for v in d_row[1:]]
        scores = [math.nan if v is None else v for v in s_row]
        code = None
        for t in range(1, c + 1):
            decision = cascade.decide(t, dist[: t - 1], scores[:t], f_row[t - 2] if t >= 2 else "", cfg)
            if decision.halt:
                code = t * 8 + codes[decision.reason]
                break
        out.append(code)
    return pa.array(out, pa.int64())


def register_udfs(con: duckdb.DuckDBPyConnection, rounds: int) -> None:
    """``shp_cascade``: the cascade through decide(), for the ``replay_udf`` view (over replay_inputs'
    ``rounds`` round columns)."""
    from duckdb import sqltypes as t

    dl, fl = duckdb.list_type(t.DOUBLE), duckdb.list_type(t.BOOLEAN)
    with contextlib.suppress(duckdb.InvalidInputException, duckdb.CatalogException):
        con.remove_function("shp_cascade")  # registered again when the round columns change
    con.create_function(
        "shp_cascade",
        _cascade_udf,
        [dl, dl, fl, t.DOUBLE, t.INTEGER, t.INTEGER, t.INTEGER, t.BOOLEAN, t.BOOLEAN, t.BOOLEAN, t.DOUBLE],
        t.BIGINT,
        type="arrow",
        side_effects=False,
    )
    con.execute(sql.create("replay_udf", sql.replay_sql(rounds, "udf")))
