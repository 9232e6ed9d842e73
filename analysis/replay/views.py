"""The views over a store: where each table's rows come from, which judge gives IS, and every statement
that sets the views up (shared by :func:`analysis.connect` and the plain-CLI ``views.sql``).

    scenarios, generations, failures, manifests, results,    the Parquet parts, as stored
    feedback_embeddings, round_parts, judgments_raw, signals_raw
    judgments, round_signals, answers, rounds, trajectories   per round / per trajectory
    policies, replay_core, replay, family_*, policy_summary   the replay (policy_summary per split: scenario_splits)
    scores_raw, scores, replay_scores, replay_score_map,      the user's scores at each policy's stop (and in
    score_summary                                             policy_summary's scores map)
    draft_answers                                             each draft's extracted answer (answer-based families)
    pass_rounds, oracle_pass, correctness,                    the pass/fail scores (hidden_pass): pass_at_stop,
    correctness_summary, pass_by_round, break_rate            the oracle, McNemar, break and fix rates
    prices, generation_prices                                  the price table (analysis.replay.costs)
    tost_n_table, tost_power(n, es), tost_n_needed(es)        the TOST planner (policy_summary's power)

The SQL text is in :mod:`analysis.sql`; this module picks the statements and their arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analysis import sql
from analysis.errors import AnalysisError
from analysis.replay import costs, family_replay, uniqueness
from analysis.replay.policy_table import policies_sql
from analysis.replay.scope import ReplayScope
from analysis.replay.sources import TableSources
from analysis.sql import ScenarioSlice
from analysis.sql.answer_text import answers_lenient_sql
from analysis.sql.tost_table import detectable_margins
from storage.parts import Store
from storage.schemas import EMBEDDING_DIM


def source(sources: TableSources, table: str, gen_id: str | None = None) -> str:
    """The rows of ``table``: its parts, or a typed empty relation while it has none. ``gen_id``: only the
    parts that can hold that generation's rows (its partition folder: the others are never opened)."""
    return sources.of(table, gen_id)


