"""The other stopping families' replay in DuckDB: their decisions, computed column-wise, and the SQL using them.

    family_inputs     one row per trajectory: drafts, draft embeddings, critique embeddings,
                      writer/critic tokens, the scenario's contexts (a view over the store; the gain-model
                      fit and the report read it)
    family_decisions  policies of every registered family (semantic, gain_model, verifier, ...) x trajectories:
                      tau, reason, selected round, verdict, from :func:`shp_ray.policy.families.batch.run_columns`
    family_replay     those decisions with the replay's columns (tokens, IS and answer metrics of the returned draft)

The decisions are the SAME as :class:`shp_ray.policy.families.FamilyRun`'s (the live Stopper's and the
reference executor's): the per-round signals are computed by :mod:`shp_ray.policy.families.columns` with the
same functions, and each family's column-wise rule is proved equal to its round-by-round ``check``
(tests/test_family_columns.py); a family without one runs ``check`` round by round. Why not a UDF per
(policy, trajectory) row, as before: that built 384-d embedding lists per trajectory and copied them into
every policy's row, and ran Python per row; here the rounds are streamed once, in order
(``family_rounds.sql``), whole trajectories at a time, and every policy reads the same columns.

``replay`` gains these rows (same columns) when the ``policies`` table holds any family; the SHP
cascade rows are computed by the unchanged SQL. ``family_replay`` adds ``selected_round``, ``outcome``
(verifier-first: verified | oscillation | budget | cap), ``verified_final`` and ``params_json``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis import sql
from analysis.replay import family_stream
from shp_ray.policy.families.batch import run_columns
from shp_ray.policy.families.columns import SignalColumns
from shp_ray.policy.families.registry import FAMILIES, needs_answers, needs_logprobs
from shp_ray.policy.families.verifier import VISIBLE_TESTS_SCORE
from shp_ray.policy.logprobs import STATS
from shp_ray.policy.table import Policy

_log = logging.getLogger(__name__)

_OUT = pa.schema(
    [
        ("policy", pa.string()),
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("stop_round", pa.int32()),
        ("reason", pa.string()),
        ("selected_round", pa.int32()),
        ("verified_final", pa.bool_()),
    ]
)


def has_families(policies: Iterable[Policy]) -> bool:
    return any(p.family for p in policies)


def row_inputs(emb, fb, w, cr):  # noqa: ANN001, ANN201 - plain lists from a family_inputs row
    """(e_t, g_{t-1}, writer_t + critic_{t-1}) per round of one family_inputs row (the gain-model fit's reader)."""
    embeddings = [np.asarray(v, dtype=np.float32) for v in emb]  # a row always has its draft embeddings
    crit = [None] + [None if v is None else np.asarray(v, dtype=np.float32) for v in fb[:-1]]
    tokens = [int(w[t] or 0) + (int(cr[t - 1] or 0) if t else 0) for t in range(len(w))]
    return embeddings, crit, tokens


class _Lookups:
    """What a round row is paired with, read once: each scenario's contexts, the stored critique
    embeddings per generation (by text hash), as family_inputs.sql joins them, and the loop's own verdicts
    (a code store's visible tests, family_verdicts.sql) of the generations that stored them."""

    def __init__(self, con: duckdb.DuckDBPyConnection, dim: int) -> None:
        ctx = con.sql(sql.query("family_contexts")).to_arrow_table()
        self.contexts = dict(zip(ctx["scenario_id"].to_pylist(), ctx["contexts"].to_pylist(), strict=True))
        fe = con.sql(sql.query("family_critiques")).to_arrow_table()
        self.critiques: dict[str, tuple[pa.Array, np.ndarray, np.ndarray]] = {}
        for gen in set(fe["gen_id"].to_pylist()):
            part = fe.filter(pc.equal(fe["gen_id"], gen))
            g = part["g"].combine_chunks()
            has = pc.fill_null(pc.list_value_length(g), 0).to_numpy(zero_copy_only=False) == dim
            mat = np.zeros((len(g), dim), dtype=np.float32)
            if has.any():
                flat = pc.list_flatten(g.filter(pa.array(has))).to_numpy(zero_copy_only=False)
                mat[has] = flat.reshape(-1, dim)
            self.critiques[gen] = (part["text_hash"].combine_chunks(), mat, has)
        v = con.sql(sql.query("family_verdicts", score=sql.quote(VISIBLE_TESTS_SCORE))).fetchall()
        self.verdict_gens = {g for g, _, _, _ in v}
        self.verdicts = {(g, s, r): ok for g, s, r, ok in v}
        self.answers: dict[tuple[str, str, int], str | None] | None = None  # read when an answer family runs
        self.confidence: dict[tuple[str, str, int], dict[str, float]] | None = None  # read when confidence runs

    def read_confidence(self, con: duckdb.DuckDBPyConnection) -> None:
        """Each round's token log-probability summaries (family_logprobs.sql)."""
        rows = con.execute(sql.query("family_logprobs")).fetchall()
        self.confidence = {(g, s, r): dict(zip(STATS, v, strict=True)) for g, s, r, *v in rows}

    def confident(self, t: pa.Table) -> list[dict[str, float] | None] | None:
        """Per round row, its draft's summaries (None: none stored); None when none were read."""
        if self.confidence is None:
            return None
        keys = zip(*(t[c].to_pylist() for c in ("gen_id", "scenario_id", "round")), strict=True)
        return [self.confidence.get(k) for k in keys]

    def read_answers(self, con: duckdb.DuckDBPyConnection) -> None:
        """Each round's stated answer (family_answers.sql: one extractor per generation)."""
        rows = con.execute(sql.query("family_answers")).fetchall()
        self.answers = {(g, s, r): a for g, s, r, a in rows}

    def stated(self, t: pa.Table) -> list[str | None] | None:
        """Per round row, the answer its draft states (None: none, or not stored); None when none were read."""
        if self.answers is None:
            return None
        keys = zip(*(t[c].to_pylist() for c in ("gen_id", "scenario_id", "round")), strict=True)
        return [self.answers.get(k) for k in keys]

    def checks(self, t: pa.Table) -> np.ndarray | None:
        """Per round row: the stored verdict (1.0 / 0.0; 0.0 where its generation has verdicts but not this round),
        NaN for the rows of a generation without verdicts (its verifier decides); None when no generation has any."""
        if not self.verdict_gens:
            return None
        keys = zip(*(t[c].to_pylist() for c in ("gen_id", "scenario_id", "round")), strict=True)
        return np.asarray(
            [self.verdicts.get(k, 0.0) if k[0] in self.verdict_gens else np.nan for k in keys], dtype=np.float64
        )

    def feedback(self, t: pa.Table, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(R, dim) embeddings of each round's critique f_t, and whether it is known (stored, of the draft's size)."""
        fb, has = np.zeros((t.num_rows, dim), dtype=np.float32), np.zeros(t.num_rows, dtype=bool)
        if not self.critiques:
            return fb, has
        gens = t["gen_id"].to_numpy(zero_copy_only=False)
        for gen, (hashes, mat, ok) in self.critiques.items():
            rows = np.nonzero(gens == gen)[0]
            if not len(rows):
                continue
            at = pc.index_in(t["fh"].take(pa.array(rows)), value_set=hashes).to_numpy(zero_copy_only=False)
            found = ~np.isnan(at.astype(np.float64))
            idx = at[found].astype(np.int64)
            hit = rows[found][ok[idx]]
            fb[hit], has[hit] = mat[idx[ok[idx]]], True
        return fb, has


def _columns(t: pa.Table, dim: int, look: _Lookups) -> tuple[SignalColumns, np.ndarray]:
    """One table of whole trajectories -> their SignalColumns, and the row where each trajectory starts."""
    g_id, s_id = t["gen_id"].to_numpy(zero_copy_only=False), t["scenario_id"].to_numpy(zero_copy_only=False)
    new = np.ones(t.num_rows, dtype=bool)
    new[1:] = (g_id[1:] != g_id[:-1]) | (s_id[1:] != s_id[:-1])
    starts = np.nonzero(new)[0]
    depths = np.diff(np.append(starts, t.num_rows))
    emb = t["e"].combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
    fb, has = look.feedback(t, dim)  # g_{t-1}: the previous round's critique embedding
    crit, known = np.zeros_like(fb), np.zeros(t.num_rows, dtype=bool)
    crit[1:], known[1:] = fb[:-1], has[:-1]
    known[starts] = False
    wt, ct = t["wt"].to_numpy(), t["ct"].to_numpy()
    tokens = wt.copy()
    tokens[1:] += ct[:-1]
    tokens[starts] = wt[starts]
    contexts = [look.contexts.get(sid) or () for sid in s_id[starts].tolist()]
    drafts = t["draft"].to_pylist()
    cols = SignalColumns(depths, drafts, emb, crit, known, tokens, contexts, look.checks(t))
    stated, confident = look.stated(t), look.confident(t)
    cols = cols if stated is None else cols.with_answers(stated)
    return (cols if confident is None else cols.with_confidence(confident)), starts


def decisions(con: duckdb.DuckDBPyConnection, dim: int) -> pa.Table:
    """Every family policy of the ``policies`` table x every stored trajectory, column-wise."""
    pols = con.execute(sql.family_policies_sql(list(FAMILIES))).fetchall()
    parsed = [(name, kind, json.loads(params), int(horizon)) for name, kind, params, horizon in pols]
    look = _Lookups(con, dim)
    if any(needs_answers(kind) for _, kind, _, _ in parsed):
        look.read_answers(con)
    if any(needs_logprobs(kind) for _, kind, _, _ in parsed):
        look.read_confidence(con)
    try:
        return _decide(family_stream.trajectories(con, dim), parsed, dim, look)
    except family_stream.Unordered:  # a store written in another order: read it sorted
        return _decide(family_stream.trajectories(con, dim, sorted_=True), parsed, dim, look)


def _decide(tables: Iterator[pa.Table], parsed: list[tuple[str, str, dict, int]], dim: int, look: _Lookups) -> pa.Table:
    parts: list[pa.Table] = []
    for t in tables:
        cols, starts = _columns(t, dim, look)
        keys = t.select(["gen_id", "scenario_id"]).take(pa.array(starts))
        for name, kind, params, horizon in parsed:
            d = run_columns(kind, params, cols, horizon=horizon)
            parts.append(
                pa.table(
                    [
                        pa.array(np.full(cols.B, name, dtype=object), pa.string()),
                        keys["gen_id"],
                        keys["scenario_id"],
                        pa.array(d.stop_round, pa.int32()),
                        pa.array(d.reason, pa.string()),
                        pa.array(d.selected, pa.int32()),
                        pa.array(d.verified_final, pa.bool_()),
                    ],
                    schema=_OUT,
                )
            )
    return pa.concat_tables(parts) if parts else _OUT.empty_table()


def _dim(con: duckdb.DuckDBPyConnection) -> int:
    """The embedding size of the rounds (family_inputs reads it from the store's footers at connect)."""
    ((dim,),) = con.execute(sql.query("family_embedding_dim")).fetchall()
    return int(dim or 1)


def inputs_sql(dim: int) -> str:
    """The family view that is SQL alone (family_inputs: per trajectory, the lists the family executor reads,
    critique embedding NULL where unknown); :func:`refresh` computes the decisions."""
    return sql.query("family_inputs", dim=int(dim))


def refresh(
    con: duckdb.DuckDBPyConnection,
    policies: Iterable[Policy],
    materialize: bool = True,
    dim: int | None = None,
    batch: bool = False,
) -> None:
    """After the ``policies`` rows changed (and at connect): recompute the family rows and point ``replay`` at them.
    ``batch``: replay_inputs carries the batch calls' lists (the cost columns read them)."""
    if not has_families(policies):
        con.execute(sql.create("replay", sql.query("replay_core_only")))
        con.execute(sql.create("replay_scores", sql.replay_scores_sql(families=False)))
        return
    have = {r[0] for r in con.execute(sql.query("relation_names")).fetchall()}
    if "family_inputs" not in have:
        raise ValueError(
            "this connection has no stored drafts/embeddings (family_inputs); family policies "
            "replay only on a store opened with analysis.connect"
        )
    leave_out_unanswered(con)
    leave_out_without_logprobs(con)
    table = decisions(con, _dim(con) if dim is None else dim)
    con.register("family_decisions_arrow", table)
    try:
        con.execute(sql.create("family_decisions", sql.query("family_decisions"), table=True))
    finally:
        con.unregister("family_decisions_arrow")
    outcomes = [k for k, f in FAMILIES.items() if f.outcomes]
    con.execute(sql.create("family_replay", sql.family_replay_sql(outcomes, batch), table=materialize))
    con.execute(sql.create("replay", sql.query("replay_with_families")))
    con.execute(sql.create("replay_scores", sql.replay_scores_sql(families=True)))  # a family's returned round


def leave_out_unanswered(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Take the answer-based family policies out of ``policies`` while a generation in scope has no stored answers
    (draft_answers), saying so in one line: they never run on unknown answers. Returns the policies left out."""
    kinds = [k for k, f in FAMILIES.items() if f.needs_answers]
    if not kinds:
        return []
    names = [r[0] for r in con.execute(sql.family_policies_sql(kinds)).fetchall()]
    lacking = [r[0] for r in con.execute(sql.query("family_answer_gens")).fetchall()] if names else []
    if not lacking:
        return []
    con.execute(sql.query("policies_leave_out", kinds=sql.quote_list(kinds)))
    gens = ", ".join(g[:8] for g in lacking)
    _log.warning(
        "%s left out of the replay: generation%s %s hold%s no extracted answers (draft_answers); "
        "add them with no model call: shp-import --store <store> --rescore %s",
        ", ".join(names), "s" if len(lacking) > 1 else "", gens, "" if len(lacking) > 1 else "s", lacking[0][:8],
    )  # fmt: skip
    return names


def leave_out_without_logprobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Take the token-confidence family's policies out of ``policies`` while a generation in scope has a trajectory
    without stored log-probabilities (draft_logprobs), saying so in one line: they never run on zeros, nor on
    nothing. Returns the policies left out."""
    kinds = [k for k, f in FAMILIES.items() if f.needs_logprobs]
    names = [r[0] for r in con.execute(sql.family_policies_sql(kinds)).fetchall()] if kinds else []
    lacking = [r[0] for r in con.execute(sql.query("family_logprob_gens")).fetchall()] if names else []
    if not lacking:
        return []
    con.execute(sql.query("policies_leave_out", kinds=sql.quote_list(kinds)))
    _log.warning(
        "%s left out of the replay: generation%s %s hold%s trajectories without token log-probabilities "
        "(draft_logprobs); a new store written with logprobs.request=true on a provider that returns them has them",
        ", ".join(names), "s" if len(lacking) > 1 else "", ", ".join(g[:8] for g in lacking),
        "" if len(lacking) > 1 else "s",
    )  # fmt: skip
    return names
