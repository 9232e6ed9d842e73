"""The other stopping families' replay in DuckDB: the ``shp_family`` Arrow UDF and the statements that use it.

    family_inputs   one row per trajectory: drafts, draft embeddings, critique embeddings,
                    writer/critic tokens, the scenario's contexts (a view over the store)
    family_replay   policies of every registered family (semantic, gain_model, verifier, ...) x trajectories,
                    through the Arrow UDF ``shp_family`` that runs :class:`shp_ray.policy.families.FamilyRun`, the SAME
                    round-by-round code as the live Stopper and the reference executor

``replay`` gains these rows (same columns) when the ``policies`` table holds any
family; the SHP cascade rows are computed by the unchanged list-lambda SQL. The SQL text is
``analysis/sql/family_inputs.sql``, ``family_replay.sql`` and ``replay_with_families.sql``.
``family_replay`` adds ``selected_round``, ``outcome`` (verifier-first: verified |
oscillation | budget | cap), ``verified_final`` and ``params_json``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from functools import lru_cache

import duckdb
import numpy as np
import pyarrow as pa

from analysis import sql
from shp_ray.policy.families.engine import run_signals, trajectory_signals
from shp_ray.policy.families.registry import FAMILIES
from shp_ray.policy.table import Policy


def has_families(policies: Iterable[Policy]) -> bool:
    return any(p.family for p in policies)


def row_inputs(emb, fb, w, cr):  # noqa: ANN001, ANN201 - plain lists from a family_inputs row
    """(e_t, g_{t-1}, writer_t + critic_{t-1}) per round of one family_inputs row."""
    embeddings = [np.asarray(v, dtype=np.float32) for v in emb]  # a row always has its draft embeddings
    crit = [None] + [None if v is None else np.asarray(v, dtype=np.float32) for v in fb[:-1]]
    tokens = [int(w[t] or 0) + (int(cr[t - 1] or 0) if t else 0) for t in range(len(w))]
    return embeddings, crit, tokens


@lru_cache(maxsize=256)
def _params(text: str) -> dict[str, object]:
    return json.loads(text)


def _flat(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pa.concat_arrays(arr.chunks) if isinstance(arr, pa.ChunkedArray) else arr


class _Vectors:
    """Per-row float vectors of a list<list<float>> Arrow column, sliced from its buffers (no to_pylist)."""

    def __init__(self, arr: pa.Array | pa.ChunkedArray) -> None:
        a = _flat(arr)
        self.outer = a.offsets.to_numpy()
        inner = a.values
        self.inner = inner.offsets.to_numpy()
        self.valid = np.asarray(inner.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        self.floats = inner.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        self.base = a.offset

    def row(self, i: int) -> list[np.ndarray | None]:
        lo, hi = self.outer[i], self.outer[i + 1]
        return [self.floats[self.inner[j] : self.inner[j + 1]] if self.valid[j] else None for j in range(lo, hi)]


def _family_udf(gen, sid, kind, params, max_rounds, cap, drafts, embs, fb_embs, wt, ct, contexts):  # noqa: ANN001, ANN202, PLR0913
    """Arrow UDF: each (family policy, trajectory) row through FamilyRun -> 'tau|reason|selected|verified'.

    A trajectory's signals are computed once per batch and shared by every policy replaying it.
    """
    small = [c.to_pylist() for c in (gen, sid, kind, params, max_rounds, cap)]
    lazy = {"drafts": _flat(drafts), "wt": _flat(wt), "ct": _flat(ct), "contexts": _flat(contexts)}
    e_vecs, g_vecs = _Vectors(embs), _Vectors(fb_embs)
    cache: dict[tuple[str, str, str], list] = {}
    out = []
    for i, (g, s, k, p, horizon, c) in enumerate(zip(*small, strict=True)):
        par = _params(p)
        key = (g, s, str(par.get("verifier", "qa")))
        if key not in cache:
            w, cr = lazy["wt"][i].as_py(), lazy["ct"][i].as_py()
            embeddings, crit, tokens = row_inputs(e_vecs.row(i), g_vecs.row(i), w, cr)
            cache[key] = trajectory_signals(
                drafts=lazy["drafts"][i].as_py(),
                embeddings=embeddings,
                critiques=crit,
                tokens=tokens,
                contexts=lazy["contexts"][i].as_py() or (),
                verifier=key[2],
            )
        tau, reason, sel, ok = run_signals(k, par, cache[key], cap=c, horizon=horizon)
        out.append(f"{tau}|{reason}|{sel}|{'true' if ok else 'false'}")
    return pa.array(out, pa.string())


def register(con: duckdb.DuckDBPyConnection) -> None:
    """``shp_family``: must exist before the family views are created (views bind their functions)."""
    from duckdb import sqltypes as t

    fl, vl = duckdb.list_type(duckdb.list_type(t.FLOAT)), duckdb.list_type(t.VARCHAR)
    bl = duckdb.list_type(t.BIGINT)
    with contextlib.suppress(duckdb.InvalidInputException, duckdb.CatalogException):
        con.remove_function("shp_family")
    con.create_function(
        "shp_family",
        _family_udf,
        [t.VARCHAR, t.VARCHAR, t.VARCHAR, t.VARCHAR, t.INTEGER, t.INTEGER, vl, fl, fl, bl, bl, vl],
        t.VARCHAR,
        type="arrow",
        side_effects=False,
    )


def statements(policies: Iterable[Policy], dim: int, materialize: bool = True) -> list[str]:
    """family_inputs, family_replay and the replay union (only when some policy is a family)."""
    stmts = [sql.create("family_inputs", sql.family_inputs_sql(dim))]
    if has_families(policies):
        stmts += [
            sql.create(
                "family_replay",
                # read at set-up, so a family registered at run time replays too
                sql.family_replay_sql(FAMILIES, [k for k, f in FAMILIES.items() if f.outcomes]),
                table=materialize,
            ),
            sql.create("replay", sql.query("replay_with_families")),
        ]
    return stmts


def refresh(con: duckdb.DuckDBPyConnection, policies: Iterable[Policy], materialize: bool = True) -> None:
    """After the ``policies`` rows changed: recompute the family rows and point ``replay`` at them."""
    if not has_families(policies):
        con.execute(sql.create("replay", sql.query("replay_core_only")))
        return
    have = {r[0] for r in con.execute(sql.query("relation_names")).fetchall()}
    if "family_inputs" not in have:
        raise ValueError(
            "this connection has no stored drafts/embeddings (family_inputs); family policies "
            "replay only on a store opened with analysis.connect"
        )
    for stmt in statements(policies, dim=0, materialize=materialize)[1:]:
        con.execute(stmt)