def rounds_source(sources: TableSources, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """The rounds parts, optionally narrowed to one generation and a set of scenarios (a sweep job's scope)."""
    return sql.narrowed(source(sources, "rounds", gen_id), gen_id, scenario_ids)


def judgments_source(sources: TableSources, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """The judgments parts, narrowed to the scenarios of a job's scope or slice (judgments have no gen_id)."""
    return sql.narrowed(source(sources, "judgments"), None, scenario_ids)


def guarded_sources(
    sources: TableSources, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None
) -> dict[str, str]:
    """The rows of the tables whose keys are unique (analysis.replay.uniqueness), narrowed to a scope: their views
    (round_parts, judgments_raw, signals_raw) read these, each key once where the facts say it is stored twice."""
    return {
        "judgments": judgments_source(sources, scenario_ids),
        "rounds": rounds_source(sources, gen_id, scenario_ids),
        "signals": source(sources, "signals", gen_id),
    }


def embedding_dim(store: Store) -> int:
    """The embedding size of the rounds parts, from their Parquet footers (no data scan)."""
    dims: dict[int, str] = {}
    for part in store.parts("rounds"):
        field = pq.read_schema(part, filesystem=store.fs).field("embedding")
        if not pa.types.is_fixed_size_list(field.type):
            raise AnalysisError(f"{part}: rounds.embedding is {field.type}, expected a fixed-size float list")
        dims.setdefault(field.type.list_size, part)
    if len(dims) > 1:
        where = "; ".join(f"dim {d} in {p}" for d, p in dims.items())
        raise AnalysisError(f"store {store.uri} mixes embedding sizes ({where}); use one store per embedder")
    return next(iter(dims), EMBEDDING_DIM)


def _names(judge: str, asked: str) -> bool:
    """Whether ``asked`` names the stored ``judge``: its full name, or its id, the name before its description
    (``lexical-v1`` for ``lexical-v1 (deterministic reference-based token overlap, not an LLM)``)."""
    return asked in (judge, judge.split(" (", 1)[0])


def pick_judge(con: duckdb.DuckDBPyConnection, judge: str | None, version: str | None) -> tuple[str | None, str | None]:
    """The one judge (and prompt version) matching the request in ``judgments_raw``; say why if none or several."""
    rows = con.sql(sql.query("judges")).fetchall()
    found = [(j, v) for j, v, _ in rows if (judge is None or _names(j, judge)) and (version is None or v == version)]
    if not rows:
        return judge, version  # nothing judged yet: IS is NULL everywhere
    if not found:
        known = ", ".join(f"{j!r} (prompt {v!r}, {n} rows)" for j, v, n in rows)
        asked = f"judge {judge!r}" + (f", prompt version {version!r}" if version is not None else "")
        raise AnalysisError(f"no judgments by {asked}; the store has: {known}")
    if len({j for j, _ in found}) > 1:
        known = ", ".join(f"{j!r} (prompt {v!r})" for j, v in found)
        raise AnalysisError(f"several judges in the store ({known}); choose one with {{judge}}", settings=("judge",))
    if len({v for _, v in found}) > 1:
        known = ", ".join(repr(v) for _, v in found)
        raise AnalysisError(
            f"judge {found[0][0]!r} has several prompt versions in the store ({known}); choose one with "
            "{judge_prompt_version}",
            settings=("judge_prompt_version",),
        )
    return found[0]


# Where round_signals' per-round signals come from (signals_coverage): every trajectory has stored signals
# (read them: no embedding is read), none has (compute them all from the rounds' embeddings), or some have.
STORED, COMPUTED, MIXED = "stored", "computed", "mixed"


def _coverage(gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    stored = sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    return sql.query("signals_coverage", stored=stored)


def signals_source(
    con: duckdb.DuckDBPyConnection, store: Store, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None
) -> tuple[str, int]:
    """Which signals round_signals reads (STORED, COMPUTED or MIXED), and how many trajectories lack
    stored ones (reads key columns only). Needs the ``round_parts`` and ``signals_raw`` views."""
    if not store.parts("signals"):
        return COMPUTED, -1
    status = _coverage(gen_id, scenario_ids)
    ((missing, duplicated, orphaned),) = con.execute(sql.query("signals_status_counts", status=status)).fetchall()
    if missing == 0 and duplicated == 0 and orphaned == 0:
        return STORED, 0
    return MIXED, int(missing)  # the mixed relation reads stored rows only of trajectories that have rounds


def signals_lack_calls(
    con: duckdb.DuckDBPyConnection, kind: str, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None
) -> bool:
    """Whether stored signals rows in scope predate the prompt tokens and call modes (then round_signals
    reads those from the rounds: signals_calls_fill.sql). Computed signals carry them. Needs ``signals_raw``."""
    if kind == COMPUTED:
        return False
    stored = sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    ((lack,),) = con.execute(sql.query("signals_calls_missing", signals=stored)).fetchall()
    return bool(lack)


def has_batch_calls(
    con: duckdb.DuckDBPyConnection,
    kind: str,
    fill_calls: bool,
    judge_where: str,
    gen_id: str | None,
    scenario_ids: Sequence[str] | ScenarioSlice | None,
) -> bool:
    """Whether any call in scope was paid in batch mode (then the replay builds the batch calls' token lists).
    Reads the stored signals' mode columns when they have them all, else the rounds'; and the judge's."""
    if kind == STORED and not fill_calls:
        calls = sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    else:
        calls = sql.query("rounds_call_modes")
    ((batch,),) = con.execute(sql.query("batch_calls", signals=calls, judge_where=judge_where)).fetchall()
    return bool(batch)


@dataclass(frozen=True)
class StoreFacts:
    """What connect() reads from the store before it builds the views: a function of the parts in scope and of
    what was asked (judge, prompt version, validation), so :mod:`analysis.replay.derived` can keep it per part set."""

    judge: str | None
    judge_prompt_version: str | None
    dim: int  # embedding size (embedding_dim)
    signals: str  # where round_signals reads the signals (signals_source)
    missing: int  # trajectories without stored signals (-1: no signals table)
    rounds: int  # the deepest trajectory (deepest)
    fill_calls: bool  # signals_lack_calls
    batch: bool  # has_batch_calls
    gen_ids: tuple[str, ...] = ()  # the generations in scope, sorted (gen_ids.sql): the type of gen_id
    skip_parts: tuple[str, ...] = ()  # parts whose every row another part holds too: not read (replay.uniqueness)
    read_once: tuple[str, ...] = ()  # tables holding copies of a row even so: each key read once
    inputs: bool = False  # replay_inputs reads the store's trajectory_inputs rows (analysis.replay.stored_inputs)


def store_facts(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    judge: str | None,
    version: str | None,
    gen_id: str | None,
    scenario_ids: Sequence[str] | ScenarioSlice | None,
    validate: bool = True,
) -> StoreFacts:
    """Check the trajectories (``validate``), pick the judge and read the rest of :class:`StoreFacts`.
    Needs the ``round_parts``, ``judgments_raw`` and ``signals_raw`` views."""
    if validate:
        check_trajectories(con, store)
    judge, version = pick_judge(con, judge, version)
    signals, missing = signals_source(con, store, gen_id, scenario_ids)
    fill_calls = signals_lack_calls(con, signals, gen_id, scenario_ids)
    where = sql.judge_where(judge, version)
    batch = has_batch_calls(con, signals, fill_calls, where, gen_id, scenario_ids)
    gen_ids = tuple(g for (g,) in con.execute(sql.query("gen_ids")).fetchall())
    return StoreFacts(judge, version, embedding_dim(store), signals, missing, deepest(con), fill_calls, batch, gen_ids)


def signals_statements(
    kind: str,
    dim: int,
    gen_id: str | None,
    scenario_ids: Sequence[str] | ScenarioSlice | None,
    fill_calls: bool = False,
) -> tuple[list[str], str]:
    """The per-round signals relation of ``kind`` that round_signals reads (and, for MIXED, the
    ``signal_status`` table it needs), as (statements before, relation). ``fill_calls``: stored rows
    lack the prompt tokens and call modes (:func:`signals_lack_calls`), read from the rounds."""
    if kind == STORED:
        before, relation = [], sql.narrowed(sql.signals_stored_sql(), gen_id, scenario_ids)
    elif kind == COMPUTED:
        return [], sql.signals_from_rounds_sql("round_parts", dim)
    elif kind == MIXED:
        status = sql.create("signal_status", _coverage(gen_id, scenario_ids), table=True)
        before, relation = [status], sql.signals_mixed_sql(dim)
    else:
        raise ValueError(f"unknown signals source {kind!r}")
    return before, sql.signals_calls_fill_sql(relation) if fill_calls else relation


def judgments_unique(con: duckdb.DuckDBPyConnection, judge_where: str) -> bool:
    """Whether the judge ``judge_where`` picks has at most one judgment per draft in ``judgments_raw`` now
    (judgments_unique.sql): then the replay's inputs, computed once at connect, skip the pick."""
    ((unique,),) = con.execute(sql.query("judgments_unique", judge_where=judge_where)).fetchall()
    return bool(unique)


def deepest(con: duckdb.DuckDBPyConnection, relation: str = "round_parts") -> int:
    """The highest round of ``relation`` (1 when empty): how many round columns the replay needs."""
    ((rounds,),) = con.execute(sql.query("deepest_round", relation=relation)).fetchall()
    return int(rounds)


def check_trajectories(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    """Refuse a store whose rounds are not 1..T once each per trajectory (say which)."""
    bad = con.sql(sql.query("bad_trajectories")).fetchall()
    if bad:
        lines = "; ".join(
            f"gen_id={g!r} scenario_id={s!r}: {n} rows, {dn} distinct rounds, rounds {lo}..{hi}"
            for g, s, n, dn, lo, hi in bad
        )
        raise AnalysisError(f"store {store.uri}: trajectories must hold rounds 1..T once each; {lines}")


def build_statements(
    sources: TableSources,
    scope: ReplayScope,
    facts: StoreFacts,
    *,
    price_rows: Sequence[tuple[object, ...]] = (),
    materialize: bool = True,
    with_families: bool = True,
    unique_judgments: bool = False,
    stored_inputs: str | None = None,
) -> list[str]:
    """Every statement that sets up the views (shared by connect() and views.sql).

    ``scope``: what is replayed (resolved: :meth:`ReplayScope.resolved`); ``facts``: what was read of the store
    (:func:`store_facts`: the judge picked, where the per-round signals come from, the deepest trajectory, the
    generations in scope, the tables read once ...). ``price_rows``
    (:func:`analysis.replay.costs.generation_price_rows`): what the scope's price table gives each generation.
    ``with_families``: the other stopping families' rows (they need the Python UDF
    family executor, so the plain-CLI views.sql leaves them out).
    ``unique_judgments`` (:func:`judgments_unique`, checked just before): a materialised ``replay_inputs``
    joins the judgments without the pick (the ``round_signals`` view, evaluated later over parts that may
    have grown since, always picks).
    ``stored_inputs``: the store's trajectory_inputs rows in scope, shown to be what the parts say
    (:mod:`analysis.replay.stored_inputs`): replay_inputs reads them in place (a view, even with ``materialize``:
    they are what materialising would compute from the signals, grouped once by the writer), instead of
    grouping round_signals.
    """
    (weights, policies, _), gen_id, scenario_ids, delta = scope.settled(), scope.gen_id, scope.scenario_ids, scope.delta
    rounds, batch = facts.rounds, facts.batch
    where = sql.judge_where(facts.judge, facts.judge_prompt_version)
    before, relation = signals_statements(facts.signals, facts.dim, gen_id, scenario_ids, facts.fill_calls)
    inputs = "round_signals"
    if materialize and unique_judgments:
        inputs = f"({sql.round_signals_sql(relation, where, weights, unique=True)})"
    tables = ("scenarios", "generations", "failures", "manifests", "results", "feedback_embeddings")
    stmts = [sql.create(t, source(sources, t)) for t in tables]
    stmts += [
        *uniqueness.statements(guarded_sources(sources, gen_id, scenario_ids), facts.read_once),
        sql.create("judgments", sql.query("judgments", judge_where=where)),
        *before,
        # a view: replay_inputs (below) is what the replay reads, computed once from it
        sql.create("round_signals", sql.round_signals_sql(relation, where, weights)),
        sql.create("answers", sql.query("answers_view")),
        sql.create("answers_lenient", answers_lenient_sql()),  # read from the drafts when queried
        sql.create("rounds", sql.query("rounds")),
        *costs.statements(scope.prices, list(price_rows)),
        sql.create(
            "replay_inputs",
            sql.replay_inputs_sql(
                rounds,
                inputs,
                batch=batch,
                gen_type=sql.gen_id_type(facts.gen_ids),
                stored=None if stored_inputs is None else sql.StoredInputs(stored_inputs, weights),
            ),
            table=materialize and stored_inputs is None,
        ),
        # the per-trajectory lists (family replay, statistics, users): computed when read
        sql.create("trajectories", sql.trajectories_sql()),
        sql.create("dynamics", sql.dynamics_sql()),
        sql.create("dynamics_by_round", sql.dynamics_by_round_sql()),
        policies_sql(policies),
        sql.t95_table_sql(),
        sql.tost_plan_sql(detectable_margins()),
        sql.create("replay_core", sql.replay_sql(rounds, batch=batch)),
        sql.create("replay", sql.query("replay_core_only")),
        *(family_replay.statements(policies, facts.dim, materialize) if with_families else []),
        sql.create("scenario_splits", sql.query("scenario_splits")),
        # the user's scores (shp_ray.policy.scorers): empty views over a store without a scores table
        *score_statements(sql.narrowed(source(sources, "scores", gen_id), gen_id, scenario_ids), delta),
        # each draft's stated answer (storage.answers_schema): an empty view over a store without answers
        sql.create("draft_answers", sql.narrowed(source(sources, "draft_answers", gen_id), gen_id, scenario_ids)),
        sql.create("policy_summary", sql.policy_summary_sql(delta)),
        sql.create("sweep_summary", sql.sweep_summary_view_sql(delta)),
    ]
    return stmts


def score_statements(scores: str, delta: float) -> list[str]:
    """The views of the user's scores over the relation ``scores`` (rows of the scores table): before
    policy_summary, whose ``scores`` map reads score_summary (needs replay_core, scenario_splits, tost_plan)."""
    return [
        sql.create("scores_raw", scores),
        sql.create("scores", sql.query("scores")),
        sql.create("replay_scores", sql.replay_scores_sql(families=False)),
        sql.create("replay_score_map", sql.query("replay_score_map")),
        sql.create("score_summary", sql.score_summary_sql(delta)),
        *correctness_statements(),
    ]


def correctness_statements() -> list[str]:
    """The views of the pass/fail scores (hidden_pass, a user's 0/1 score; docs/correctness.md): each round's
    pass, the oracle's earliest passing round, every policy's pass_at_stop with its paired McNemar counts and p,
    and what revisions break and fix (needs replay_scores, replay_inputs, scenario_splits, policies)."""
    return [
        sql.create("pass_rounds", sql.query("pass_rounds")),
        sql.create("oracle_pass", sql.query("oracle_pass")),
        sql.create("correctness", sql.query("correctness")),
        sql.create(
            "correctness_summary",
            sql.query(
                "correctness_summary",
                p_base=sql.query("mcnemar_p", b="gained", c="lost"),
                p_k1=sql.query("mcnemar_p", b="gained_k1", c="lost_k1"),
            ),
        ),
        sql.create("pass_by_round", sql.query("pass_by_round")),
        sql.create("break_rate", sql.query("break_rate")),
    ]
