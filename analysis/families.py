"""The other stopping families in DuckDB: per-trajectory inputs, the ``shp_family`` UDF, the replay rows.

    family_inputs   one row per trajectory: drafts, draft embeddings, critique embeddings,
                    writer/critic tokens, the scenario's contexts (a view over the store)
    family_replay   policies of kind semantic | gain_model | verifier x trajectories, through the
                    Arrow UDF ``shp_family`` that runs :class:`shp_ray.policy.families.FamilyRun`, the SAME
                    round-by-round code as the live Stopper and the reference executor

``replay`` gains these rows (same columns) when the ``policies`` table holds any
family; the SHP cascade rows are computed by the unchanged list-lambda SQL.
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
from shp_ray.policy.families.engine import FAMILY_KINDS, run_signals, trajectory_signals
from shp_ray.policy.table import Policy

KINDS_SQL = ", ".join(sql.quote(k) for k in FAMILY_KINDS)
CORE_KINDS_SQL = "'cascade', 'random', 'oracle'"
REPLAY_COLUMNS = (
    "policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is, "
    "depth, baseline_tokens, baseline_is"
)


def has_families(policies: Iterable[Policy]) -> bool:
    return any(p.family for p in policies)


def family_inputs_sql(dim: int) -> str:
    """Per trajectory: the lists the family executor reads (critique embedding NULL where unknown)."""
    return f"""
WITH gens AS (SELECT gen_id, any_value(embedder) AS embedder FROM generations GROUP BY gen_id),
fe AS (
    SELECT embedder, text_hash, any_value(embedding)::FLOAT[] AS g FROM feedback_embeddings GROUP BY ALL
),
ctx AS (SELECT scenario_id, any_value(contexts) AS contexts FROM scenarios GROUP BY scenario_id),
r AS (
    SELECT r.gen_id, r.scenario_id, r.round, coalesce(r.draft, '') AS draft,
           r.embedding::FLOAT[{dim}]::FLOAT[] AS e, fe.g,
           r.writer_prompt_tokens + r.writer_completion_tokens AS wt,
           r.critic_prompt_tokens + r.critic_completion_tokens AS ct
    FROM round_parts r
    LEFT JOIN gens ON gens.gen_id = r.gen_id
    LEFT JOIN fe ON fe.embedder = gens.embedder AND fe.text_hash = sha256(coalesce(r.feedback, ''))
)
SELECT r.gen_id, r.scenario_id,
       list(draft ORDER BY round) AS drafts, list(e ORDER BY round) AS embs, list(g ORDER BY round) AS fb_embs,
       list(wt::BIGINT ORDER BY round) AS wt, list(ct::BIGINT ORDER BY round) AS ct,
       coalesce(any_value(ctx.contexts), []::VARCHAR[]) AS contexts
FROM r LEFT JOIN ctx ON ctx.scenario_id = r.scenario_id
GROUP BY r.gen_id, r.scenario_id
"""


def family_replay_sql() -> str:
    return f"""
WITH pt AS (
    SELECT p.policy, p.kind, p.params_json, p.max_rounds, least(p.max_rounds, x.depth) AS cap,
           x.gen_id, x.scenario_id, x.depth, x.s, x.cw, x.cc, x.j, x.baseline_tokens, x.baseline_is,
           fi.drafts, fi.embs, fi.fb_embs, fi.wt, fi.ct, fi.contexts
    FROM policies p CROSS JOIN trajectories x
    JOIN family_inputs fi ON fi.gen_id = x.gen_id AND fi.scenario_id = x.scenario_id
    WHERE p.kind IN ({KINDS_SQL})
    ORDER BY x.gen_id, x.scenario_id  -- a trajectory's rows together: the UDF computes its signals once
), decided AS (
    SELECT *, shp_family(gen_id, scenario_id, kind, params_json, max_rounds, cap, drafts, embs, fb_embs, wt, ct,
                         contexts) AS res
    FROM pt
), parsed AS (
    SELECT *, split_part(res, '|', 1)::INTEGER AS stop_round, split_part(res, '|', 2) AS reason,
           split_part(res, '|', 3)::INTEGER AS selected_round, split_part(res, '|', 4) = 'true' AS verified_final
    FROM decided
)
SELECT policy, gen_id, scenario_id, stop_round, reason,
       -- judge-free: every writer up to tau, every critic before it, never the judge
       (cw[stop_round] + CASE WHEN stop_round > 1 THEN cc[stop_round - 1] ELSE 0 END)::BIGINT AS operational_tokens,
       j[selected_round]::BIGINT AS evaluation_tokens,
       s[selected_round] AS final_is,
       depth, baseline_tokens::BIGINT AS baseline_tokens, baseline_is,
       selected_round,
       CASE WHEN kind = 'verifier' THEN reason END AS outcome,
       verified_final, params_json
FROM parsed
"""


def replay_union_sql() -> str:
    return f"SELECT {REPLAY_COLUMNS} FROM replay_core UNION ALL SELECT {REPLAY_COLUMNS} FROM family_replay"


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
    stmts = ["CREATE OR REPLACE VIEW family_inputs AS " + family_inputs_sql(dim)]
    if has_families(policies):
        kind = "TEMP TABLE" if materialize else "VIEW"
        stmts += [
            f"CREATE OR REPLACE {kind} family_replay AS " + family_replay_sql(),
            "CREATE OR REPLACE VIEW replay AS " + replay_union_sql(),
        ]
    return stmts


def refresh(con: duckdb.DuckDBPyConnection, policies: Iterable[Policy], materialize: bool = True) -> None:
    """After the ``policies`` rows changed: recompute the family rows and point ``replay`` at them."""
    if not has_families(policies):
        con.execute("CREATE OR REPLACE VIEW replay AS SELECT * FROM replay_core")
        return
    have = {
        r[0]
        for r in con.execute(
            "SELECT view_name FROM duckdb_views() UNION ALL SELECT table_name FROM duckdb_tables()"
        ).fetchall()
    }
    if "family_inputs" not in have:
        raise ValueError(
            "this connection has no stored drafts/embeddings (family_inputs); family policies "
            "replay only on a store opened with analysis.connect"
        )
    for stmt in statements(policies, dim=0, materialize=materialize)[1:]:
        con.execute(stmt)
